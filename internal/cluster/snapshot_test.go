package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
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
	const jobs = 2000
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
	// Two snapshots and the log since the last (at most about one
	// snapshot's size), give or take a segment at each end.
	if bound := 3*s.n.snap.ckpt.bytes + 2*(64<<10); size > bound || size*2 > plainBytes {
		t.Fatalf("log of %d bytes with snapshots of %d bytes (bound %d), %d without: not bounded", size, s.n.snap.ckpt.bytes, bound, plainBytes)
	}
	if held, last := len(s.n.store.ents), s.n.lastIndex; uint64(held)*4 > last {
		t.Fatalf("raft storage holds %d entries of %d after %d snapshots", held, last, st.Taken)
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
	if since := last - s.n.SnapshotStats().Index; uint64(s.applied) > since || since*4 > last {
		t.Fatalf("restart applied %d entries of %d (%d after the snapshot): it did not start from the snapshot", s.applied, last, since)
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
	w := s.n.newSnapWriter(before+1000, func(*engine.Entry, [][2]engine.BlobRef) error { return nil })
	ent := engine.Entry{Time: 1}
	if err := w.add(ent.Encode(nil), nil); err != nil {
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
	if _, _, _, err := parseSnapshotData(data); err != nil {
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

// Measures a snapshot of many jobs: making it on a member, and installing
// it on a fresh one (CHRONOQ_SNAP_MEASURE=N jobs; skipped otherwise).
func TestMeasureSnapshotInstall(t *testing.T) {
	jobs, _ := strconv.Atoi(os.Getenv("CHRONOQ_SNAP_MEASURE"))
	if jobs <= 0 {
		t.Skip("set CHRONOQ_SNAP_MEASURE=100000 to measure")
	}
	s := openSolo(t, t.TempDir(), ^uint64(0))
	s.cfg.WAL.SegmentSize = 0
	s.n.Close()
	s.open()
	defer s.n.Close()
	payload := bytes.Repeat([]byte("x"), 100)
	for done := 0; done < jobs; {
		batch := min(1000, jobs-done)
		s.exec(func(e *engine.Engine, now time.Time) (any, error) {
			for i := 0; i < batch; i++ {
				if _, err := e.Put(now, "default", "q", engine.PutRequest{Payload: payload}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		})
		done += batch
	}
	start := time.Now()
	if err := s.n.takeSnapshot(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	ck := s.n.snap.ckpt
	start = time.Now()
	data, err := s.n.snapshotData(ck)()
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)

	f := openFollower(t, t.TempDir())
	defer f.Close()
	meta := ck.meta
	meta.ConfState = raftpb.ConfState{Voters: []uint64{1, 2}}
	start = time.Now()
	if err := f.Step(raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Term: meta.Term + 1, Snapshot: &raftpb.Snapshot{Data: data, Metadata: meta}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Process(); err != nil {
		t.Fatal(err)
	}
	install := time.Since(start)
	if f.Engine().Jobs() != jobs {
		t.Fatalf("installed %d jobs, want %d", f.Engine().Jobs(), jobs)
	}
	t.Logf("%d jobs (100-byte payloads): snapshot made in %s (%d bytes of items), data for a follower built in %s (%d bytes), installed (validated, written, fsync'd, engine rebuilt) in %s",
		jobs, took.Round(time.Millisecond), ck.bytes, built.Round(time.Millisecond), len(data), install.Round(time.Millisecond))
}

func openFollower(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Open(Config{ID: 2, Peers: []uint64{1, 2}, Dir: dir, WAL: wal.Options{Sync: wal.SyncAlways, Logger: quiet}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Process(); err != nil {
		t.Fatal(err)
	}
	return n
}

// Replay takes the newest complete snapshot: items of a snapshot a crash
// interrupted are dropped when the member writes one again at the same
// index, a snapshot whose first items went with the oldest segment is
// ignored, and a commit frame that does not match the items before it is
// corruption.
func TestReplaySnapshotFrames(t *testing.T) {
	item := func(idx uint64, seq uint32) []byte {
		b := []byte{snapItemKind}
		b = binary.LittleEndian.AppendUint64(b, 1)
		b = binary.LittleEndian.AppendUint64(b, idx)
		b = binary.LittleEndian.AppendUint32(b, seq)
		ent := engine.Entry{Time: 5}
		return ent.Encode(b)
	}
	commit := func(idx uint64, items uint32) []byte {
		ent := engine.Entry{Time: 5}
		b := []byte{snapCommitKind}
		for _, v := range []uint64{1, idx, 3, 5} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint32(b, items)
		b = binary.LittleEndian.AppendUint64(b, uint64(items)*uint64(len(ent.Encode(nil))))
		b = binary.LittleEndian.AppendUint32(b, 0) // an empty conf state
		return append(b, `{"members":[]}`...)
	}
	type frame struct {
		seg  uint32
		body []byte
	}
	run := func(frames []frame) (*checkpoint, error) {
		rs := &replayState{rl: &wal.RaftLog{Group: 1}, firstSeg: 3}
		for i, f := range frames {
			if err := rs.add(wal.Position{Segment: f.seg, Offset: uint32(100 * (i + 1))}, f.body); err != nil {
				return nil, err
			}
		}
		return rs.ckpt, nil
	}
	ck, err := run([]frame{{3, item(5, 0)}, {3, item(5, 1)}, {4, item(5, 0)}, {4, item(5, 1)}, {4, item(5, 2)}, {4, commit(5, 3)}})
	if err != nil || ck == nil || ck.meta.Index != 5 || len(ck.items) != 3 || ck.items[0].Segment != 4 {
		t.Fatalf("snapshot written again after an interrupted one: %+v %v", ck, err)
	}
	ck, err = run([]frame{{3, item(5, 7)}, {3, item(5, 8)}, {3, commit(5, 9)}, {4, item(9, 0)}, {4, commit(9, 1)}})
	if err != nil || ck == nil || ck.meta.Index != 9 {
		t.Fatalf("older snapshot cut by segment removal, then a complete one: %+v %v", ck, err)
	}
	ck, err = run([]frame{{3, commit(5, 2)}, {3, item(9, 0)}})
	if err != nil || ck != nil {
		t.Fatalf("a commit whose items went with the removed segments: %+v %v", ck, err)
	}
	if _, err := run([]frame{{3, item(5, 0)}, {4, item(5, 1)}, {4, commit(5, 3)}}); err == nil || !strings.Contains(err.Error(), "snapshot commit for entry 5 with 3 items") {
		t.Fatalf("commit frame for more items than were read: %v", err)
	}
	if _, err := run([]frame{{3, item(5, 0)}, {4, item(5, 2)}, {4, commit(5, 3)}}); err == nil {
		t.Fatal("a snapshot missing an item in the middle was accepted")
	}
}

// A snapshot larger than SnapshotMaxSend is not sent: raft hears it is
// temporarily unavailable (and asks again later); a smaller one is.
func TestSnapshotLargerThanSendLimitNotSent(t *testing.T) {
	s := openSolo(t, t.TempDir(), 100)
	defer s.n.Close()
	s.load(150)
	if _, err := s.n.store.Snapshot(); err != nil {
		t.Fatalf("snapshot under the default limit: %v", err)
	}
	s.n.cfg.SnapshotMaxSend = 1000
	s.n.snap.data = nil
	if _, err := s.n.store.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Fatalf("snapshot over the limit: %v, want raft.ErrSnapshotTemporarilyUnavailable", err)
	}
}
