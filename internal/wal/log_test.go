package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestRoundTripAcrossRollovers(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4096}
	l, got, _ := openReplay(t, dir, opts)
	if len(got) != 0 {
		t.Fatalf("fresh log replayed %d records", len(got))
	}
	if e := l.End(); e != (Position{1, HeaderSize}) {
		t.Fatalf("End of empty log = %v", e)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var want []rec
	for i := 0; i < 1500; i++ {
		b := body(i, 1+r.IntN(400))
		end := l.End()
		pos := mustAppend(t, l, b)
		if pos != end && pos != (Position{end.Segment + 1, HeaderSize}) {
			t.Fatalf("record %d at %v, End() said %v", i, pos, end)
		}
		want = append(want, rec{pos, b})
		if r.IntN(5) == 0 {
			mustCommit(t, l)
		}
	}
	mustCommit(t, l)
	segs := l.Segments()
	if len(segs) < 20 {
		t.Fatalf("only %d segments with a 4 KiB segment size", len(segs))
	}
	for i, s := range segs {
		if s.Number != uint32(i+1) || s.FirstPos != (Position{s.Number, HeaderSize}) || s.Size <= HeaderSize || s.Size > 4096 {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	checkReadAt(t, l, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	l, got, rep := openReplay(t, dir, opts)
	sameRecs(t, got, want)
	if rep.TornTail || rep.Repaired() || rep.Records != len(want) || rep.Segments != len(segs) {
		t.Fatalf("clean reopen report: %+v", rep)
	}
	checkReadAt(t, l, want)
	// Appends continue after the last frame of the last segment.
	last := want[len(want)-1]
	wantEnd := Position{last.pos.Segment, last.pos.Offset + uint32(FrameHeaderSize+len(last.body))}
	if l.End() != wantEnd || rep.End != wantEnd {
		t.Fatalf("End after replay = %v (report %v), want %v", l.End(), rep.End, wantEnd)
	}
	for i := 1500; i < 1600; i++ {
		b := body(i, 1+r.IntN(400))
		want = append(want, rec{mustAppend(t, l, b), b})
	}
	mustCommit(t, l)
	l.Close()
	l, got, _ = openReplay(t, dir, opts)
	sameRecs(t, got, want)
	l.Close()
}

func checkReadAt(t *testing.T, l *Log, want []rec) {
	t.Helper()
	for _, w := range want {
		b, err := l.ReadAt(w.pos.Segment, w.pos.Offset+FrameHeaderSize, uint32(len(w.body)))
		if err != nil {
			t.Fatalf("ReadAt %v: %v", w.pos, err)
		}
		if !bytes.Equal(b, w.body) {
			t.Fatalf("ReadAt %v returned other bytes", w.pos)
		}
		f, err := l.ReadFrame(w.pos)
		if err != nil || !bytes.Equal(f, w.body) {
			t.Fatalf("ReadFrame %v: %v", w.pos, err)
		}
	}
}

func TestLargeFrameGetsItsOwnSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 1024}
	l, _, _ := openReplay(t, dir, opts)
	want := []rec{}
	for i, n := range []int{100, 5000, 10, 1024 - HeaderSize - FrameHeaderSize, 3000, 20} {
		b := body(i, n)
		want = append(want, rec{mustAppend(t, l, b), b})
	}
	mustCommit(t, l)
	if want[1].pos != (Position{2, HeaderSize}) || want[2].pos != (Position{3, HeaderSize}) || want[3].pos != (Position{4, HeaderSize}) {
		t.Fatalf("positions %v %v %v", want[1].pos, want[2].pos, want[3].pos)
	}
	st, _ := os.Stat(segPath(dir, 2))
	if st.Size() != HeaderSize+FrameHeaderSize+5000 {
		t.Fatalf("oversized segment is %d bytes", st.Size())
	}
	checkReadAt(t, l, want)
	l.Close()
	l, got, _ := openReplay(t, dir, opts)
	sameRecs(t, got, want)
	// The exact-fit segment is full: the next frame rolls.
	if pos := mustAppend(t, l, []byte("next")); pos.Segment != want[len(want)-1].pos.Segment && pos.Segment != 7 {
		t.Fatalf("append after reopen at %v", pos)
	}
	l.Close()
}

func TestAppendRejects(t *testing.T) {
	l := mustOpen(t, t.TempDir(), Options{})
	if _, err := l.Append([]byte("x")); err == nil {
		t.Fatal("Append before Replay succeeded")
	}
	replayAll(t, l, Position{})
	if _, _, err := replayAll(t, l, Position{}); err == nil {
		t.Fatal("second Replay succeeded")
	}
	if _, err := l.Append(nil); err == nil {
		t.Fatal("empty record accepted")
	}
	if l.Failed() != nil {
		t.Fatal("rejecting a record failed the log")
	}
	l.Close()
	if _, err := Open(t.TempDir(), Options{SegmentSize: 10}); err == nil {
		t.Fatal("tiny segment size accepted")
	}
}

func TestReplayFrom(t *testing.T) {
	dir := t.TempDir()
	sizes := make([]int, 300)
	for i := range sizes {
		sizes[i] = 50 + i%70
	}
	want := writeLog(t, dir, Options{SegmentSize: 2048}, sizes, 7)
	for _, k := range []int{0, 1, 17, 150, 299} {
		l := mustOpen(t, dir, Options{})
		got, _, err := replayAll(t, l, want[k].pos)
		if err != nil {
			t.Fatalf("from %v: %v", want[k].pos, err)
		}
		sameRecs(t, got, want[k:])
		l.Close()
	}
	last := want[len(want)-1]
	end := Position{last.pos.Segment, last.pos.Offset + uint32(FrameHeaderSize+len(last.body))}
	l := mustOpen(t, dir, Options{})
	got, _, err := replayAll(t, l, end)
	if err != nil || len(got) != 0 {
		t.Fatalf("from end: %d records, %v", len(got), err)
	}
	l.Close()

	for _, bad := range []Position{
		{want[10].pos.Segment, want[10].pos.Offset + 3}, // inside a frame
		{end.Segment, end.Offset + 100},                 // past the valid data
		{end.Segment + 2, HeaderSize},                   // past the last segment
	} {
		l := mustOpen(t, dir, Options{})
		if _, _, err := replayAll(t, l, bad); err == nil {
			t.Errorf("replay from %v succeeded", bad)
		}
		if _, err := l.Append([]byte("x")); err == nil {
			t.Errorf("Append after failed replay succeeded")
		}
		l.Close()
	}

	// fn's error stops the replay and comes back unchanged.
	l = mustOpen(t, dir, Options{})
	stop := errors.New("stop")
	n := 0
	_, err = l.Replay(Position{}, func(Position, []byte) error {
		n++
		if n == 5 {
			return stop
		}
		return nil
	})
	if err != stop || n != 5 {
		t.Fatalf("fn error: got %v after %d calls", err, n)
	}
	l.Close()
}

func TestCommitFailureFailsLog(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openReplay(t, dir, Options{})
	mustAppend(t, l, []byte("first"))
	mustCommit(t, l)
	mustAppend(t, l, []byte("second"))
	// Pull the descriptor out from under the log: the write fails.
	l.active.f.Close()
	err := l.Commit()
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), segmentName(1)) {
		t.Fatalf("Commit on closed fd: %v", err)
	}
	if _, err := l.Append([]byte("third")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failure: %v", err)
	}
	if err := l.Commit(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Commit after failure: %v", err)
	}
	if !errors.Is(l.Failed(), ErrFailed) {
		t.Fatalf("Failed() = %v", l.Failed())
	}
	l.Close()
	// The committed record survives.
	l, got, _ := openReplay(t, dir, Options{})
	if len(got) != 1 || string(got[0].body) != "first" {
		t.Fatalf("after failure: %v", got)
	}
	l.Close()
}

