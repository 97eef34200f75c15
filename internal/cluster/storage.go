// Package cluster replicates chronoq's engine with raft
// (go.etcd.io/raft/v3): a member's write-ahead log is its raft log, and one
// goroutine drives a raft.RawNode together with the engine. The design is
// in docs/cluster.md; the log records in internal/wal/raftrec.go.
package cluster

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/wal"
)

// Storage is raft's Storage for a member: a raft.MemoryStorage fed from the
// member's log, as etcd's own server keeps one, plus the log position of
// every entry it holds, so that an entry applied to the engine has its
// payload references point into the local log file.
//
// Memory: every entry since the last compaction, data included. Compact
// bounds it (docs/cluster.md, "raft.Storage").
type Storage struct {
	*raft.MemoryStorage
	// pos[i] is the frame position of entry posFirst+i.
	pos      []wal.Position
	posFirst uint64
}

// NewStorage returns an empty storage.
func NewStorage() *Storage {
	return &Storage{MemoryStorage: raft.NewMemoryStorage(), posFirst: 1}
}

// LoadStorage builds the storage from what replay collected. It refuses a
// hard state whose commit index lies beyond the entries the log holds (raft
// would otherwise stop the process with a panic).
func LoadStorage(rl *wal.RaftLog) (*Storage, error) {
	s := NewStorage()
	if len(rl.Entries) > 0 {
		if first := rl.Entries[0].Index; first != 1 {
			return nil, fmt.Errorf("cluster: the log starts at raft entry %d, and no raft snapshot covers the entries before it", first)
		}
		ents := make([]raftpb.Entry, len(rl.Entries))
		for i := range rl.Entries {
			e := &rl.Entries[i]
			ents[i] = raftpb.Entry{Term: e.Term, Index: e.Index, Type: raftpb.EntryType(e.Type), Data: e.Data}
		}
		if err := s.MemoryStorage.Append(ents); err != nil {
			return nil, fmt.Errorf("cluster: load raft entries: %w", err)
		}
		s.pos = append(s.pos[:0], rl.Pos...)
	}
	if rl.HasState {
		last, _ := s.LastIndex()
		if rl.State.Commit > last {
			return nil, fmt.Errorf("cluster: %w: the hard state says entry %d is committed, but the log holds entries only up to %d", wal.ErrCorrupt, rl.State.Commit, last)
		}
		if err := s.SetHardState(raftpb.HardState{Term: rl.State.Term, Vote: rl.State.Vote, Commit: rl.State.Commit}); err != nil {
			return nil, fmt.Errorf("cluster: load hard state: %w", err)
		}
	}
	return s, nil
}

// Append adds entries that were just made durable at the given positions,
// replacing any conflicting suffix, as MemoryStorage.Append does.
func (s *Storage) Append(ents []raftpb.Entry, pos []wal.Position) error {
	if len(ents) != len(pos) {
		return fmt.Errorf("cluster: %d entries with %d positions", len(ents), len(pos))
	}
	if len(ents) == 0 {
		return nil
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	first := ents[0].Index
	if first < s.posFirst {
		// Entries the storage already compacted are ignored by
		// MemoryStorage.Append; skip their positions the same way.
		skip := s.posFirst - first
		if skip >= uint64(len(pos)) {
			return nil
		}
		pos, first = pos[skip:], s.posFirst
	}
	keep := first - s.posFirst
	if keep > uint64(len(s.pos)) {
		return fmt.Errorf("cluster: entry %d appended after entry %d leaves a gap", first, s.posFirst+uint64(len(s.pos))-1)
	}
	s.pos = append(s.pos[:keep], pos...)
	return nil
}

var errNoPosition = errors.New("no log position for this raft entry")

// Position is where entry i's frame starts in the local log.
func (s *Storage) Position(i uint64) (wal.Position, error) {
	if i < s.posFirst || i-s.posFirst >= uint64(len(s.pos)) {
		return wal.Position{}, fmt.Errorf("cluster: entry %d: %w", i, errNoPosition)
	}
	return s.pos[i-s.posFirst], nil
}

// Compact drops entries up to and including i (raft needs a snapshot at i
// or later to stand for them).
func (s *Storage) Compact(i uint64) error {
	if err := s.MemoryStorage.Compact(i); err != nil {
		return err
	}
	if i >= s.posFirst {
		drop := min(i-s.posFirst+1, uint64(len(s.pos)))
		s.pos = append([]wal.Position(nil), s.pos[drop:]...)
		s.posFirst = i + 1
	}
	return nil
}
