package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/farstore"
	"github.com/chronoq/chronoq/internal/wal"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var farT0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func openFar(t *testing.T, dir string, clk *testClock, horizon time.Duration, force bool) (*Broker, error) {
	t.Helper()
	return Open(Options{Dir: dir, Logger: quiet, Clock: clk.now, FarHorizon: horizon, SnapshotBytes: 1 << 40, SnapshotInterval: time.Hour,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet, ForceRecovery: force}})
}

func mustOpenFar(t *testing.T, dir string, clk *testClock, horizon time.Duration) *Broker {
	t.Helper()
	b, err := openFar(t, dir, clk, horizon, false)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b
}

// memJobs is how many jobs the engine holds in memory.
func memJobs(t *testing.T, b *Broker) int {
	t.Helper()
	n, err := call(b, context.Background(), func(time.Time) (int, error) { return b.eng.Jobs(), nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func farJobs(t *testing.T, b *Broker) int {
	t.Helper()
	s, err := b.FarStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Jobs
}

func delayed(t *testing.T, b *Broker, q string) uint64 {
	t.Helper()
	qi, err := b.GetQueue(context.Background(), "default", q)
	if err != nil {
		t.Fatal(err)
	}
	return qi.Counts.Delayed
}

// waitFar polls (bounded) until the far store holds want jobs: a bucket
// comes back off the loop.
func waitFar(t *testing.T, b *Broker, want int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if farJobs(t, b) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("far store holds %d jobs, want %d", farJobs(t, b), want)
}

func putAt(t *testing.T, b *Broker, q string, req engine.PutRequest, at time.Time) engine.PutResult {
	t.Helper()
	req.At = &at
	if req.Payload == nil {
		req.Payload = []byte("payload of " + req.ID)
	}
	r, err := b.Put(context.Background(), "default", q, req)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return r
}

// changedSnapshot puts a job (id) due in a minute and writes a snapshot:
// a final snapshot of a state unchanged since the last one is skipped.
func changedSnapshot(t *testing.T, b *Broker, clk *testClock, id string) {
	t.Helper()
	putAt(t, b, "q", engine.PutRequest{ID: id}, clk.now().Add(time.Minute))
	farSnapshot(t, b)
}

// untilOnLoop polls cond on the loop (bounded) until it holds; what says
// what failed to happen.
func untilOnLoop(t *testing.T, b *Broker, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		ok, err := call(b, context.Background(), func(time.Time) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatal(what)
		}
	}
}

// waitBucketsDone polls (bounded) until every bucket has been taken back
// in: the last step of a load runs on the loop after its jobs are back.
func waitBucketsDone(t *testing.T, b *Broker) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; {
		open, err := call(b, context.Background(), func(time.Time) (int, error) {
			n := 0
			for _, bk := range b.far.buckets {
				if bk.state != bucketDone {
					n++
				}
			}
			return n, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d buckets not taken back in", open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// putFortyFarOneNear puts j00..j39 due a second apart from three hours
// after farT0 (one bucket beyond a one-hour horizon) and "near" due in ten
// minutes; it returns j00's due time.
func putFortyFarOneNear(t *testing.T, b *Broker) time.Time {
	t.Helper()
	due := farT0.Add(3 * time.Hour)
	for i := 0; i < 40; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%02d", i)}, due.Add(time.Duration(i)*time.Second))
	}
	putAt(t, b, "q", engine.PutRequest{ID: "near"}, farT0.Add(10*time.Minute))
	return due
}

func TestFarJobsLeaveMemoryAndActivateOnTimeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	ctx := context.Background()
	putFortyFarOneNear(t, b)
	if n := memJobs(t, b); n != 1 {
		t.Fatalf("%d jobs in memory, want 1 (the 40 far ones in buckets)", n)
	}
	if d := delayed(t, b, "q"); d != 41 {
		t.Fatalf("delayed count %d, want 41 (far jobs counted)", d)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	if n, f := memJobs(t, b), farJobs(t, b); n != 1 || f != 40 {
		t.Fatalf("after restart: %d in memory, %d far; want 1 and 40", n, f)
	}
	if d := delayed(t, b, "q"); d != 41 {
		t.Fatalf("delayed count %d after restart, want 41", d)
	}
	// the bucket comes back a lead time (a quarter horizon) before its window
	clk.add(3*time.Hour - 10*time.Minute)
	memJobs(t, b) // a turn of the loop at the new time
	waitFar(t, b, 0)
	if n := memJobs(t, b); n != 41 {
		t.Fatalf("%d jobs in memory after the bucket came back, want 41", n)
	}
	jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 100}, 0)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "near" {
		t.Fatalf("take before the far jobs are due: %v %v", jobs, err)
	}
	if _, err := b.Ack(ctx, "default", "q", "near", engine.AckRequest{Receipt: jobs[0].Receipt}); err != nil {
		t.Fatal(err)
	}
	clk.add(11 * time.Minute)
	jobs, err = b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 100}, 0)
	if err != nil || len(jobs) != 40 {
		t.Fatalf("take when due: %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if string(j.Data) != "payload of "+j.ID {
			t.Fatalf("job %s came back with payload %q", j.ID, j.Data)
		}
	}
}

// TestFarHandOutCountsAsAChange: handing jobs out writes nothing to the
// log, yet it changes what a snapshot holds. A server that loads jobs from
// a snapshot (or replays them) and hands them out must record that in its
// next snapshot — at a clean stop, or when the interval is up — or every
// start takes them all back into memory and hands them out again.
func TestFarHandOutCountsAsAChange(t *testing.T) {
	for _, stop := range []string{"clean stop", "interval"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			clk := &testClock{t: farT0}
			// the jobs are put and snapshotted with the far store off:
			// the snapshot holds them in memory
			b := mustOpenFar(t, dir, clk, 0)
			putFortyFarOneNear(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = mustOpenFar(t, dir, clk, time.Hour)
			memJobs(t, b) // a turn: the hand-out follows it
			waitFar(t, b, 40)
			if stop == "interval" {
				clk.add(time.Hour) // openFar's SnapshotInterval
				memJobs(t, b)      // a turn: the snapshot is due
				untilOnLoop(t, b, "no snapshot an interval after the hand-out", func() bool {
					return b.snap.iter == nil && b.snap.sealing == nil && !b.snap.last.Before(clk.now())
				})
				b.skipFinalSnapshot = true
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = mustOpenFar(t, dir, clk, time.Hour)
			defer b.Close()
			// the first request runs before any hand-out of this start
			if n := memJobs(t, b); n != 1 {
				t.Fatalf("%d jobs in memory at the start, want 1: the hand-out was not in the snapshot", n)
			}
			if f := farJobs(t, b); f != 40 {
				t.Fatalf("%d far jobs, want 40", f)
			}
		})
	}
}