func TestFsyncFailureIsNotRetried(t *testing.T) {
	l, _, _ := openReplay(t, t.TempDir(), Options{})
	defer l.Close()
	var calls atomic.Int32
	fdatasync = func(f *os.File) error {
		calls.Add(1)
		return syscall.EIO
	}
	defer func() { fdatasync = fdatasyncFile }()
	mustAppend(t, l, []byte("a"))
	if err := l.Commit(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Commit: %v", err)
	}
	if _, err := l.Append([]byte("b")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("fdatasync called %d times", calls.Load())
	}
}

func TestNoSpaceIsRetryable(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openReplay(t, dir, Options{SegmentSize: 1024})
	defer l.Close()
	l.noPrepare = true // segment creation must happen in Append, under the hook
	var want []rec
	for i := 0; i < 6; i++ { // three per segment: two full segments
		b := body(i, 300)
		want = append(want, rec{mustAppend(t, l, b), b})
	}
	end := l.End()
	preallocate = func(*os.File, int64) error { return syscall.ENOSPC }
	_, err := l.Append(body(6, 300)) // does not fit: needs a new segment
	preallocate = fallocateFile
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Append with full disk: %v", err)
	}
	if l.Failed() != nil || l.End() != end {
		t.Fatalf("failed=%v end=%v want %v", l.Failed(), l.End(), end)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
	b := body(6, 300)
	want = append(want, rec{mustAppend(t, l, b), b})
	mustCommit(t, l)
	l.Close()
	l, got, _ := openReplay(t, dir, Options{})
	sameRecs(t, got, want)
}

