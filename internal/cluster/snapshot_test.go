package cluster

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// solo is a one-member group: it commits alone, which is enough to drive
// snapshots, compaction and restarts without a network.
type solo struct {
	t       *testing.T
	cfg     Config
	n       *Node
	now     time.Time
	applied int // OnApplied calls since open
}

func openSolo(t *testing.T, dir string, entries uint64) *solo {
	t.Helper()
	s := &solo{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.cfg = Config{
		ID: 1, Peers: []uint64{1}, Dir: dir,
		WAL:             wal.Options{Sync: wal.SyncNever, SegmentSize: 64 << 10, Logger: quiet},
		Engine:          engine.Options{Entropy: rand.NewChaCha8([32]byte{1})},
		Logger:          quiet,
		SnapshotEntries: entries,
		SnapshotBytes:   32 << 10,
		SnapshotCatchUp: ^uint64(0),
		OnApplied:       func(uint64, uint64) { s.applied++ },
	}
	s.open()
	return s
}

func (s *solo) open() {
	s.t.Helper()
	n, err := Open(s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.n, s.applied = n, 0
	for i := 0; i < 100 && n.CanExec() != nil; i++ {
		if err := n.Process(); err != nil {
			s.t.Fatal(err)
		}
		if err := n.Campaign(); err != nil {
			s.t.Fatal(err)
		}
		if err := n.Process(); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := n.CanExec(); err != nil {
		s.t.Fatalf("the solo member does not lead: %v", err)
	}
}

// exec runs fn as a command and waits for its commit.
func (s *solo) exec(fn func(e *engine.Engine, now time.Time) (any, error)) any {
	s.t.Helper()
	s.now = s.now.Add(time.Millisecond)
	for i := 0; i < 100 && s.n.CatchingUp(); i++ {
		if err := s.n.Process(); err != nil {
			s.t.Fatal(err)
		}
	}
	p := s.n.Exec(s.now, true, fn)
	for i := 0; i < 100 && !p.Done; i++ {
		if err := s.n.Process(); err != nil {
			s.t.Fatal(err)
		}
	}
	if !p.Done || p.Err != nil {
		s.t.Fatalf("command: done %v, err %v", p.Done, p.Err)
	}
	return p.Res
}

func (s *solo) hash() [32]byte {
	s.t.Helper()
	h, err := s.n.Engine().StateHash(s.n.ReadBlob)
	if err != nil {
		s.t.Fatal(err)
	}
	return h
}

func logBytes(n *Node) (total int64, first uint32) {
	segs := n.Log().Segments()
	for _, sg := range segs {
		total += sg.Size
	}
	return total, segs[0].Number
}

// load puts jobs with 1 KiB payloads, takes every one and acks three in
// four: the log grows with every command while the live state stays small.
func (s *solo) load(jobs int) {
	payload := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < jobs; i++ {
		s.exec(func(e *engine.Engine, now time.Time) (any, error) {
			return e.Put(now, "default", "q", engine.PutRequest{Payload: append([]byte(fmt.Sprintf("%d-", i)), payload...)})
		})
		res := s.exec(func(e *engine.Engine, now time.Time) (any, error) {
			return e.Take(now, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1})
		})
		if i%4 != 0 {
			j := res.([]engine.Job)[0]
			s.exec(func(e *engine.Engine, now time.Time) (any, error) {
				return e.Ack(now, "default", "q", j.ID, engine.AckRequest{Receipt: j.Receipt})
			})
		}
	}
}

// With snapshots the log is bounded (old segments deleted) and a restart
// loads the newest snapshot and applies only the entries after it, with
// the same state; without, the log keeps every entry.
func TestRestartFromSnapshotWithBoundedLog(t *testing.T) {
	const jobs = 1000
	plain := openSolo(t, t.TempDir(), ^uint64(0))
	plain.load(jobs)
	plainBytes, plainFirst := logBytes(plain.n)
	plain.n.Close()

	s := openSolo(t, t.TempDir(), 200)
	s.load(jobs)
	size, first := logBytes(s.n)
	st := s.n.SnapshotStats()
	t.Logf("%d puts, takes and 3/4 acks (1 KiB payloads): log %d bytes from segment %d with snapshots (%d taken, last at entry %d), %d bytes from segment %d without",
		jobs, size, first, st.Taken, st.Index, plainBytes, plainFirst)
	if plainFirst != 1 || first <= 1 {
		t.Fatalf("first segment %d with snapshots, %d without: want segments dropped only with snapshots", first, plainFirst)
	}
	if size*3 > plainBytes {
		t.Fatalf("log of %d bytes with snapshots, %d without: not bounded", size, plainBytes)
	}
	if held := len(s.n.store.ents); held > 400 {
		t.Fatalf("raft storage holds %d entries after snapshots every 200", held)
	}
	want := s.hash()
	last, _ := s.n.store.LastIndex()
	s.n.Close()

	s.open()
	if got := s.n.SnapshotStats().Index; got == 0 || got > last {
		t.Fatalf("restarted member's snapshot is at entry %d (log to %d)", got, last)
	}
	if fi, _ := s.n.store.FirstIndex(); fi <= 1 {
		t.Fatalf("restarted member's raft log starts at entry %d", fi)
	}
	if s.applied > 400 {
		t.Fatalf("restart applied %d entries of %d: it did not start from the snapshot", s.applied, last)
	}
	if got := s.hash(); got != want {
		t.Fatal("state after restart differs from the state before")
	}
	// And it goes on: more commands, another restart.
	s.load(50)
	want = s.hash()
	s.n.Close()
	s.open()
	if got := s.hash(); got != want {
		t.Fatal("state after the second restart differs")
	}
	s.n.Close()
}

// A snapshot whose commit frame never reached the disk (a crash while it
// was written) is ignored: the member restarts from the one before.
func TestRestartIgnoresSnapshotWithoutCommit(t *testing.T) {
	s := openSolo(t, t.TempDir(), 100)
	s.load(200)
	before := s.n.SnapshotStats().Index
	want := s.hash()
	// Items of a snapshot at a later index, without their commit frame.
	w := s.n.newSnapWriter(before+1000, func(*engine.Entry) error { return nil })
	ent := engine.Entry{Time: 1}
	if err := w.add(ent.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	s.n.Close()
	s.open()
	if got := s.n.SnapshotStats().Index; got != before {
		t.Fatalf("restarted from the snapshot at %d, want the complete one at %d", got, before)
	}
	if s.hash() != want {
		t.Fatal("state differs after restart")
	}
	s.n.Close()
}

// A snapshot message whose data is damaged is refused before raft sees it,
// and the member keeps running.
func TestDamagedSnapshotMessageRefused(t *testing.T) {
	s := openSolo(t, t.TempDir(), 100)
	defer s.n.Close()
	s.load(150)
	data, err := s.n.snapshotData(s.n.snap.ckpt)()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseSnapshotData(data); err != nil {
		t.Fatalf("the member's own snapshot data does not parse: %v", err)
	}
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xff
	for name, d := range map[string][]byte{"flipped byte": bad, "truncated": data[:len(data)/2], "empty": nil} {
		m := raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 100, Snapshot: &raftpb.Snapshot{Data: d, Metadata: raftpb.SnapshotMetadata{Index: 1 << 20, Term: 100}}}
		err := s.n.Step(m)
		if err == nil || !strings.Contains(err.Error(), "snapshot at entry") {
			t.Fatalf("%s: Step accepted a damaged snapshot: %v", name, err)
		}
		if s.n.Failed() != nil {
			t.Fatalf("%s: member stopped: %v", name, s.n.Failed())
		}
	}
}
