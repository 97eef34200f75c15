package wal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRaftRecordRoundTrip(t *testing.T) {
	e := &RaftEntry{Group: 7, Term: 3, Index: 42, Type: 1, Data: []byte("payload")}
	b := AppendRaftEntry([]byte("xx"), e)[2:]
	if len(b) != RaftEntryHeader+len(e.Data) {
		t.Fatalf("entry record is %d bytes, want %d", len(b), RaftEntryHeader+len(e.Data))
	}
	ge, gs, err := DecodeRaftRecord(b)
	if err != nil || gs != nil || ge == nil {
		t.Fatalf("decode entry: %v %v %v", ge, gs, err)
	}
	if ge.Group != 7 || ge.Term != 3 || ge.Index != 42 || ge.Type != 1 || !bytes.Equal(ge.Data, e.Data) {
		t.Fatalf("decoded %+v, want %+v", ge, e)
	}
	s := &RaftState{Group: 7, Term: 4, Vote: 2, Commit: 41}
	b = AppendRaftState(nil, s)
	if len(b) != RaftStateSize {
		t.Fatalf("state record is %d bytes, want %d", len(b), RaftStateSize)
	}
	ge, gs, err = DecodeRaftRecord(b)
	if err != nil || ge != nil || gs == nil || *gs != *s {
		t.Fatalf("decode state: %v %+v %v", ge, gs, err)
	}
}

func TestRaftRecordRefusesBadBodies(t *testing.T) {
	full := AppendRaftEntry(nil, &RaftEntry{Group: 1, Term: 1, Index: 1})
	zeroIdx := AppendRaftEntry(nil, &RaftEntry{Group: 1, Term: 1, Index: 0})
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty", "", "empty record"},
		{"short entry", string(full[:RaftEntryHeader-1]), "shorter than its 26-byte header"},
		{"index 0", string(zeroIdx), "index 0"},
		{"short state", string(AppendRaftState(nil, &RaftState{})[:RaftStateSize-1]), "want 33"},
		{"single-node entry", "\x02rest", "started without --peers"},
		{"unknown kind", "\x7f", "unknown record kind"},
	} {
		_, _, err := DecodeRaftRecord([]byte(tc.body))
		if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrCorrupt mentioning %q", tc.name, err, tc.want)
		}
	}
}

func raftEnt(term, index uint64, data string) []byte {
	return AppendRaftEntry(nil, &RaftEntry{Group: 1, Term: term, Index: index, Data: []byte(data)})
}

func TestRaftLogSupersede(t *testing.T) {
	rl := &RaftLog{Group: 1}
	add := func(b []byte) {
		t.Helper()
		if err := rl.Add(Position{Segment: 1, Offset: uint32(64 + len(rl.Entries))}, b); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= 5; i++ {
		add(raftEnt(1, i, "a"))
	}
	add(AppendRaftState(nil, &RaftState{Group: 1, Term: 1, Vote: 1, Commit: 2}))
	add(raftEnt(2, 3, "b")) // a new leader overwrote 3..5
	add(raftEnt(2, 4, "b"))
	add(AppendRaftState(nil, &RaftState{Group: 1, Term: 2, Vote: 2, Commit: 4}))
	var got []string
	for _, e := range rl.Entries {
		got = append(got, string(rune('0'+e.Term))+":"+string(rune('0'+e.Index))+string(e.Data))
	}
	if strings.Join(got, " ") != "1:1a 1:2a 2:3b 2:4b" {
		t.Fatalf("entries after supersede: %v", got)
	}
	if len(rl.Pos) != len(rl.Entries) {
		t.Fatalf("%d positions for %d entries", len(rl.Pos), len(rl.Entries))
	}
	if !rl.HasState || rl.State.Term != 2 || rl.State.Commit != 4 {
		t.Fatalf("hard state %+v, want the last one", rl.State)
	}
	// An entry below the first one replaces everything.
	add(raftEnt(3, 1, "c"))
	if len(rl.Entries) != 1 || string(rl.Entries[0].Data) != "c" {
		t.Fatalf("entries after supersede at the first index: %+v", rl.Entries)
	}
}

func TestRaftLogRefusesInconsistentLogs(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs [][]byte
		want string
	}{
		{"gap", [][]byte{raftEnt(1, 1, ""), raftEnt(1, 3, "")}, "leaves a gap"},
		{"term goes back", [][]byte{raftEnt(1, 1, ""), raftEnt(2, 2, ""), raftEnt(1, 3, "")}, "later term"},
		{"other group", [][]byte{AppendRaftEntry(nil, &RaftEntry{Group: 2, Term: 1, Index: 1})}, "group 2"},
		{"other group state", [][]byte{AppendRaftState(nil, &RaftState{Group: 9})}, "group 9"},
		{"single-node record", [][]byte{{2, 0, 0}}, "without --peers"},
	} {
		rl := &RaftLog{Group: 1}
		var err error
		for i, b := range tc.recs {
			if err = rl.Add(Position{Segment: 1, Offset: uint32(i)}, b); err != nil {
				break
			}
		}
		if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrCorrupt mentioning %q", tc.name, err, tc.want)
		}
	}
}