func TestNoPreallocationSupport(t *testing.T) {
	preallocate = func(*os.File, int64) error { return syscall.EOPNOTSUPP }
	defer func() { preallocate = fallocateFile }()
	dir := t.TempDir()
	sizes := []int{10, 500, 700, 20, 900, 30}
	want := writeLog(t, dir, Options{SegmentSize: 1024}, sizes, 2)
	l, got, _ := openReplay(t, dir, Options{SegmentSize: 1024})
	sameRecs(t, got, want)
	l.Close()
}

func TestRemoveSegmentsBefore(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openReplay(t, dir, Options{SegmentSize: 1024})
	var want []rec
	for i := 0; i < 60; i++ {
		b := body(i, 200)
		want = append(want, rec{mustAppend(t, l, b), b})
		mustCommit(t, l)
	}
	active := l.End().Segment
	if err := l.RemoveSegmentsBefore(5); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); segs[0].Number != 5 {
		t.Fatalf("first segment after removal: %d", segs[0].Number)
	}
	if _, err := l.ReadAt(want[0].pos.Segment, want[0].pos.Offset, 8); !errors.Is(err, ErrSegmentGone) {
		t.Fatalf("ReadAt removed segment: %v", err)
	}
	if _, err := os.Stat(segPath(dir, 4)); !os.IsNotExist(err) {
		t.Fatalf("segment 4 still on disk: %v", err)
	}
	// Never the active segment.
	if err := l.RemoveSegmentsBefore(active + 10); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) != 1 || segs[0].Number != active {
		t.Fatalf("segments after removing everything: %+v", segs)
	}
	b := body(99, 100)
	pos := mustAppend(t, l, b)
	mustCommit(t, l)
	l.Close()

	l = mustOpen(t, dir, Options{})
	got, _, err := replayAll(t, l, Position{active, HeaderSize})
	if err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1].pos != pos {
		t.Fatalf("last replayed %v, want %v", got[len(got)-1].pos, pos)
	}
	l.Close()
	// Starting before the oldest remaining segment means lost records.
	for _, from := range []Position{{2, HeaderSize}, {}} {
		l = mustOpen(t, dir, Options{})
		if _, _, err := replayAll(t, l, from); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("replay from %v with segments 1-4 removed: %v", from, err)
		}
		l.Close()
	}
}

