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

// Storage is raft's Storage for a member, over its log: for every entry
// it keeps the term, type and the position of the entry's frame in the
// member's log, and the data only of the most recent entries (cacheEntries
// of them, at most cacheBytes); older entries are read back from the log
// (with the frame's CRC checked) when raft asks for them — to send them to
// a follower that lags, or to rebuild the engine. Memory therefore grows by
// about 40 bytes per entry, not by the entries' payloads (docs/cluster.md,
// "raft.Storage"), and only until the next raft snapshot: CreateSnapshot
// and Compact drop the entries it covers, so the storage holds the entries
// since the last snapshot (plus a catch-up window) and the snapshot's
// metadata; the snapshot's data is built from the member's log on demand
// (snapshot.go).
//
// Storage belongs to the member's goroutine, like the raft.RawNode that
// calls it.
type Storage struct {
	log   *wal.Log // nil: entries are all in memory (tests)
	hs    raftpb.HardState
	first uint64 // index of ents[0]
	ents  []stored

	cached      int // entries from cacheFrom on hold their data
	cachedBytes int
	cacheFrom   int // index into ents of the oldest entry whose data is held

	// snap is the newest raft snapshot (zero Index: none); entries up to
	// snap.Index are not held (first is at most snap.Index+1).
	snap raftpb.SnapshotMetadata
	// compactTerm is the term of entry first-1 when Compact left it
	// below the snapshot (a catch-up window), as raft asks for it to
	// send the entries after it.
	compactTerm uint64
	// snapData builds the data of snap for raft to send to a follower
	// (nil: no snapshot can be sent).
	snapData func() ([]byte, error)
}

type stored struct {
	term uint64
	typ  raftpb.EntryType
	pos  wal.Position
	data []byte // nil once evicted (read from the log)
	size int
}

// How many recent entries keep their data in memory; variables so that
// tests can make nearly every read go to the log.
var (
	cacheEntries = 4096
	cacheBytes   = 64 << 20
)

// NewStorage returns an empty storage reading evicted entries from log.
func NewStorage(log *wal.Log) *Storage {
	return &Storage{log: log, first: 1}
}

// LoadStorage builds the storage from what replay collected. It refuses a
// hard state whose commit index lies beyond the entries the log holds (raft
// would otherwise stop the process with a panic).
func LoadStorage(rl *wal.RaftLog, log *wal.Log) (*Storage, error) {
	return LoadStorageAt(rl, raftpb.SnapshotMetadata{}, log)
}

// LoadStorageAt builds the storage on top of the raft snapshot snap (zero
// Index: none): the log's entries must continue it, starting at
// snap.Index+1 (entries it covers are dropped by the caller's replay).
func LoadStorageAt(rl *wal.RaftLog, snap raftpb.SnapshotMetadata, log *wal.Log) (*Storage, error) {
	s := NewStorage(log)
	if snap.Index > 0 {
		s.snap, s.first = snap, snap.Index+1
	}
	if len(rl.Entries) > 0 {
		if first := rl.Entries[0].Index; first != s.first {
			if snap.Index == 0 {
				return nil, fmt.Errorf("cluster: the log starts at raft entry %d, and no raft snapshot covers the entries before it", first)
			}
			return nil, fmt.Errorf("cluster: %w: the log's raft entries start at %d, but its newest raft snapshot covers entries up to %d: the log does not continue the snapshot", wal.ErrCorrupt, first, snap.Index)
		}
		ents := make([]raftpb.Entry, len(rl.Entries))
		for i := range rl.Entries {
			e := &rl.Entries[i]
			ents[i] = raftpb.Entry{Term: e.Term, Index: e.Index, Type: raftpb.EntryType(e.Type), Data: e.Data}
		}
		if err := s.Append(ents, rl.Pos); err != nil {
			return nil, fmt.Errorf("cluster: load raft entries: %w", err)
		}
	}
	if rl.HasState {
		last, _ := s.LastIndex()
		if rl.State.Commit > last {
			return nil, fmt.Errorf("cluster: %w: the hard state says entry %d is committed, but the log holds entries only up to %d", wal.ErrCorrupt, rl.State.Commit, last)
		}
		s.SetHardState(raftpb.HardState{Term: rl.State.Term, Vote: rl.State.Vote, Commit: rl.State.Commit})
	}
	return s, nil
}