// TestFarJobsInOnlineBackup: an online backup carries the bucket files its
// snapshot lists, cut at the sizes it records, even when the bucket is
// written to, taken back in and deleted before the copy is made; the
// restored server holds the far jobs of the backup's moment and no later
// ones.
func TestFarJobsInOnlineBackup(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	ctx := context.Background()
	due := putFortyFarOneNear(t, b)
	set, err := b.Backup(ctx)
	if err != nil {
		t.Fatalf("backup with far jobs: %v", err)
	}
	defer set.Release()
	if len(set.Far) != 1 {
		t.Fatalf("backup lists %d bucket files, want 1", len(set.Far))
	}
	// after the backup: more far jobs in the same bucket, a cancel, then the
	// bucket comes back in and its file is deleted two snapshots later
	for i := 40; i < 45; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%02d", i)}, due.Add(time.Duration(i)*time.Second))
	}
	if err := b.Cancel(ctx, "default", "q", "j00", ""); err != nil {
		t.Fatal(err)
	}
	clk.add(3*time.Hour - 10*time.Minute)
	memJobs(t, b)
	waitBucketsDone(t, b)
	changedSnapshot(t, b, clk, "w1")
	changedSnapshot(t, b, clk, "w2")
	if ids, err := farstore.List(filepath.Join(dir, "far")); err != nil || len(ids) != 0 {
		t.Fatalf("bucket files left in the data directory: %v %v (the test wants them deleted before the copy)", ids, err)
	}
	bdir := filepath.Join(t.TempDir(), "backup")
	pr, pw := io.Pipe()
	go func() { _, err := set.WriteTo(pw); pw.CloseWithError(err) }()
	m, err := ReceiveBackup(pr, bdir)
	if err != nil {
		t.Fatalf("receive backup: %v", err)
	}
	if m.Jobs != 1 {
		t.Fatalf("manifest counts %d jobs in memory, want 1", m.Jobs)
	}
	b.Close()

	rdir := filepath.Join(t.TempDir(), "restored")
	if _, err := RestoreBackup(bdir, rdir); err != nil {
		t.Fatalf("restore: %v", err)
	}
	rclk := &testClock{t: farT0}
	r := mustOpenFar(t, rdir, rclk, time.Hour)
	if n, f := memJobs(t, r), farJobs(t, r); n != 1 || f != 40 {
		t.Fatalf("restored: %d in memory, %d far; want 1 and 40", n, f)
	}
	for i := 0; i < 45; i++ {
		id := fmt.Sprintf("j%02d", i)
		j, err := r.Peek(ctx, "default", "q", id)
		if i >= 40 {
			if engine.CodeOf(err) != engine.CodeJobNotFound {
				t.Fatalf("job %s, put after the backup, is in it: %v", id, err)
			}
			continue
		}
		if err != nil || string(j.Data) != "payload of "+id || !j.ActivateAt.Equal(due.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("restored job %s: %+v %v", id, j, err)
		}
	}
	r.Close()

	// a flipped byte in the bucket file is refused with its name
	fp := filepath.Join(bdir, "far", set.Far[0].Name)
	raw, err := os.ReadFile(fp)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-3] ^= 0x40
	if err := os.WriteFile(fp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreBackup(bdir, filepath.Join(t.TempDir(), "again")); err == nil || !strings.Contains(err.Error(), "far/"+set.Far[0].Name) {
		t.Fatalf("restore of a damaged bucket file: %v, want an error naming far/%s", err, set.Far[0].Name)
	}
}

func TestFarJobsFoundByIDTagSeqAndUpdate(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	defer func() { b.Close() }()
	ctx := context.Background()
	far := farT0.Add(5 * time.Hour)
	for i := 0; i < 10; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("a%d", i), Tags: map[string]string{"t": fmt.Sprint(i % 2)}}, far)
	}
	seqJob := putAt(t, b, "q", engine.PutRequest{ID: "byseq"}, far)
	if f := farJobs(t, b); f != 11 {
		t.Fatalf("%d far jobs, want 11", f)
	}
	// peek by id
	j, err := b.Peek(ctx, "default", "q", "a3")
	if err != nil || string(j.Data) != "payload of a3" || !j.ActivateAt.Equal(far) {
		t.Fatalf("peek of a far job: %+v %v", j, err)
	}
	// beanstalkd peek-delayed: every delayed job of the queue is far
	j, err = b.PeekState(ctx, "default", "q", engine.StateDelayed)
	if err != nil || !j.ActivateAt.Equal(far) {
		t.Fatalf("peek-delayed with only far jobs: %+v %v", j, err)
	}
	// beanstalkd id
	j, err = b.JobBySeq(ctx, "default", seqJob.Seq)
	if err != nil || j.ID != "byseq" {
		t.Fatalf("job by seq: %+v %v", j, err)
	}
	// a duplicate client id is still a duplicate
	r, err := b.Put(ctx, "default", "q", engine.PutRequest{ID: "a5", Payload: []byte("x"), At: &far})
	if err != nil || !r.Duplicate {
		t.Fatalf("put of a far job's id: %+v %v", r, err)
	}
	// and so is a repeated idempotency key of a far job
	r, err = b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("x"), At: &far, IdempotencyKey: "once"})
	if err != nil {
		t.Fatal(err)
	}
	memJobs(t, b) // the loop turn after the put hands it out
	r2, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("x"), At: &far, IdempotencyKey: "once"})
	if err != nil || !r2.Duplicate || r2.ID != r.ID || r2.State != engine.StateDelayed {
		t.Fatalf("repeated idempotency key of a far job: %+v %v", r2, err)
	}
	if err := b.Cancel(ctx, "default", "q", r.ID, ""); err != nil {
		t.Fatal(err)
	}
	// cancel by id
	if err := b.Cancel(ctx, "default", "q", "a1", ""); err != nil {
		t.Fatal(err)
	}
	// cancel by tag: a0 a2 a4 a6 a8 (and a5 may be back in memory)
	n, err := b.CancelByFilter(ctx, "default", "q", engine.Filter{Tags: map[string]string{"t": "0"}})
	if err != nil || n != 5 {
		t.Fatalf("cancel by tag: %d %v, want 5", n, err)
	}
	// cancel by tag in every queue of the namespace
	putAt(t, b, "other", engine.PutRequest{ID: "o1", Tags: map[string]string{"t": "x"}}, far)
	if n, err := b.CancelByFilter(ctx, "default", "", engine.Filter{Tags: map[string]string{"t": "x"}}); err != nil || n != 1 {
		t.Fatalf("cancel by tag in every queue: %d %v, want 1", n, err)
	}
	// update moves a far job inside the horizon, and another one out again
	soon := farT0.Add(30 * time.Minute)
	if _, err := b.Update(ctx, "default", "q", "a7", engine.UpdateRequest{At: &soon}); err != nil {
		t.Fatal(err)
	}
	later := farT0.Add(9 * time.Hour)
	if _, err := b.Update(ctx, "default", "q", "a7", engine.UpdateRequest{At: &later}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "default", "q", "a9", engine.UpdateRequest{At: &soon}); err != nil {
		t.Fatal(err)
	}
	memJobs(t, b)
	// left: a3 a5 a7 a9 byseq; a9 in memory, the rest far again
	if d := delayed(t, b, "q"); d != 5 {
		t.Fatalf("delayed %d, want 5", d)
	}
	check := func(b *Broker) {
		t.Helper()
		for _, id := range []string{"a0", "a1", "a2", "a4", "a6", "a8"} {
			if _, err := b.Peek(ctx, "default", "q", id); engine.CodeOf(err) != engine.CodeJobNotFound {
				t.Fatalf("cancelled job %s: %v", id, err)
			}
		}
		for id, at := range map[string]time.Time{"a3": far, "a5": far, "a7": later, "a9": soon, "byseq": far} {
			j, err := b.Peek(ctx, "default", "q", id)
			if err != nil || !j.ActivateAt.Equal(at) || string(j.Data) != "payload of "+id {
				t.Fatalf("job %s: %+v %v", id, j, err)
			}
		}
	}
	check(b)
	// as after a crash: no final snapshot, the log tail replays
	b.skipFinalSnapshot = true
	b.Close()
	b = mustOpenFar(t, dir, clk, time.Hour)
	check(b)
	b.Close()
	b = mustOpenFar(t, dir, clk, time.Hour)
	check(b)
	if d := delayed(t, b, "q"); d != 5 {
		t.Fatalf("delayed %d after restarts, want 5", d)
	}
	// a purge takes the far jobs too
	if _, err := b.PurgeQueue(ctx, "default", "q"); err != nil {
		t.Fatal(err)
	}
	if d, f := delayed(t, b, "q"), farJobs(t, b); d != 0 || f != 0 {
		t.Fatalf("after purge: delayed %d, far %d", d, f)
	}
}