// TestConcurrentReadAt runs readers against a log that is being appended
// to and trimmed; run it with -race.
func TestConcurrentReadAt(t *testing.T) {
	dir := t.TempDir()
	// Durability is not under test here; SyncNever keeps it quick.
	l, _, _ := openReplay(t, dir, Options{SegmentSize: 2048, Sync: SyncNever})
	var mu sync.Mutex
	var committed []rec
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, gone atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 0))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				if len(committed) == 0 {
					mu.Unlock()
					continue
				}
				// Mostly recent records, some old enough to be removed.
				k := r.IntN(len(committed))
				if r.IntN(4) != 0 {
					k = len(committed) - 1 - r.IntN(min(len(committed), 100))
				}
				w := committed[k]
				mu.Unlock()
				b, err := l.ReadAt(w.pos.Segment, w.pos.Offset+FrameHeaderSize, uint32(len(w.body)))
				switch {
				case errors.Is(err, ErrSegmentGone):
					gone.Add(1)
				case err != nil:
					t.Errorf("ReadAt %v: %v", w.pos, err)
					return
				case !bytes.Equal(b, w.body):
					t.Errorf("ReadAt %v: wrong bytes", w.pos)
					return
				default:
					reads.Add(1)
				}
			}
		}(uint64(g))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			segs := l.Segments()
			if len(segs) > 3 {
				if err := l.RemoveSegmentsBefore(segs[len(segs)-3].Number); err != nil {
					t.Errorf("remove: %v", err)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := 0; i < 1500; i++ {
		var batch []rec
		for j := 0; j < 1+i%4; j++ {
			b := body(i*10+j, 20+(i*7+j)%300)
			batch = append(batch, rec{mustAppend(t, l, b), b})
		}
		mustCommit(t, l)
		mu.Lock()
		committed = append(committed, batch...)
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no successful reads")
	}
	t.Logf("%d reads, %d of removed segments", reads.Load(), gone.Load())
	l.Close()
	if _, err := l.ReadAt(1, HeaderSize, 1); err == nil {
		t.Fatal("ReadAt after Close succeeded")
	}
}

func TestReadAtRefusesUncommitted(t *testing.T) {
	l, _, _ := openReplay(t, t.TempDir(), Options{})
	defer l.Close()
	pos := mustAppend(t, l, []byte("pending"))
	if _, err := l.ReadAt(pos.Segment, pos.Offset, 8); err == nil {
		t.Fatal("read of an uncommitted frame succeeded")
	}
	mustCommit(t, l)
	if b, err := l.ReadFrame(pos); err != nil || string(b) != "pending" {
		t.Fatalf("ReadFrame: %q %v", b, err)
	}
}

func TestSyncPolicies(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncAlways, SyncInterval, SyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			var calls atomic.Int32
			fdatasync = func(f *os.File) error { calls.Add(1); return fdatasyncFile(f) }
			defer func() { fdatasync = fdatasyncFile }()
			dir := t.TempDir()
			l, _, _ := openReplay(t, dir, Options{Sync: policy, SyncInterval: time.Millisecond, SegmentSize: 1024})
			var want []rec
			for i := 0; i < 10; i++ {
				b := body(i, 300) // three per segment: rolls happen
				want = append(want, rec{mustAppend(t, l, b), b})
				mustCommit(t, l)
			}
			switch policy {
			case SyncAlways:
				if calls.Load() != 10 {
					t.Fatalf("%d fdatasyncs for 10 commits", calls.Load())
				}
			case SyncInterval:
				deadline := time.Now().Add(5 * time.Second)
				for calls.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if calls.Load() == 0 {
					t.Fatal("background syncer never synced")
				}
			case SyncNever:
				if calls.Load() != 0 {
					t.Fatalf("%d fdatasyncs under SyncNever", calls.Load())
				}
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if policy == SyncNever && calls.Load() < 4 {
				t.Fatalf("Sync flushed %d files, want the sealed segments and the active one", calls.Load())
			}
			l.Close()
			l, got, _ := openReplay(t, dir, Options{})
			sameRecs(t, got, want)
			l.Close()
		})
	}
}