// InitialState is raft's: the hard state and the membership of the
// newest snapshot; the conf-change entries after it are applied again on
// every start.
func (s *Storage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	return s.hs, s.snap.ConfState, nil
}

// SetHardState records the hard state that was just made durable.
func (s *Storage) SetHardState(hs raftpb.HardState) error {
	s.hs = hs
	return nil
}

// FirstIndex is the first entry held.
func (s *Storage) FirstIndex() (uint64, error) { return s.first, nil }

// LastIndex is the last entry held (FirstIndex-1 when empty).
func (s *Storage) LastIndex() (uint64, error) { return s.first + uint64(len(s.ents)) - 1, nil }

// Term is the term of entry i; 0 for the empty log's entry 0, the
// snapshot's term for the entry a snapshot ends with.
func (s *Storage) Term(i uint64) (uint64, error) {
	if i == s.first-1 {
		if i == s.snap.Index {
			return s.snap.Term, nil
		}
		return s.compactTerm, nil
	}
	if i < s.first {
		return 0, raft.ErrCompacted
	}
	if i-s.first >= uint64(len(s.ents)) {
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-s.first].term, nil
}

// Snapshot is raft's: the newest snapshot with its data, built from the
// member's log (snapshot.go). raft asks only when a follower needs entries
// the storage no longer holds. When the data cannot be built (too large to
// send, or unreadable) raft is told it is temporarily unavailable and
// asks again later; the reason is logged by the builder.
func (s *Storage) Snapshot() (raftpb.Snapshot, error) {
	if s.snap.Index == 0 {
		return raftpb.Snapshot{}, nil
	}
	if s.snapData == nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	data, err := s.snapData()
	if err != nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	return raftpb.Snapshot{Metadata: s.snap, Data: data}, nil
}

// SnapshotMeta is the newest snapshot's metadata (zero Index: none).
func (s *Storage) SnapshotMeta() raftpb.SnapshotMetadata { return s.snap }

// CreateSnapshot records a snapshot of the state after entry meta.Index,
// which must be held (or be the current snapshot's); data builds its bytes
// when raft needs to send it. Entries are dropped by Compact.
func (s *Storage) CreateSnapshot(meta raftpb.SnapshotMetadata, data func() ([]byte, error)) error {
	if meta.Index < s.snap.Index {
		return fmt.Errorf("cluster: snapshot at entry %d is older than the current one at %d", meta.Index, s.snap.Index)
	}
	if last, _ := s.LastIndex(); meta.Index > last {
		return fmt.Errorf("cluster: snapshot at entry %d beyond the last entry %d", meta.Index, last)
	}
	term, err := s.Term(meta.Index)
	if err != nil {
		return fmt.Errorf("cluster: snapshot at entry %d: %w", meta.Index, err)
	}
	if term != meta.Term {
		return fmt.Errorf("cluster: snapshot at entry %d of term %d, but the entry has term %d", meta.Index, meta.Term, term)
	}
	s.snap, s.snapData = meta, data
	return nil
}

// Compact drops the entries up to and including index, which must not lie
// beyond the snapshot (raft would otherwise lose entries nobody can send).
func (s *Storage) Compact(index uint64) error {
	if index > s.snap.Index {
		return fmt.Errorf("cluster: compact up to entry %d beyond the snapshot at %d", index, s.snap.Index)
	}
	if index < s.first {
		return nil
	}
	term, err := s.Term(index)
	if err != nil {
		return fmt.Errorf("cluster: compact up to entry %d: %w", index, err)
	}
	drop := int(index - s.first + 1)
	for i := max(s.cacheFrom, 0); i < drop; i++ {
		if s.ents[i].data != nil {
			s.cached--
			s.cachedBytes -= s.ents[i].size
		}
	}
	// Copy, so the dropped prefix's memory goes.
	s.ents = append([]stored(nil), s.ents[drop:]...)
	s.cacheFrom = max(s.cacheFrom-drop, 0)
	s.first, s.compactTerm = index+1, term
	return nil
}

