package cluster

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openLog(t *testing.T, dir string) (*wal.Log, *Storage) {
	t.Helper()
	l, err := wal.Open(dir, wal.Options{Logger: quiet, SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rl := &wal.RaftLog{Group: 1}
	if _, err := l.Replay(wal.Position{}, rl.Add); err != nil {
		l.Close()
		t.Fatalf("replay: %v", err)
	}
	s, err := LoadStorage(rl, l)
	if err != nil {
		l.Close()
		t.Fatalf("load storage: %v", err)
	}
	return l, s
}

// persist writes entries and a hard state as a member does for one Ready
// (one Commit), returning the entries' positions; commit=false leaves them
// unwritten, as a crash before the fdatasync would.
func persist(t *testing.T, l *wal.Log, ents []raftpb.Entry, hs raftpb.HardState, commit bool) []wal.Position {
	t.Helper()
	var pos []wal.Position
	for _, e := range ents {
		p, err := l.Append(wal.AppendRaftEntry(nil, &wal.RaftEntry{Group: 1, Term: e.Term, Index: e.Index, Type: uint8(e.Type), Data: e.Data}))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if _, err := l.Append(wal.AppendRaftState(nil, &wal.RaftState{Group: 1, Term: hs.Term, Vote: hs.Vote, Commit: hs.Commit})); err != nil {
		t.Fatal(err)
	}
	if commit {
		if err := l.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return pos
}

func ents(term, from, to uint64, tag string) []raftpb.Entry {
	var out []raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, raftpb.Entry{Term: term, Index: i, Data: []byte(fmt.Sprintf("%s-%d-%d", tag, term, i))})
	}
	return out
}

// describe lists the storage's entries as term:index:data.
func describe(t *testing.T, s *Storage) string {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last < first {
		return ""
	}
	es, err := s.Entries(first, last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%d:%d:%s", e.Term, e.Index, e.Data))
	}
	return strings.Join(parts, " ")
}

// checkPositions reads every entry's frame back through its recorded
// position and compares it with the entry.
func checkPositions(t *testing.T, l *wal.Log, s *Storage) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	for i := first; i <= last; i++ {
		p, err := s.Position(i)
		if err != nil {
			t.Fatal(err)
		}
		body, err := l.ReadFrame(p)
		if err != nil {
			t.Fatalf("entry %d at %s: %v", i, p, err)
		}
		e, _, err := wal.DecodeRaftRecord(body)
		if err != nil || e == nil || e.Index != i {
			t.Fatalf("frame at %s is not entry %d: %v %v", p, i, e, err)
		}
		want, _ := s.Entries(i, i+1, 1<<30)
		if !bytes.Equal(e.Data, want[0].Data) {
			t.Fatalf("entry %d: frame data %q, storage %q", i, e.Data, want[0].Data)
		}
	}
}

func TestStorageReplaySupersedesAndLosesUnsynced(t *testing.T) {
	dir := t.TempDir()
	l, s := openLog(t, dir)
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("fresh log has last index %d", last)
	}
	p := persist(t, l, ents(1, 1, 5, "a"), raftpb.HardState{Term: 1, Vote: 1, Commit: 2}, true)
	if err := s.Append(ents(1, 1, 5, "a"), p); err != nil {
		t.Fatal(err)
	}
	// A new leader of term 2 overwrites 3..5 with 3..4.
	p = persist(t, l, ents(2, 3, 4, "b"), raftpb.HardState{Term: 2, Vote: 2, Commit: 3}, true)
	if err := s.Append(ents(2, 3, 4, "b"), p); err != nil {
		t.Fatal(err)
	}
	before := describe(t, s)
	if before != "1:1:a-1-1 1:2:a-1-2 2:3:b-2-3 2:4:b-2-4" {
		t.Fatalf("storage before the crash: %s", before)
	}
	checkPositions(t, l, s)
	// Entry 5 of term 2 is appended but never synced: the crash loses it.
	persist(t, l, ents(2, 5, 5, "c"), raftpb.HardState{Term: 2, Vote: 2, Commit: 4}, false)
	if err := l.Crash(); err != nil {
		t.Fatal(err)
	}
	l, s = openLog(t, dir)
	defer l.Close()
	if got := describe(t, s); got != before {
		t.Fatalf("after replay: %s\nwant: %s", got, before)
	}
	hs, _, _ := s.InitialState()
	if hs.Term != 2 || hs.Vote != 2 || hs.Commit != 3 {
		t.Fatalf("hard state after replay %+v, want term 2 vote 2 commit 3", hs)
	}
	checkPositions(t, l, s)
	// Appends continue after the replayed tail, and supersede again.
	p = persist(t, l, ents(3, 2, 2, "d"), raftpb.HardState{Term: 3, Vote: 3, Commit: 1}, true)
	if err := s.Append(ents(3, 2, 2, "d"), p); err != nil {
		t.Fatal(err)
	}
	checkPositions(t, l, s)
	if got := describe(t, s); got != "1:1:a-1-1 3:2:d-3-2" {
		t.Fatalf("after a second supersede: %s", got)
	}
}