func TestStaleTempSegmentRemoved(t *testing.T) {
	dir := t.TempDir()
	want := writeLog(t, dir, Options{}, []int{10, 20}, 1)
	tmp := segPath(dir, 2) + ".tmp"
	if err := os.WriteFile(tmp, []byte("half-made segment"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, got, _ := openReplay(t, dir, Options{})
	sameRecs(t, got, want)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("tmp segment survived Open: %v", err)
	}
	// Numbering continues in segment 1, then 2.
	if pos := mustAppend(t, l, []byte("x")); pos.Segment != 1 {
		t.Fatalf("append went to %v", pos)
	}
	l.Close()
}

func TestPositionOrder(t *testing.T) {
	ps := []Position{{1, 64}, {1, 100}, {2, 64}, {10, 0}}
	for i := range ps {
		for j := range ps {
			if ps[i].Less(ps[j]) != (i < j) {
				t.Fatalf("%v.Less(%v) wrong", ps[i], ps[j])
			}
		}
	}
	if fmt.Sprint(Position{3, 4096}) != "3:4096" {
		t.Fatal(Position{3, 4096}.String())
	}
	for _, n := range []uint32{1, 42, 1<<32 - 1} {
		if got, ok := parseSegmentName(segmentName(n)); !ok || got != n {
			t.Fatalf("segment name round trip %d -> %q -> %d", n, segmentName(n), got)
		}
	}
	for _, bad := range []string{"1.log", "0000000000000000000x.log", "00000000000000000000.log", "99999999999999999999.log"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestPreparedSegment(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := openReplay(t, dir, Options{SegmentSize: 1024})
	var want []rec
	for i := 0; i < 4; i++ { // three per segment: one roll
		b := body(i, 300)
		want = append(want, rec{mustAppend(t, l, b), b})
	}
	mustCommit(t, l)
	// Wait for the background creation of segment 3.
	p := <-l.prepCh
	l.prepCh = make(chan preparedSeg, 1)
	l.prepCh <- p
	if p.err != nil {
		t.Fatal(p.err)
	}
	if _, err := os.Stat(segPath(dir, 3)); err != nil {
		t.Fatalf("next segment not prepared: %v", err)
	}
	// A crash now leaves an empty last segment: recovery accepts it and
	// appends continue there.
	crashed := copyDir(t, dir)
	l2, got, rep := openReplay(t, crashed, Options{})
	sameRecs(t, got, want)
	if rep.Repaired() || l2.End() != (Position{3, HeaderSize}) {
		t.Fatalf("report %+v, End %v", rep, l2.End())
	}
	if pos := mustAppend(t, l2, []byte("x")); pos != (Position{3, HeaderSize}) {
		t.Fatalf("append at %v", pos)
	}
	l2.Close()
	// A clean Close removes the unused segment.
	l.Close()
	if _, err := os.Stat(segPath(dir, 3)); !os.IsNotExist(err) {
		t.Fatalf("unused prepared segment survived Close: %v", err)
	}
}

// TestWriteZeros: whatever the file held, writeZeros leaves size bytes of
// zeros, whole chunks (direct where the filesystem allows) and the tail.
func TestWriteZeros(t *testing.T) {
	for _, size := range []int64{100, zeroChunk, 3*zeroChunk + 4096 + 100} {
		path := filepath.Join(t.TempDir(), "seg")
		junk := bytes.Repeat([]byte{0xA5}, int(size))
		if err := os.WriteFile(path, junk, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeZeros(f, size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != size || !bytes.Equal(got, make([]byte, size)) {
			t.Fatalf("size %d: %d bytes, %d non-zero", size, len(got), len(got)-bytes.Count(got, []byte{0}))
		}
	}
}