// farSnapshot makes the broker write a complete snapshot now.
func farSnapshot(t *testing.T, b *Broker) {
	t.Helper()
	_, err := call(b, context.Background(), func(time.Time) (struct{}, error) {
		return struct{}{}, b.snap.final(b, b.now())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFarStoreSurvivesCrashesAtAnyPoint runs random puts, cancels and
// updates across the horizon, with snapshots and crash-like closes (no
// final snapshot) in between, and checks after every reopen that exactly
// the acknowledged jobs exist, with their activation times and payloads.
func TestFarStoreSurvivesCrashesAtAnyPoint(t *testing.T) {
	// snapshots start by themselves after a little log growth and walk a
	// few jobs per turn, so commands and crashes fall inside walks
	defer func(c int, d time.Duration, o, r int) {
		snapChunk, snapTurnBudget, farOutPerTurn, farRewriteMinDead = c, d, o, r
	}(snapChunk, snapTurnBudget, farOutPerTurn, farRewriteMinDead)
	// buckets are rewritten as soon as they hold a few dead items, so
	// rewrites run across snapshots and crashes too
	snapChunk, snapTurnBudget, farOutPerTurn, farRewriteMinDead = 2, 0, 1, 4
	rewritten := 0
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	reopen := func() *Broker {
		b, err := Open(Options{Dir: dir, Logger: quiet, Clock: clk.now, FarHorizon: time.Hour, SnapshotBytes: 8 << 10,
			WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return b
	}
	b := reopen()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(farSeed(), 2))
	want := map[string]time.Time{}
	gone := map[string]bool{}
	next := 0
	pick := func() string {
		for id := range want {
			return id
		}
		return ""
	}
	randAt := func() time.Time {
		if rng.IntN(3) == 0 {
			return clk.now().Add(time.Duration(1+rng.IntN(50)) * time.Minute)
		}
		return clk.now().Add(time.Duration(2+rng.IntN(20)) * time.Hour)
	}
	verify := func() {
		t.Helper()
		for id, at := range want {
			j, err := b.Peek(ctx, "default", "q", id)
			if err != nil || !j.ActivateAt.Equal(at) || string(j.Data) != "payload of "+id {
				t.Fatalf("job %s (due %s): %+v %v", id, at, j, err)
			}
		}
		for id := range gone {
			if _, err := b.Peek(ctx, "default", "q", id); engine.CodeOf(err) != engine.CodeJobNotFound {
				t.Fatalf("cancelled job %s is back: %v", id, err)
			}
		}
		qi, err := b.GetQueue(ctx, "default", "q")
		if err != nil {
			t.Fatal(err)
		}
		if n := qi.Counts.Delayed + qi.Counts.Ready; n != uint64(len(want)) {
			t.Fatalf("delayed+ready %d, want %d", n, len(want))
		}
	}
	for round := 0; round < 12; round++ {
		for op := 0; op < 40; op++ {
			switch k := rng.IntN(10); {
			case k < 5:
				id := fmt.Sprintf("j%d", next)
				next++
				at := randAt()
				putAt(t, b, "q", engine.PutRequest{ID: id}, at)
				want[id] = at.Truncate(time.Millisecond)
			case k < 7:
				if id := pick(); id != "" {
					if err := b.Cancel(ctx, "default", "q", id, ""); err != nil {
						t.Fatal(err)
					}
					delete(want, id)
					gone[id] = true
				}
			default:
				if id := pick(); id != "" {
					at := randAt()
					if _, err := b.Update(ctx, "default", "q", id, engine.UpdateRequest{At: &at}); err != nil {
						t.Fatal(err)
					}
					want[id] = at.Truncate(time.Millisecond)
				}
			}
			if rng.IntN(15) == 0 {
				farSnapshot(t, b)
			}
		}
		memJobs(t, b)
		if f := farJobs(t, b); len(want) > 10 && (f == 0 || f == len(want)) {
			t.Fatalf("round %d: %d of %d jobs far: the test should have jobs on both sides", round, f, len(want))
		}
		b.skipFinalSnapshot = rng.IntN(3) != 0
		rewritten += rewrites(t, b)
		b.Close()
		b = reopen()
		verify()
		// time passes: buckets near their window come back in
		clk.add(time.Duration(rng.IntN(40)) * time.Minute)
		memJobs(t, b)
	}
	b.Close()
	if rewritten == 0 {
		t.Fatal("no bucket was rewritten: the test should cover rewrites")
	}
	t.Logf("%d bucket rewrites", rewritten)
}

// bucketFiles lists the far store's bucket files.
func bucketFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "far", "*.bkt"))
	return m
}

func TestFarBucketDamageRefusedWithFileAndOffset(t *testing.T) {
	setup := func(t *testing.T) (string, *testClock, string) {
		dir := t.TempDir()
		clk := &testClock{t: farT0}
		b := mustOpenFar(t, dir, clk, time.Hour)
		for i := 0; i < 20; i++ {
			putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%d", i)}, farT0.Add(4*time.Hour))
		}
		putAt(t, b, "q", engine.PutRequest{ID: "near"}, farT0.Add(time.Minute))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		files := bucketFiles(t, dir)
		if len(files) != 1 {
			t.Fatalf("bucket files: %v", files)
		}
		return dir, clk, files[0]
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string
		kept   int // far jobs a forced recovery keeps: those in whole blocks before the damage
	}{
		{"torn", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()-5); err != nil {
				t.Fatal(err)
			}
		}, "the snapshot covers", 19},
		{"bitflip", func(t *testing.T, path string) {
			// without its side file the start reads every block (a flip
			// in a bucket opened from its side file is found when the
			// bucket is read: TestFarBucketBitFlipFoundWhenRead)
			if err := os.Remove(strings.TrimSuffix(path, ".bkt") + ".idx"); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(path)
			data[len(data)-10] ^= 0x40
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "checksum mismatch", 19},
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "missing", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, clk, path := setup(t)
			c.damage(t, path)
			_, err := openFar(t, dir, clk, time.Hour, false)
			var de *farstore.DamageError
			if err == nil || !errors.As(err, &de) || de.File != path || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "offset") {
				t.Fatalf("open with a %s bucket: %v", c.name, err)
			}
			// --force-recovery starts, without the damaged jobs, and the
			// memory jobs are intact
			b, err := openFar(t, dir, clk, time.Hour, true)
			if err != nil {
				t.Fatalf("forced open: %v", err)
			}
			defer b.Close()
			if b.far.skippedFiles != 1 {
				t.Fatalf("skipped buckets %d, want 1", b.far.skippedFiles)
			}
			if _, err := b.Peek(context.Background(), "default", "q", "near"); err != nil {
				t.Fatal(err)
			}
			if f := farJobs(t, b); f != c.kept {
				t.Fatalf("%d far jobs after skipping damage, want %d (one block per put)", f, c.kept)
			}
		})
	}
}

func farSeed() uint64 {
	var s uint64 = 1
	fmt.Sscan(os.Getenv("FARSEED"), &s)
	return s
}

// TestFarHandOutWaitsForSnapshotWalk: jobs that are candidates when a
// snapshot walk begins must not leave memory before the walk has seen them
// (rule 1 in far.go): a crash after that snapshot would otherwise lose
// them, since the bucket bytes past the snapshot's recorded size are cut.
func TestFarHandOutWaitsForSnapshotWalk(t *testing.T) {
	defer func(c int, d time.Duration, o int) { snapChunk, snapTurnBudget, farOutPerTurn = c, d, o }(snapChunk, snapTurnBudget, farOutPerTurn)
	snapChunk, snapTurnBudget, farOutPerTurn = 1, 0, 0
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%d", i)}, farT0.Add(5*time.Hour))
	}
	if n := memJobs(t, b); n != 20 {
		t.Fatalf("%d jobs in memory before hand-outs may start", n)
	}
	// on the loop: a snapshot is due now, and hand-outs may go
	call(b, ctx, func(time.Time) (struct{}, error) {
		b.opts.SnapshotBytes, farOutPerTurn = 1, 4096
		return struct{}{}, nil
	})
	// the walk takes a turn per job; the snapshot file is sealed off the
	// loop, which a busy machine may take a while to get to
	for deadline := time.Now().Add(10 * time.Second); len(mustList(b)) == 0 && time.Now().Before(deadline); {
		memJobs(t, b)
		time.Sleep(time.Millisecond)
	}
	if len(mustList(b)) == 0 {
		t.Fatal("no snapshot was written")
	}
	if f := farJobs(t, b); f != 20 {
		t.Fatalf("%d far jobs after the walk, want 20", f)
	}
	b.skipFinalSnapshot = true
	b.Close()
	b = mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	for i := 0; i < 20; i++ {
		if _, err := b.Peek(ctx, "default", "q", fmt.Sprintf("j%d", i)); err != nil {
			t.Fatalf("job j%d after the crash: %v", i, err)
		}
	}
}