// A torn last write (a Ready whose fdatasync never finished) is cut by the
// log's rules, and the member comes back with the Ready before it.
func TestStorageTornTail(t *testing.T) {
	dir := t.TempDir()
	l, s := openLog(t, dir)
	p := persist(t, l, ents(1, 1, 3, "a"), raftpb.HardState{Term: 1, Vote: 1, Commit: 3}, true)
	if err := s.Append(ents(1, 1, 3, "a"), p); err != nil {
		t.Fatal(err)
	}
	big := ents(2, 3, 4, strings.Repeat("x", 3000))
	p = persist(t, l, big, raftpb.HardState{Term: 2, Vote: 2, Commit: 4}, true)
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Zero the second half of the last write: its sectors never landed.
	path := filepath.Join(dir, fmt.Sprintf("%020d.log", p[0].Segment))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mid := (int64(p[0].Offset) + int64(end.Offset)) / 2 &^ 511
	if _, err := f.WriteAt(make([]byte, int64(end.Offset)-mid), mid); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, s = openLog(t, dir)
	defer l.Close()
	if got := describe(t, s); got != "1:1:a-1-1 1:2:a-1-2 1:3:a-1-3" {
		t.Fatalf("after a torn write: %s", got)
	}
	hs, _, _ := s.InitialState()
	if hs.Term != 1 || hs.Commit != 3 {
		t.Fatalf("hard state after a torn write %+v, want the one of the write before", hs)
	}
	checkPositions(t, l, s)
}

func TestLoadStorageRefusesCommitBeyondLog(t *testing.T) {
	rl := &wal.RaftLog{Group: 1}
	for _, b := range [][]byte{
		wal.AppendRaftEntry(nil, &wal.RaftEntry{Group: 1, Term: 1, Index: 1}),
		wal.AppendRaftState(nil, &wal.RaftState{Group: 1, Term: 1, Commit: 5}),
	} {
		if err := rl.Add(wal.Position{Segment: 1, Offset: 64}, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadStorage(rl, nil); err == nil || !strings.Contains(err.Error(), "entries only up to 1") {
		t.Fatalf("err = %v, want a refusal naming the last entry", err)
	}
}

// Entries beyond the in-memory window come back from the log, byte for
// byte, and the window stays bounded.
func TestStorageReadsEvictedEntriesFromTheLog(t *testing.T) {
	defer func(n int) { cacheEntries = n }(cacheEntries)
	cacheEntries = 5
	dir := t.TempDir()
	l, s := openLog(t, dir)
	defer l.Close()
	all := ents(1, 1, 40, "e")
	for i := 0; i < len(all); i += 7 {
		batch := all[i:min(i+7, len(all))]
		p := persist(t, l, batch, raftpb.HardState{Term: 1, Vote: 1, Commit: batch[len(batch)-1].Index}, true)
		if err := s.Append(batch, p); err != nil {
			t.Fatal(err)
		}
		if s.cached > cacheEntries {
			t.Fatalf("%d entries hold their data in memory, more than %d", s.cached, cacheEntries)
		}
	}
	if s.ents[0].data != nil {
		t.Fatal("the oldest entry still holds its data")
	}
	got, err := s.Entries(1, 41, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 {
		t.Fatalf("got %d entries, want 40", len(got))
	}
	for i, e := range got {
		if e.Index != all[i].Index || e.Term != all[i].Term || !bytes.Equal(e.Data, all[i].Data) {
			t.Fatalf("entry %d: %d/%d %q, want %q", i+1, e.Index, e.Term, e.Data, all[i].Data)
		}
	}
	// A size limit returns at least one entry and stops before exceeding it.
	one, err := s.Entries(1, 41, 1)
	if err != nil || len(one) != 1 {
		t.Fatalf("with a 1-byte limit: %d entries, %v", len(one), err)
	}
	// A conflicting suffix replaces entries whose data was evicted too.
	p := persist(t, l, ents(2, 3, 4, "f"), raftpb.HardState{Term: 2, Vote: 2, Commit: 2}, true)
	if err := s.Append(ents(2, 3, 4, "f"), p); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, s); got != "1:1:e-1-1 1:2:e-1-2 2:3:f-2-3 2:4:f-2-4" {
		t.Fatalf("after a supersede: %s", got)
	}
	checkPositions(t, l, s)
}