// ApplySnapshot replaces the whole storage with a snapshot received from
// the leader: every entry held is dropped (raft discards its log for it).
func (s *Storage) ApplySnapshot(meta raftpb.SnapshotMetadata, data func() ([]byte, error)) error {
	if meta.Index < s.snap.Index {
		return fmt.Errorf("cluster: received snapshot at entry %d is older than the current one at %d", meta.Index, s.snap.Index)
	}
	s.snap, s.snapData = meta, data
	s.ents, s.first = nil, meta.Index+1
	s.cached, s.cachedBytes, s.cacheFrom = 0, 0, 0
	return nil
}

// FirstPosition is where the oldest held entry's frame starts in the log
// (ok false when no entry is held): log segments before it hold no entry
// raft may still ask for.
func (s *Storage) FirstPosition() (wal.Position, bool) {
	if len(s.ents) == 0 {
		return wal.Position{}, false
	}
	return s.ents[0].pos, true
}

// Entries returns entries [lo, hi), at most maxSize bytes of them but at
// least one, reading evicted ones back from the log.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	if lo < s.first {
		return nil, raft.ErrCompacted
	}
	if last, _ := s.LastIndex(); hi > last+1 {
		return nil, fmt.Errorf("cluster: entries up to %d asked, the log holds up to %d", hi-1, last)
	}
	var out []raftpb.Entry
	var size uint64
	for i := lo; i < hi; i++ {
		st := &s.ents[i-s.first]
		data := st.data
		if data == nil && st.size > 0 {
			var err error
			if data, err = s.read(i, st); err != nil {
				return nil, err
			}
		}
		e := raftpb.Entry{Term: st.term, Index: i, Type: st.typ, Data: data}
		size += uint64(e.Size())
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Storage) read(i uint64, st *stored) ([]byte, error) {
	if s.log == nil {
		return nil, fmt.Errorf("cluster: entry %d: %w", i, errNoPosition)
	}
	body, err := s.log.ReadFrame(st.pos)
	if err != nil {
		return nil, fmt.Errorf("cluster: read raft entry %d at %s: %w", i, st.pos, err)
	}
	e, _, err := wal.DecodeRaftRecord(body)
	if err != nil || e == nil || e.Index != i || e.Term != st.term {
		return nil, fmt.Errorf("cluster: %w: the frame at %s is not raft entry %d of term %d", wal.ErrCorrupt, st.pos, i, st.term)
	}
	return e.Data, nil
}

// Append adds entries that were just made durable at the given positions,
// replacing any conflicting suffix.
func (s *Storage) Append(ents []raftpb.Entry, pos []wal.Position) error {
	if len(ents) != len(pos) {
		return fmt.Errorf("cluster: %d entries with %d positions", len(ents), len(pos))
	}
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].Index
	if first < s.first {
		skip := s.first - first
		if skip >= uint64(len(ents)) {
			return nil
		}
		ents, pos, first = ents[skip:], pos[skip:], s.first
	}
	keep := first - s.first
	if keep > uint64(len(s.ents)) {
		return fmt.Errorf("cluster: entry %d appended after entry %d leaves a gap", first, s.first+uint64(len(s.ents))-1)
	}
	for i := int(keep); i < len(s.ents); i++ {
		if i >= s.cacheFrom && s.ents[i].data != nil {
			s.cached--
			s.cachedBytes -= s.ents[i].size
		}
	}
	s.ents = s.ents[:keep]
	s.cacheFrom = min(s.cacheFrom, len(s.ents))
	for i, e := range ents {
		s.ents = append(s.ents, stored{term: e.Term, typ: e.Type, pos: pos[i], data: e.Data, size: len(e.Data)})
		if len(e.Data) > 0 {
			s.cached++
			s.cachedBytes += len(e.Data)
		}
	}
	for (s.cached > cacheEntries || s.cachedBytes > cacheBytes) && s.cacheFrom < len(s.ents) && s.log != nil {
		st := &s.ents[s.cacheFrom]
		if st.data != nil {
			s.cached--
			s.cachedBytes -= st.size
			st.data = nil
		}
		s.cacheFrom++
	}
	return nil
}

var errNoPosition = errors.New("no log position for this raft entry")

// Position is where entry i's frame starts in the local log.
func (s *Storage) Position(i uint64) (wal.Position, error) {
	if i < s.first || i-s.first >= uint64(len(s.ents)) {
		return wal.Position{}, fmt.Errorf("cluster: entry %d: %w", i, errNoPosition)
	}
	return s.ents[i-s.first].pos, nil
}