// TestFarMemoryPerJob measures what a far job costs in memory:
// CHRONOQ_FAR_JOBS=N puts N jobs with 100-byte payloads due between 2 hours
// and CHRONOQ_FAR_SPAN (default 168h) ahead, with a one-hour horizon, and
// reports heap in use per job once they are all in buckets. Not run by
// default: it is a measurement, not a check.
func TestFarMemoryPerJob(t *testing.T) {
	n, span := farMeasureSize(t, "CHRONOQ_FAR_JOBS", "the memory of N far jobs")
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b, err := Open(Options{Dir: dir, Logger: quiet, Clock: clk.now, FarHorizon: time.Hour, SnapshotBytes: 1 << 40, SnapshotInterval: 1000 * time.Hour,
		WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	// the queue and the first batch's buffers exist before the baseline
	putAt(t, b, "q", engine.PutRequest{ID: "first"}, farT0.Add(time.Minute))
	before := heap()
	payload := make([]byte, 100)
	batch := make([]engine.PutRequest, 1000)
	rng := rand.New(rand.NewPCG(1, 1))
	start := time.Now()
	for put := 0; put < n; put += len(batch) {
		for i := range batch {
			at := farT0.Add(2*time.Hour + time.Duration(rng.Int64N(int64(span-2*time.Hour))))
			batch[i] = engine.PutRequest{Payload: payload, At: &at}
		}
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	memJobs(t, b)
	fill := time.Since(start)
	after := heap()
	st, _ := b.FarStats(ctx)
	t.Logf("%d far jobs in %d buckets over %s, filled in %s: heap in use %+d bytes = %.1f bytes/job (filters %.1f bytes/job); %d jobs in memory",
		st.Jobs, st.Buckets, span, fill.Round(time.Millisecond), int64(after)-int64(before), float64(int64(after)-int64(before))/float64(st.Jobs),
		float64(st.FilterBytes)/float64(st.Jobs), memJobs(t, b))
}

type latenessObserver struct {
	nopObserver
	mu sync.Mutex
	d  []time.Duration
}

func (o *latenessObserver) Lateness(d time.Duration) {
	o.mu.Lock()
	o.d = append(o.d, d)
	o.mu.Unlock()
}

// TestFarActivationLateness measures how late jobs that spent their wait in
// a bucket are handed to waiting workers: CHRONOQ_FAR_LATENESS=N puts N jobs
// due 20 to 28 s ahead with an 8 s horizon (so all of them go to buckets
// and come back 2 s before their bucket's 4 s window), keeps long-polling
// takes parked, and reports the lateness percentiles (activation → take);
// CHRONOQ_FAR_LATENESS_BASELINE=1 runs the same jobs all in memory. Not run
// by default: it is a measurement on the real clock.
func TestFarActivationLateness(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CHRONOQ_FAR_LATENESS"))
	if n == 0 {
		t.Skip("set CHRONOQ_FAR_LATENESS=N to measure the activation lateness of N jobs from buckets")
	}
	obs := &latenessObserver{}
	horizon := 8 * time.Second
	if os.Getenv("CHRONOQ_FAR_LATENESS_BASELINE") == "1" {
		horizon = 0 // the same jobs, all in memory: what the machine gives
	}
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, FarHorizon: horizon, Observer: obs,
		WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	now := time.Now()
	payload := make([]byte, 100)
	batch := make([]engine.PutRequest, 0, 1000)
	for i := 0; i < n; i++ {
		at := now.Add(20*time.Second + time.Duration(i)*8*time.Second/time.Duration(n))
		batch = append(batch, engine.PutRequest{Payload: payload, At: &at})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if f := farJobs(t, b); horizon > 0 && f < n*9/10 {
		t.Fatalf("only %d of %d jobs went to buckets", f, n)
	}
	var wg sync.WaitGroup
	var got sync.Map
	var taken atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for taken.Load() < int64(n) {
				jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 100}, 2*time.Second)
				if err != nil {
					return
				}
				seen := time.Now()
				for _, j := range jobs {
					got.Store(j.ID, seen.Sub(j.ActivateAt))
				}
				taken.Add(int64(len(jobs)))
			}
		}()
	}
	wg.Wait()
	obs.mu.Lock()
	d := append([]time.Duration(nil), obs.d...)
	obs.mu.Unlock()
	var all []time.Duration
	got.Range(func(_, v any) bool { all = append(all, v.(time.Duration)); return true })
	pct := func(d []time.Duration, p float64) time.Duration {
		slices.Sort(d)
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	t.Logf("horizon %s: %d jobs handed to parked takes: lateness p50 %s p99 %s; all %d jobs as the taker saw them: p50 %s p99 %s",
		horizon, len(d), pct(d, 0.5), pct(d, 0.99), len(all), pct(all, 0.5), pct(all, 0.99))
}

// TestFarPayloadSegmentKeptForTheOlderSnapshot: a job's payload goes into
// its bucket when it leaves memory, but a recovery from the older of the two
// kept snapshots replays records that still point at the payload in the
// log, so that log segment must stay until both kept snapshots began after
// the hand-out.
func TestFarPayloadSegmentKeptForTheOlderSnapshot(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	ctx := context.Background()
	putAt(t, b, "q", engine.PutRequest{ID: "j"}, farT0.Add(10*time.Minute))
	big := make([]byte, 8<<10)
	for i := 0; i < 20; i++ { // roll the log past the first segment
		id := fmt.Sprintf("filler%d", i)
		putAt(t, b, "q", engine.PutRequest{ID: id, Payload: big}, farT0.Add(time.Minute))
		if err := b.Cancel(ctx, "default", "q", id, ""); err != nil {
			t.Fatal(err)
		}
	}
	farSnapshot(t, b)
	farSnapshot(t, b)
	later := farT0.Add(5 * time.Hour)
	if _, err := b.Update(ctx, "default", "q", "j", engine.UpdateRequest{At: &later}); err != nil {
		t.Fatal(err)
	}
	if f := farJobs(t, b); f != 1 {
		t.Fatalf("%d far jobs, want 1", f)
	}
	farSnapshot(t, b) // covers the bucket; the older kept one does not
	snaps := mustList(b)
	b.skipFinalSnapshot = true
	b.Close()
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots kept", len(snaps))
	}
	// the newest snapshot is unusable: recovery falls back to the older
	if err := os.Remove(snaps[0].Path); err != nil {
		t.Fatal(err)
	}
	b = mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	j, err := b.Peek(ctx, "default", "q", "j")
	if err != nil || string(j.Data) != "payload of j" || !j.ActivateAt.Equal(later) {
		t.Fatalf("job after recovery from the older snapshot: %+v %v", j, err)
	}
}

// TestFarSnapshotTakingTheNewestsPlace: a snapshot taken when only
// hand-outs happened since the newest one has that one's log position and
// takes its file's place. It is not a second kept snapshot: the older kept
// one still needs the log segments holding the payloads of the jobs handed
// out since it began, and recovery falls back to it when the newest is
// unusable.
func TestFarSnapshotTakingTheNewestsPlace(t *testing.T) {
	defer func(o int) { farOutPerTurn = o }(farOutPerTurn)
	farOutPerTurn = 1 // jobs leave memory one a turn: hand-outs between snapshots
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	ctx := context.Background()
	const n = 60
	payload := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 4<<10) }
	// put with the far store off: the jobs are in memory at the next start,
	// their 240 KiB of payloads in the first 64 KiB segments
	b := mustOpenFar(t, dir, clk, 0)
	for i := 0; i < n; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%02d", i), Payload: []byte(payload(i))}, farT0.Add(3*time.Hour))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = mustOpenFar(t, dir, clk, time.Hour)
	waitFarAtLeast := func(want int) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); farJobs(t, b) < want; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%d far jobs, want %d or more", farJobs(t, b), want)
			}
		}
	}
	putAt(t, b, "q", engine.PutRequest{ID: "near1"}, farT0.Add(10*time.Minute))
	farSnapshot(t, b) // the older kept one: most far jobs in its memory part
	waitFarAtLeast(n / 3)
	putAt(t, b, "q", engine.PutRequest{ID: "near2"}, farT0.Add(10*time.Minute))
	farSnapshot(t, b) // the newest
	// Two more with only hand-outs before each: they take the newest
	// one's place. (A snapshot lets go of segments before it counts
	// itself, so it takes the second to drop what the first let go.)
	waitFarAtLeast(2 * n / 3)
	farSnapshot(t, b)
	waitFarAtLeast(n)
	farSnapshot(t, b)
	// the segments that snapshot let go are removed, off the loop
	untilOnLoop(t, b, "old log segments still being removed", func() bool {
		return !b.snap.dropAgain && !b.snap.removing.running()
	})
	snaps := mustList(b)
	b.skipFinalSnapshot = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || snaps[0].Pos == snaps[1].Pos {
		t.Fatalf("snapshots kept: %+v", snaps)
	}
	if err := os.Remove(snaps[0].Path); err != nil {
		t.Fatal(err)
	}
	b = mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("j%02d", i)
		if j, err := b.Peek(ctx, "default", "q", id); err != nil || string(j.Data) != payload(i) {
			t.Fatalf("job %s after recovery from the older snapshot: %v", id, err)
		}
	}
}

