package wal

import (
	"encoding/binary"
	"fmt"
)

// # Records of a cluster member
//
// A cluster member's log is its raft log (docs/cluster.md). It uses the
// same segments and frames as a single node's; only the frame bodies
// differ. A member's body starts with a kind byte chosen outside the
// engine's entry versions (1 and 2), so neither kind of log can be replayed
// as the other:
//
//	kind 0xC1, raft entry, RaftEntryHeader bytes then data:
//	  offset  size  field
//	       0     1  kind (0xC1)
//	       1     8  group id
//	       9     8  term
//	      17     8  index
//	      25     1  entry type (raftpb.EntryType)
//	      26     -  data (an encoded engine entry, or a conf change)
//
//	kind 0xC2, hard state, RaftStateSize bytes:
//	       0     1  kind (0xC2)
//	       1     8  group id
//	       9     8  term
//	      17     8  vote
//	      25     8  commit
//
// Integers are little endian. The header has a fixed size so that a
// payload inside an entry's data sits at a known offset of the frame, as in
// a single node's log.
//
// Replay rules (RaftLog): a later entry at index i supersedes every entry
// read before it at an index >= i (raft truncated that suffix of its log),
// and the last hard state read wins.

const (
	// RaftEntryKind and RaftStateKind are the first byte of a member's
	// frame bodies.
	RaftEntryKind byte = 0xC1
	RaftStateKind byte = 0xC2
	// RaftEntryHeader is the size of an entry record before its data.
	RaftEntryHeader = 26
	// RaftStateSize is the size of a hard-state record.
	RaftStateSize = 33
)

// RaftEntry is a raft log entry as a member's log stores it.
type RaftEntry struct {
	Group uint64
	Term  uint64
	Index uint64
	Type  uint8
	Data  []byte
}

// RaftState is raft's HardState as a member's log stores it.
type RaftState struct {
	Group  uint64
	Term   uint64
	Vote   uint64
	Commit uint64
}

// AppendRaftEntry appends the record of e to dst.
func AppendRaftEntry(dst []byte, e *RaftEntry) []byte {
	dst = append(dst, RaftEntryKind)
	dst = binary.LittleEndian.AppendUint64(dst, e.Group)
	dst = binary.LittleEndian.AppendUint64(dst, e.Term)
	dst = binary.LittleEndian.AppendUint64(dst, e.Index)
	dst = append(dst, e.Type)
	return append(dst, e.Data...)
}

// AppendRaftState appends the record of s to dst.
func AppendRaftState(dst []byte, s *RaftState) []byte {
	dst = append(dst, RaftStateKind)
	dst = binary.LittleEndian.AppendUint64(dst, s.Group)
	dst = binary.LittleEndian.AppendUint64(dst, s.Term)
	dst = binary.LittleEndian.AppendUint64(dst, s.Vote)
	return binary.LittleEndian.AppendUint64(dst, s.Commit)
}

// DecodeRaftRecord decodes a member's frame body: exactly one of the
// results is non-nil on success. The entry's Data aliases body. A body
// that is not a member's record (a single node's engine entry, say) is an
// error wrapping ErrCorrupt that says what it found.
func DecodeRaftRecord(body []byte) (*RaftEntry, *RaftState, error) {
	if len(body) == 0 {
		return nil, nil, fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	le := binary.LittleEndian
	switch body[0] {
	case RaftEntryKind:
		if len(body) < RaftEntryHeader {
			return nil, nil, fmt.Errorf("%w: raft entry record of %d bytes, shorter than its %d-byte header", ErrCorrupt, len(body), RaftEntryHeader)
		}
		e := &RaftEntry{Group: le.Uint64(body[1:]), Term: le.Uint64(body[9:]), Index: le.Uint64(body[17:]), Type: body[25], Data: body[RaftEntryHeader:]}
		if e.Index == 0 {
			return nil, nil, fmt.Errorf("%w: raft entry record with index 0", ErrCorrupt)
		}
		return e, nil, nil
	case RaftStateKind:
		if len(body) != RaftStateSize {
			return nil, nil, fmt.Errorf("%w: hard state record of %d bytes, want %d", ErrCorrupt, len(body), RaftStateSize)
		}
		return nil, &RaftState{Group: le.Uint64(body[1:]), Term: le.Uint64(body[9:]), Vote: le.Uint64(body[17:]), Commit: le.Uint64(body[25:])}, nil
	case 1, 2:
		return nil, nil, fmt.Errorf("%w: a single node's record (engine entry version %d) in a cluster member's log: this data directory was written by a server started without --peers", ErrCorrupt, body[0])
	default:
		return nil, nil, fmt.Errorf("%w: unknown record kind %#02x", ErrCorrupt, body[0])
	}
}

// RaftLog collects a member's records during replay, applying the
// supersede rule. Entries are kept in index order with the log position of
// their frame (payload references point there).
type RaftLog struct {
	Group    uint64
	Entries  []RaftEntry
	Pos      []Position // Pos[i] is where Entries[i]'s frame starts
	State    RaftState
	HasState bool
}

// Add takes the record at pos. Entries must be copied by the caller if body
// is reused (Replay's bodies are valid only during its callback), so Add
// copies the data.
func (rl *RaftLog) Add(pos Position, body []byte) error {
	e, s, err := DecodeRaftRecord(body)
	if err != nil {
		return fmt.Errorf("record at %s: %w", pos, err)
	}
	if s != nil {
		if s.Group != rl.Group {
			return fmt.Errorf("record at %s: %w: hard state of raft group %d in the log of group %d", pos, ErrCorrupt, s.Group, rl.Group)
		}
		rl.State, rl.HasState = *s, true
		return nil
	}
	if e.Group != rl.Group {
		return fmt.Errorf("record at %s: %w: entry of raft group %d in the log of group %d", pos, ErrCorrupt, e.Group, rl.Group)
	}
	if n := len(rl.Entries); n > 0 {
		first, last := rl.Entries[0].Index, rl.Entries[n-1].Index
		switch {
		case e.Index > last+1:
			return fmt.Errorf("record at %s: %w: raft entry %d after entry %d leaves a gap", pos, ErrCorrupt, e.Index, last)
		case e.Index < first:
			rl.Entries, rl.Pos = rl.Entries[:0], rl.Pos[:0]
		default:
			keep := int(e.Index - first)
			rl.Entries, rl.Pos = rl.Entries[:keep], rl.Pos[:keep]
		}
		if n := len(rl.Entries); n > 0 && rl.Entries[n-1].Term > e.Term {
			return fmt.Errorf("record at %s: %w: raft entry %d of term %d follows entry %d of the later term %d", pos, ErrCorrupt, e.Index, e.Term, rl.Entries[n-1].Index, rl.Entries[n-1].Term)
		}
	}
	e.Data = append([]byte(nil), e.Data...)
	rl.Entries = append(rl.Entries, *e)
	rl.Pos = append(rl.Pos, pos)
	return nil
}