func TestFarJobsListed(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	ctx := context.Background()
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("near%d", i)
		putAt(t, b, "q", engine.PutRequest{ID: id, Tags: map[string]string{"k": fmt.Sprint(i % 2)}}, farT0.Add(time.Minute))
		want[id] = true
	}
	for i := 0; i < 25; i++ { // three buckets
		id := fmt.Sprintf("far%02d", i)
		putAt(t, b, "q", engine.PutRequest{ID: id, Tags: map[string]string{"k": fmt.Sprint(i % 2)}}, farT0.Add(3*time.Hour+time.Duration(i%3)*time.Hour))
		want[id] = true
	}
	if f := farJobs(t, b); f != 25 {
		t.Fatalf("%d far jobs", f)
	}
	list := func(f engine.Filter) map[string]bool {
		got := map[string]bool{}
		cursor := ""
		for pages := 0; pages < 20; pages++ {
			res, err := b.List(ctx, "default", "q", engine.ListRequest{Filter: f, Limit: 4, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Jobs) > 4 {
				t.Fatalf("page of %d jobs", len(res.Jobs))
			}
			for _, j := range res.Jobs {
				if got[j.ID] {
					t.Fatalf("%s listed twice", j.ID)
				}
				if string(j.Data) != "payload of "+j.ID || j.State != engine.StateDelayed {
					t.Fatalf("listed %+v", j)
				}
				got[j.ID] = true
			}
			if cursor = res.NextCursor; cursor == "" {
				return got
			}
		}
		t.Fatal("listing does not end")
		return nil
	}
	if got := list(engine.Filter{}); len(got) != 30 {
		t.Fatalf("listed %d of 30: %v", len(got), got)
	}
	if got := list(engine.Filter{Tags: map[string]string{"k": "1"}}); len(got) != 2+12 {
		t.Fatalf("listed %d with the tag, want 14", len(got))
	}
	if got := list(engine.Filter{States: []engine.State{engine.StateReady}}); len(got) != 0 {
		t.Fatalf("ready listing shows %v", got)
	}
	if _, err := b.List(ctx, "default", "q", engine.ListRequest{Cursor: "far.x.1"}); engine.CodeOf(err) != engine.CodeBadRequest {
		t.Fatalf("bad far cursor: %v", err)
	}
}

// TestFarRestartTime measures how long a restart takes with far jobs:
// CHRONOQ_FAR_RESTART_JOBS=N puts N jobs with 100-byte payloads due between
// 2 hours and CHRONOQ_FAR_SPAN (default 168h) ahead with a one-hour horizon,
// closes the broker (final snapshot) and reports how long Open takes. Not
// run by default: it is a measurement on the real clock.
func TestFarRestartTime(t *testing.T) {
	n, span := farMeasureSize(t, "CHRONOQ_FAR_RESTART_JOBS", "a restart with N far jobs")
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	open := func() *Broker {
		b, err := Open(Options{Dir: dir, Logger: quiet, Clock: clk.now, FarHorizon: time.Hour, SnapshotBytes: 1 << 40, SnapshotInterval: 1000 * time.Hour,
			WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	ctx := context.Background()
	payload := make([]byte, 100)
	batch := make([]engine.PutRequest, 1000)
	rng := rand.New(rand.NewPCG(1, 1))
	for put := 0; put < n; put += len(batch) {
		for i := range batch {
			at := farT0.Add(2*time.Hour + time.Duration(rng.Int64N(int64(span-2*time.Hour))))
			batch[i] = engine.PutRequest{Payload: payload, At: &at}
		}
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	memJobs(t, b)
	st, _ := b.FarStats(ctx)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b = open()
	took := time.Since(start)
	if prof := os.Getenv("CHRONOQ_FAR_RESTART_PROFILE"); prof != "" {
		// a second restart, profiled
		b.Close()
		f, err := os.Create(prof)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		b = open()
		pprof.StopCPUProfile()
		f.Close()
	}
	defer b.Close()
	if f := farJobs(t, b); f != st.Jobs {
		t.Fatalf("%d far jobs after the restart, want %d", f, st.Jobs)
	}
	t.Logf("%d far jobs in %d buckets over %s: restart took %s (%d buckets opened from side files)", st.Jobs, st.Buckets, span, took.Round(time.Millisecond), b.far.fromSide)
}

// farSetup puts jobs far in two buckets and closes the broker cleanly
// (final snapshot, side files written); it returns the bucket files.
func farSetup(t *testing.T, dir string, clk *testClock) []string {
	t.Helper()
	b := mustOpenFar(t, dir, clk, time.Hour)
	for i := 0; i < 20; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%d", i), Tags: map[string]string{"t": "x"}}, farT0.Add(4*time.Hour))
		putAt(t, b, "r", engine.PutRequest{ID: fmt.Sprintf("k%d", i)}, farT0.Add(9*time.Hour))
	}
	putAt(t, b, "q", engine.PutRequest{ID: "near"}, farT0.Add(time.Minute))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	files := bucketFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("bucket files: %v", files)
	}
	return files
}

func sideOf(bucket string) string { return strings.TrimSuffix(bucket, ".bkt") + ".idx" }

// checkFar checks that every far job of farSetup (less the cancelled ids)
// is found by id and by beanstalkd id, and counted.
func checkFar(t *testing.T, b *Broker, q, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	if d := delayed(t, b, q); d != uint64(n) {
		t.Fatalf("queue %s: delayed %d, want %d", q, d, n)
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		j, err := b.Peek(ctx, "default", q, id)
		if err != nil || string(j.Data) != "payload of "+id {
			t.Fatalf("far job %s: %+v %v", id, j, err)
		}
	}
}

// TestFarRestartFromSideFiles: a clean restart opens the buckets from their
// side files without reading them, and the filters and counts it loads
// find every job; a side file that is torn, has a flipped bit, or
// describes an older size of its bucket makes that bucket be read instead,
// never a refusal.
func TestFarRestartFromSideFiles(t *testing.T) {
	cases := []struct {
		name     string
		damage   func(t *testing.T, dir string, clk *testClock, files []string)
		fromSide int
	}{
		{"clean", func(*testing.T, string, *testClock, []string) {}, 2},
		{"torn side file", func(t *testing.T, _ string, _ *testClock, files []string) {
			st, err := os.Stat(sideOf(files[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(sideOf(files[0]), st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"bit flip in side file", func(t *testing.T, _ string, _ *testClock, files []string) {
			data, err := os.ReadFile(sideOf(files[1]))
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x10
			if err := os.WriteFile(sideOf(files[1]), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"missing side file", func(t *testing.T, _ string, _ *testClock, files []string) {
			if err := os.Remove(sideOf(files[0])); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"side file of an older bucket size", func(t *testing.T, dir string, clk *testClock, files []string) {
			// keep the side file, grow the bucket (more jobs, one of them
			// cancelled), then put the old side file back
			old, err := os.ReadFile(sideOf(files[0]))
			if err != nil {
				t.Fatal(err)
			}
			b := mustOpenFar(t, dir, clk, time.Hour)
			for i := 20; i < 30; i++ {
				putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%d", i)}, farT0.Add(4*time.Hour))
			}
			memJobs(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sideOf(files[0]), old, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &testClock{t: farT0}
			files := farSetup(t, dir, clk)
			c.damage(t, dir, clk, files)
			b := mustOpenFar(t, dir, clk, time.Hour)
			defer func() { b.Close() }()
			if b.far.fromSide != c.fromSide {
				t.Fatalf("%d buckets opened from side files, want %d", b.far.fromSide, c.fromSide)
			}
			nq := 20
			if strings.Contains(c.name, "older") {
				nq = 30
			}
			if f := farJobs(t, b); f != nq+20 {
				t.Fatalf("%d far jobs, want %d", f, nq+20)
			}
			// filters and counts as loaded: found by id, by tag, counted
			n, err := b.CancelByFilter(context.Background(), "default", "q", engine.Filter{Tags: map[string]string{"t": "x"}})
			if err != nil || n != 20 {
				t.Fatalf("cancel by tag: %d %v, want 20", n, err)
			}
			checkFar(t, b, "r", "k", 20)
			if d := delayed(t, b, "q"); d != uint64(nq-20+1) { // and "near"
				t.Fatalf("queue q: delayed %d, want %d", d, nq-20+1)
			}
			// and again after a crash: the take-backs replay as tombstones
			b.skipFinalSnapshot = true
			b.Close()
			b = mustOpenFar(t, dir, clk, time.Hour)
			checkFar(t, b, "r", "k", 20)
			if d := delayed(t, b, "q"); d != uint64(nq-20+1) { // and "near"
				t.Fatalf("queue q after a crash: delayed %d, want %d", d, nq-20+1)
			}
			for i := 0; i < 20; i++ {
				if _, err := b.Peek(context.Background(), "default", "q", fmt.Sprintf("j%d", i)); engine.CodeOf(err) != engine.CodeJobNotFound {
					t.Fatalf("cancelled job j%d: %v", i, err)
				}
			}
		})
	}
}

// TestFarBucketBitFlipFoundWhenRead: a bucket opened from its side file is
// not read at start, so a flipped bit in it is found when it is read; the
// command fails with the file and offset, and the side file is dropped so
// the next start reads the bucket and applies the rules for damage.
func TestFarBucketBitFlipFoundWhenRead(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	files := farSetup(t, dir, clk)
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 0x40
	if err := os.WriteFile(files[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := mustOpenFar(t, dir, clk, time.Hour)
	_, err = b.Peek(context.Background(), "default", "q", "j19")
	if engine.CodeOf(err) != engine.CodeUnavailable || !strings.Contains(err.Error(), files[0]) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("peek of a job in a damaged bucket: %v", err)
	}
	// the bucket's window opens: the load finds the damage too
	clk.add(4*time.Hour - 10*time.Minute)
	memJobs(t, b)
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sideOf(files[0])); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Close()
	if _, err := os.Stat(sideOf(files[0])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged bucket's side file is still there: %v", err)
	}
	_, err = openFar(t, dir, clk, time.Hour, false)
	var de *farstore.DamageError
	if !errors.As(err, &de) || de.File != files[0] {
		t.Fatalf("start with a damaged bucket: %v", err)
	}
}

// TestFarJobsCountForMaxJobs: --max-jobs is the node's budget, far jobs
// included: a put beyond it is refused with the limit named even when the
// jobs held are all in buckets, and nothing is stored.
func TestFarJobsCountForMaxJobs(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	open := func() *Broker {
		b, err := Open(Options{Dir: dir, Logger: quiet, Clock: clk.now, FarHorizon: time.Hour, MaxJobs: 5, SnapshotBytes: 1 << 40, SnapshotInterval: time.Hour,
			WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%d", i)}, farT0.Add(5*time.Hour))
	}
	check := func(b *Broker) {
		t.Helper()
		if n, f := memJobs(t, b), farJobs(t, b); n != 0 || f != 5 {
			t.Fatalf("%d jobs in memory, %d far; want 0 and 5", n, f)
		}
		at := farT0.Add(5 * time.Hour)
		_, err := b.Put(ctx, "default", "q", engine.PutRequest{ID: "over", Payload: []byte("x"), At: &at})
		if engine.CodeOf(err) != engine.CodeQueueFull || !strings.Contains(err.Error(), "maximum of 5 jobs") {
			t.Fatalf("put beyond --max-jobs with the jobs in buckets: %v", err)
		}
		if _, err := b.Peek(ctx, "default", "q", "over"); engine.CodeOf(err) != engine.CodeJobNotFound {
			t.Fatalf("the refused job: %v", err)
		}
	}
	check(b)
	// the count is rebuilt at restart from the buckets' side files
	b.Close()
	b = open()
	defer b.Close()
	check(b)
	if err := b.Cancel(ctx, "default", "q", "j0", ""); err != nil {
		t.Fatal(err)
	}
	putAt(t, b, "q", engine.PutRequest{ID: "fits"}, farT0.Add(5*time.Hour))
}

// TestFarJobsKicked: beanstalkd kick N with no buried job kicks the soonest
// N delayed jobs, far ones included, in time order.
func TestFarJobsKicked(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	ctx := context.Background()
	putAt(t, b, "q", engine.PutRequest{ID: "near"}, farT0.Add(10*time.Minute))
	for i := 0; i < 4; i++ {
		// two buckets: a0 a1 due in 3 h, a2 a3 in 8 h
		putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("a%d", i)}, farT0.Add(time.Duration(3+5*(i/2))*time.Hour+time.Duration(i)*time.Minute))
	}
	putAt(t, b, "other", engine.PutRequest{ID: "o"}, farT0.Add(3*time.Hour))
	if n, f := memJobs(t, b), farJobs(t, b); n != 1 || f != 5 {
		t.Fatalf("%d jobs in memory, %d far; want 1 and 5", n, f)
	}
	n, err := b.KickBounded(ctx, "default", "q", 3)
	if err != nil || n != 3 {
		t.Fatalf("kick 3: %d %v, want 3", n, err)
	}
	for id, want := range map[string]engine.State{"near": engine.StateReady, "a0": engine.StateReady, "a1": engine.StateReady, "a2": engine.StateDelayed, "a3": engine.StateDelayed} {
		j, err := b.Peek(ctx, "default", "q", id)
		if err != nil || j.State != want {
			t.Fatalf("job %s after kick 3: %+v %v, want %s", id, j, err, want)
		}
	}
	// kick everything (clients send a bound of 2^32-1)
	if n, err := b.KickBounded(ctx, "default", "q", 1<<32-1); err != nil || n != 2 {
		t.Fatalf("kick all: %d %v, want 2", n, err)
	}
	if d := delayed(t, b, "q"); d != 0 {
		t.Fatalf("delayed %d after kicking all", d)
	}
	if d := delayed(t, b, "other"); d != 1 {
		t.Fatalf("other queue: delayed %d, want 1 (not kicked)", d)
	}
}

// noMoreRewrites raises the rewrite threshold out of reach (on the loop,
// which reads it).
func noMoreRewrites(t *testing.T, b *Broker) {
	t.Helper()
	call(b, context.Background(), func(time.Time) (struct{}, error) {
		b.far.minDead = 1 << 30
		return struct{}{}, nil
	})
}

func rewrites(t *testing.T, b *Broker) int {
	t.Helper()
	n, err := call(b, context.Background(), func(time.Time) (int, error) { return b.far.rewrites, nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFarBucketRewrite: a bucket whose jobs were mostly taken back is
// rewritten off the loop into a new generation holding only its live jobs;
// the jobs taken back while the copy runs follow it; the old file goes once
// no kept snapshot lists it; and a crash at every step of it loses no job
// and brings no cancelled job back.
func TestFarBucketRewrite(t *testing.T) {
	defer func(d int) { farRewriteMinDead, farRewriteHook = d, nil }(farRewriteMinDead)
	farRewriteMinDead = 8
	ctx := context.Background()
	due := farT0.Add(4 * time.Hour)
	// setup puts 40 far jobs in one bucket, snapshots, cancels 24 of them
	// and then starts one rewrite of the bucket. (Left to itself the bucket
	// qualifies after the 14th cancel, and whether the later cancels land
	// during that rewrite or qualify the new file for a second one depended
	// on the machine's speed.)
	setup := func(t *testing.T, dir string, clk *testClock) (*Broker, map[string]bool) {
		farRewriteMinDead = 1 << 30
		b := mustOpenFar(t, dir, clk, time.Hour)
		farRewriteMinDead = 8
		for i := 0; i < 40; i++ {
			putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("j%02d", i)}, due.Add(time.Duration(i)*time.Second))
		}
		memJobs(t, b)
		farSnapshot(t, b)
		gone := map[string]bool{}
		for i := 0; i < 24; i++ {
			id := fmt.Sprintf("j%02d", i*5/3)
			if err := b.Cancel(ctx, "default", "q", id, ""); err != nil {
				t.Fatal(err)
			}
			gone[id] = true
		}
		if _, err := call(b, ctx, func(time.Time) (struct{}, error) {
			b.far.minDead = farRewriteMinDead
			for _, bk := range b.far.buckets {
				b.far.maybeRewrite(bk)
			}
			return struct{}{}, nil
		}); err != nil {
			t.Fatal(err)
		}
		return b, gone
	}
	verify := func(t *testing.T, b *Broker, gone map[string]bool) {
		t.Helper()
		live := 0
		for i := 0; i < 40; i++ {
			if !gone[fmt.Sprintf("j%02d", i)] {
				live++
			}
		}
		if d := delayed(t, b, "q"); d != uint64(live) {
			t.Fatalf("delayed %d, want %d", d, live)
		}
		for i := 0; i < 40; i++ {
			id := fmt.Sprintf("j%02d", i)
			j, err := b.Peek(ctx, "default", "q", id)
			if gone[id] {
				if engine.CodeOf(err) != engine.CodeJobNotFound {
					t.Fatalf("cancelled job %s is back: %v", id, err)
				}
				continue
			}
			if err != nil || string(j.Data) != "payload of "+id || !j.ActivateAt.Equal(due.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("job %s: %+v %v", id, j, err)
			}
		}
	}
	waitRewrite := func(t *testing.T, b *Broker) {
		t.Helper()
		// bounded generously: the copy runs off the loop and a loaded
		// machine (CI's two cores running other packages) slows it
		for end := time.Now().Add(30 * time.Second); rewrites(t, b) == 0 && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		if n := rewrites(t, b); n != 1 {
			t.Fatalf("the bucket was rewritten %d times, want once", n)
		}
	}
	gens := func(t *testing.T, dir string) string {
		t.Helper()
		ids, err := farstore.List(filepath.Join(dir, "far"))
		if err != nil {
			t.Fatal(err)
		}
		var g []uint32
		for _, id := range ids {
			g = append(g, id.Gen)
		}
		slices.Sort(g)
		return fmt.Sprint(g)
	}

	t.Run("rewritten", func(t *testing.T) {
		dir := t.TempDir()
		clk := &testClock{t: farT0}
		// the copy waits, once done, for cancels and a put that land in
		// the old file while it runs: later rounds carry them over
		reached, release := make(chan struct{}), make(chan struct{})
		first := true // the hook runs on the rewrite's goroutine only
		farRewriteHook = func(s farRewriteStep) bool {
			if s == rewriteCopied && first {
				first = false
				reached <- struct{}{}
				<-release
			}
			return true
		}
		defer func() { farRewriteHook = nil }()
		b, gone := setup(t, dir, clk)
		select {
		case <-reached:
		case <-time.After(5 * time.Second):
			t.Fatal("the rewrite did not start")
		}
		for _, id := range []string{"j37", "j39"} {
			if err := b.Cancel(ctx, "default", "q", id, ""); err != nil {
				t.Fatal(err)
			}
			gone[id] = true
		}
		putAt(t, b, "q", engine.PutRequest{ID: "j40"}, due.Add(40*time.Second))
		memJobs(t, b) // handed out: in the old file
		close(release)
		waitRewrite(t, b)
		noMoreRewrites(t, b) // peeks take jobs back, which would call for more
		if f := farJobs(t, b); f != 40+1-len(gone) {
			t.Fatalf("%d far jobs after the rewrite, want %d", f, 40+1-len(gone))
		}
		if j, err := b.Peek(ctx, "default", "q", "j40"); err != nil || string(j.Data) != "payload of j40" {
			t.Fatalf("job put while the copy ran: %+v %v", j, err)
		}
		if err := b.Cancel(ctx, "default", "q", "j40", ""); err != nil {
			t.Fatal(err)
		}
		verify(t, b, gone) // j00–j39; j40 is gone too
		if _, err := b.Peek(ctx, "default", "q", "j40"); engine.CodeOf(err) != engine.CodeJobNotFound {
			t.Fatalf("cancelled j40: %v", err)
		}
		if g := gens(t, dir); g != "[0 1]" {
			t.Fatalf("generations %s after the rewrite, want [0 1]", g)
		}
		old, _ := os.Stat(filepath.Join(dir, "far", farstore.Name(due.Truncate(30*time.Minute).UnixMilli(), 0)))
		cur, _ := os.Stat(filepath.Join(dir, "far", farstore.Name(due.Truncate(30*time.Minute).UnixMilli(), 1)))
		if old == nil || cur == nil || cur.Size() >= old.Size() {
			t.Fatalf("old file %v, new %v: the new one must be smaller", old, cur)
		}
		farSnapshot(t, b)
		if g := gens(t, dir); g != "[0 1]" {
			t.Fatalf("generations %s after one snapshot: the older kept one lists 0", g)
		}
		putAt(t, b, "near", engine.PutRequest{ID: "n"}, farT0.Add(time.Minute)) // else the snapshot is skipped
		farSnapshot(t, b)
		if g := gens(t, dir); g != "[1]" {
			t.Fatalf("generations %s after two snapshots, want [1]", g)
		}
		b.skipFinalSnapshot = true
		b.Close()
		b = mustOpenFar(t, dir, clk, time.Hour)
		defer b.Close()
		verify(t, b, gone)
	})

	// a crash at each step: the rewrite stopped (as the process dying)
	// after one block of the new file, after the copy, after the switch,
	// and after the switch and one snapshot
	for _, step := range []string{"torn", "copied", "switched", "snapshot after switch"} {
		t.Run("crash "+step, func(t *testing.T) {
			dir := t.TempDir()
			clk := &testClock{t: farT0}
			stopped := make(chan struct{}, 1)
			farRewriteHook = func(s farRewriteStep) bool {
				stop := step == "torn" && s == rewriteTorn || step == "copied" && s == rewriteCopied
				if stop {
					stopped <- struct{}{}
				}
				return !stop
			}
			defer func() { farRewriteHook = nil }()
			b, gone := setup(t, dir, clk)
			switch step {
			case "torn", "copied":
				select {
				case <-stopped:
				case <-time.After(5 * time.Second):
					t.Fatal("the rewrite did not reach the step")
				}
				if g := gens(t, dir); g != "[0 1]" {
					t.Fatalf("generations %s while rewriting", g)
				}
			case "switched":
				waitRewrite(t, b)
			case "snapshot after switch":
				waitRewrite(t, b)
				farSnapshot(t, b)
			}
			// one more cancel after the step
			if err := b.Cancel(ctx, "default", "q", "j39", ""); err != nil {
				t.Fatal(err)
			}
			gone["j39"] = true
			b.skipFinalSnapshot = true
			b.Close()
			farRewriteHook = nil
			// the recovery would start a rewrite of the bucket at once
			// (replay took jobs back): off, to see what it kept
			farRewriteMinDead = 1 << 30
			b = mustOpenFar(t, dir, clk, time.Hour)
			want := "[0]"
			if step == "snapshot after switch" {
				want = "[1]"
			}
			if g := gens(t, dir); g != want {
				t.Fatalf("generations %s after recovery, want %s (the one the snapshot lists)", g, want)
			}
			verify(t, b, gone)
			farRewriteMinDead = 8
			// and once more, cleanly
			b.Close()
			b = mustOpenFar(t, dir, clk, time.Hour)
			defer b.Close()
			verify(t, b, gone)
		})
	}
}

// A manifest written before rewrites existed (version 1) lists generation
// 0 of each bucket.
func TestFarManifestVersion1(t *testing.T) {
	m := []byte{farManifestMagic, 1}
	m = binary.AppendUvarint(m, 1)
	m = binary.AppendVarint(m, 3600000)
	m = binary.AppendUvarint(m, 100)
	got, err := decodeFarManifest(m)
	if err != nil || len(got) != 1 || got[0] != (farListed{start: 3600000, size: 100}) {
		t.Fatalf("version 1 manifest: %+v %v", got, err)
	}
	if _, err := decodeFarManifest([]byte{farManifestMagic, 3, 0}); err == nil {
		t.Fatal("version 3 accepted")
	}
}

// farMeasureSize reads a far-store measurement's size: N jobs from the
// variable env (the test is skipped without it) spread over
// CHRONOQ_FAR_SPAN (default a week).
func farMeasureSize(t *testing.T, env, what string) (n int, span time.Duration) {
	t.Helper()
	n, _ = strconv.Atoi(os.Getenv(env))
	if n == 0 {
		t.Skipf("set %s=N to measure %s", env, what)
	}
	span = 168 * time.Hour
	if v, err := time.ParseDuration(os.Getenv("CHRONOQ_FAR_SPAN")); err == nil {
		span = v
	}
	return n, span
}

// A backlog of far candidates (left by a snapshot walk or by the per-turn
// bound) is handed out reading each log frame once: a batch of puts is one
// frame, and reading it again per payload made a year-spread fill of 10 M
// jobs crawl at ~8 000 jobs/s.
func TestFarBacklogReadsEachFrameOnce(t *testing.T) {
	defer func(o int) { farOutPerTurn = o }(farOutPerTurn)
	farOutPerTurn = 0 // no hand-out while the batch goes in
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, t.TempDir(), clk, time.Hour)
	defer b.Close()
	ctx := context.Background()
	const n = 1000
	at := farT0.Add(5 * time.Hour)
	batch := make([]engine.PutRequest, n)
	for i := range batch {
		batch[i] = engine.PutRequest{Payload: bytes.Repeat([]byte{byte(i)}, 200), At: &at}
	}
	if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
		t.Fatal(err)
	}
	before := b.log.BytesRead()
	call(b, ctx, func(time.Time) (struct{}, error) { farOutPerTurn = 4096; return struct{}{}, nil })
	for deadline := time.Now().Add(10 * time.Second); farJobs(t, b) < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if f := farJobs(t, b); f != n {
		t.Fatalf("%d far jobs, want %d", f, n)
	}
	if read := b.log.BytesRead() - before; read > 2*n*200+64<<10 {
		t.Fatalf("handing out %d jobs of one batch read %d bytes of log; want about one frame (%d)", n, read, n*200)
	}
}

// TestFarHandOutAdaptsToItsTurnBudget: a turn that took longer than
// farOutBudget halves the next turn's hand-out (down to farOutMin), one
// well under it doubles it (up to farOutPerTurn); either way the backlog
// drains. Budget 0 makes every turn late, an hour none.
func TestFarHandOutAdaptsToItsTurnBudget(t *testing.T) {
	defer func(o int, d time.Duration) { farOutPerTurn, farOutBudget = o, d }(farOutPerTurn, farOutBudget)
	for _, tc := range []struct {
		budget time.Duration
		want   int
	}{{0, farOutMin}, {time.Hour, 256}} {
		farOutPerTurn, farOutBudget = 256, tc.budget
		clk := &testClock{t: farT0}
		b := mustOpenFar(t, t.TempDir(), clk, time.Hour)
		reqs := make([]engine.PutRequest, 1000)
		for i := range reqs {
			at := farT0.Add(2*time.Hour + time.Duration(i)*43*time.Minute) // a bucket each
			reqs[i] = engine.PutRequest{ID: fmt.Sprintf("j%04d", i), At: &at, Payload: []byte("p")}
		}
		if _, err := b.PutBatch(context.Background(), "default", "q", reqs); err != nil {
			t.Fatal(err)
		}
		waitFar(t, b, len(reqs))
		got, err := call(b, context.Background(), func(time.Time) (int, error) { return b.far.outMax, nil })
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Fatalf("budget %v: a turn hands out %d jobs after the backlog, want %d", tc.budget, got, tc.want)
		}
		b.Close()
	}
}

// TestFarBucketSyncFailureFailsTheSnapshot: the bucket files a snapshot
// counts are synced before it commits; when that fails the snapshot does
// not count, and the next one syncs the same files again and is written
// though nothing changed since the failure.
func TestFarBucketSyncFailureFailsTheSnapshot(t *testing.T) {
	defer func(f func(string, []string) error) { farSyncFiles = f }(farSyncFiles)
	clk := &testClock{t: farT0}
	dir := t.TempDir()
	b := mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	farSnapshot(t, b) // an older snapshot: the next one may not be skipped as unchanged
	putAt(t, b, "q", engine.PutRequest{ID: "far"}, farT0.Add(3*time.Hour))
	waitFar(t, b, 1)
	before := len(mustList(b))
	var synced [][]string
	farSyncFiles = func(dir string, paths []string) error {
		synced = append(synced, slices.Clone(paths))
		if len(synced) == 1 {
			return errors.New("injected: the disk refused the sync")
		}
		return farstore.SyncFiles(dir, paths)
	}
	_, err := call(b, context.Background(), func(time.Time) (struct{}, error) { return struct{}{}, b.snap.final(b, b.now()) })
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("snapshot with a failed bucket sync: %v, want that failure", err)
	}
	if n := len(mustList(b)); n != before {
		t.Fatalf("%d snapshots after a failed one, want %d", n, before)
	}
	farSnapshot(t, b)
	if len(synced) != 2 || len(synced[0]) != 1 || !slices.Equal(synced[0], synced[1]) {
		t.Fatalf("bucket files synced per snapshot: %v; the second must sync what the failed first did not", synced)
	}
	if n := len(mustList(b)); n != before+1 {
		t.Fatalf("%d snapshots, want %d", n, before+1)
	}
}

// TestFarHeldItemsAreFoundAndWrittenBeforeTheSnapshotCounts: handed-out
// jobs whose items are still held in memory (farHoldMax) are found by a
// lookup, and a snapshot taken while items are held writes them before it
// records the bucket sizes: after a crash right after that snapshot every
// job is there.
func TestFarHeldItemsAreFoundAndWrittenBeforeTheSnapshotCounts(t *testing.T) {
	defer func(o int) { farOutPerTurn = o }(farOutPerTurn)
	farOutPerTurn = 1 // a long backlog: items are held while candidates remain
	clk := &testClock{t: farT0}
	dir := t.TempDir()
	b := mustOpenFar(t, dir, clk, time.Hour)
	ctx := context.Background()
	const n = 300
	at := func(i int) time.Time { return farT0.Add(2*time.Hour + time.Duration(i)*43*time.Minute) }
	reqs := make([]engine.PutRequest, n)
	for i := range reqs {
		t := at(i)
		reqs[i] = engine.PutRequest{ID: fmt.Sprintf("j%03d", i), At: &t, Payload: []byte(fmt.Sprintf("payload of j%03d", i))}
	}
	if _, err := b.PutBatch(ctx, "default", "q", reqs); err != nil {
		t.Fatal(err)
	}
	var heldID string
	for i := 0; i < 500 && heldID == ""; i++ {
		id, err := call(b, ctx, func(time.Time) (string, error) {
			for _, bk := range b.far.holding {
				if bk.held > 0 {
					it, err := decodeFarItem(bk.pending[0])
					return it.rec.Job.ID, err
				}
			}
			return "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		heldID = id
	}
	if heldID == "" {
		t.Fatal("no item was ever held")
	}
	if j, err := b.Peek(ctx, "default", "q", heldID); err != nil || string(j.Data) != "payload of "+heldID {
		t.Fatalf("peek of a held job %s: %+v %v", heldID, j, err)
	}
	// snapshot at a turn that finds items held
	var heldIDs []string
	held := 0
	for i := 0; i < 500 && held == 0; i++ {
		var err error
		held, err = call(b, ctx, func(time.Time) (int, error) {
			if b.far.heldBytes == 0 {
				return 0, nil
			}
			for _, bk := range b.far.holding {
				for _, p := range bk.pending {
					if it, err := decodeFarItem(p); err == nil && !it.tomb {
						heldIDs = append(heldIDs, it.rec.Job.ID)
					}
				}
			}
			held := b.far.heldBytes // before final writes the held items
			return held, b.snap.final(b, b.now())
		})
		if err != nil {
			t.Fatal(err)
		}
		if held == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if held == 0 {
		t.Fatal("no item was held when the snapshot began; the test proves nothing")
	}
	b.skipFinalSnapshot = true
	b.Close()

	b = mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	if d := delayed(t, b, "q"); d != n {
		t.Fatalf("%d delayed after the crash, want %d", d, n)
	}
	check := heldIDs
	for i := 0; i < n; i += 7 {
		check = append(check, fmt.Sprintf("j%03d", i))
	}
	for _, id := range check {
		var i int
		fmt.Sscanf(id, "j%03d", &i)
		if j, err := b.Peek(ctx, "default", "q", id); err != nil || string(j.Data) != "payload of "+id || !j.ActivateAt.Equal(at(i)) {
			t.Fatalf("job %s after the crash (held when the snapshot began: %v): %+v %v", id, heldIDs, j, err)
		}
	}
}

// TestFarBucketFilesStayWhileABackupLinks: while a backup links bucket
// files off the loop, snapshots delete none (a taken-back bucket's file
// stays); afterwards the usual two snapshots delete it.
func TestFarBucketFilesStayWhileABackupLinks(t *testing.T) {
	dir := t.TempDir()
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, dir, clk, time.Hour)
	defer b.Close()
	putFortyFarOneNear(t, b)
	farSnapshot(t, b)
	clk.add(3*time.Hour - 10*time.Minute)
	memJobs(t, b)
	waitBucketsDone(t, b)
	files := func() int {
		ids, err := farstore.List(filepath.Join(dir, "far"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	n := 0
	snapshot := func() {
		n++
		changedSnapshot(t, b, clk, fmt.Sprintf("w%d", n))
	}
	b.far.linking.Add(1)
	for range 3 {
		snapshot()
	}
	if n := files(); n != 1 {
		t.Fatalf("%d bucket files while a backup links, want the taken-back one kept", n)
	}
	b.far.linking.Add(-1)
	snapshot()
	snapshot()
	if n := files(); n != 0 {
		t.Fatalf("%d bucket files two snapshots after the links, want 0", n)
	}
}
