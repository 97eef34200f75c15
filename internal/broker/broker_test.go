package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t *testing.T, dir string, snapBytes int64) *Broker {
	t.Helper()
	return openClock(t, dir, snapBytes, nil)
}

// openClock opens a broker reading time from clock (nil: the real one).
func openClock(t *testing.T, dir string, snapBytes int64, clock func() time.Time) *Broker {
	t.Helper()
	b, err := Open(Options{Dir: dir, Logger: quiet, SnapshotBytes: snapBytes, Clock: clock,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b
}

// dump renders every job of every queue (with payload bytes) so two
// brokers can be compared.
func dump(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	qs, err := b.AllQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		out["queue/"+q.Name] = fmt.Sprintf("%+v paused=%v", q.Counts, q.Paused)
		cursor := ""
		for {
			res, err := b.List(ctx, q.Namespace, q.Name, engine.ListRequest{Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range res.Jobs {
				out[q.Name+"/"+j.ID] = fmt.Sprintf("%s prio=%d at=%s attempt=%d key=%s tags=%v err=%q data=%q",
					j.State, j.Priority, j.ActivateAt.Format(time.RFC3339Nano), j.Attempt, j.Key, j.Tags, j.LastError, j.Data)
			}
			if res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
	return out
}

func same(t *testing.T, want, got map[string]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Fatalf("after reopen %s:\nwant %s\ngot  %s", k, want[k], got[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Fatalf("after reopen, unexpected %s = %s", k, got[k])
		}
	}
}

// churn runs random puts, takes, acks, nacks and cancels through the broker.
func churn(t *testing.T, b *Broker, rng *rand.Rand, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		q := fmt.Sprintf("q%d", rng.IntN(3))
		switch rng.IntN(5) {
		case 0, 1:
			req := engine.PutRequest{Payload: []byte(fmt.Sprintf(`{"i":%d,"pad":"%0*d"}`, i, rng.IntN(2000), 0)), PayloadJSON: true}
			if rng.IntN(3) == 0 {
				req.Key = fmt.Sprintf("k%d", rng.IntN(4))
			}
			if rng.IntN(4) == 0 {
				d := time.Duration(rng.IntN(3)) * time.Hour
				req.Delay = &d
			}
			if rng.IntN(5) == 0 {
				req.Tags = map[string]string{"t": fmt.Sprint(rng.IntN(3))}
			}
			if _, err := b.Put(ctx, "default", q, req); err != nil {
				t.Fatal(err)
			}
		case 2:
			jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{q}, Max: 1 + rng.IntN(3)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				switch rng.IntN(3) {
				case 0:
					_, err = b.Ack(ctx, "default", q, j.ID, engine.AckRequest{Receipt: j.Receipt})
				case 1:
					d := time.Duration(rng.IntN(2)) * time.Hour
					_, err = b.Nack(ctx, "default", q, j.ID, engine.NackRequest{Receipt: j.Receipt, Delay: &d, Error: "boom"})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		case 3:
			if rng.IntN(10) == 0 {
				b.CancelByFilter(ctx, "default", q, engine.Filter{Tags: map[string]string{"t": "1"}})
			}
		case 4:
			b.Peek(ctx, "default", q, "nope")
		}
	}
}

func TestSnapshotsWhileWritingThenReopen(t *testing.T) {
	dir := t.TempDir()
	// Time stands still while churning: on a loaded machine the test
	// outlived the 30 s reservations churn takes, and a reservation timing
	// out between a dump and the reopen's dump is not what this test looks
	// for.
	start := time.Now()
	var ahead atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(ahead.Load())) }
	open := func(t *testing.T, dir string, snapBytes int64) *Broker { return openClock(t, dir, snapBytes, clock) }
	b := open(t, dir, 8<<10) // a snapshot every 8 KiB of log: many, mid-churn
	rng := rand.New(rand.NewPCG(1, 2))
	churn(t, b, rng, 3000)
	// Compaction moves the payloads that pin old segments a bounded amount
	// per turn, between snapshots, and looks for the next segment to empty
	// once a second: the clock moves on, in steps, by up to 5 s (well
	// within the reservations' 30 s), until an old segment has gone.
	ctx := context.Background()
	for b.log.Segments()[0].Number == 1 && ahead.Load() < int64(5*time.Second) {
		ahead.Add(int64(50 * time.Millisecond))
		b.Peek(ctx, "default", "q0", "nope")
		time.Sleep(time.Millisecond)
	}
	want := dump(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := snapshot.List(filepath.Join(dir, "snap"))
	if len(snaps) != 2 {
		t.Fatalf("want the last two snapshots kept, found %d", len(snaps))
	}
	b = open(t, dir, 8<<10)
	same(t, want, dump(t, b))
	// the log lost segments the snapshots cover and no live payload needs
	segs := b.log.Segments()
	if segs[0].Number == 1 {
		t.Fatalf("no old segment was ever removed (%d segments)", len(segs))
	}
	churn(t, b, rng, 500)
	want = dump(t, b)
	b.Close()

	// the newest snapshot damaged: the older one plus a longer replay
	// must give the same state
	snaps, _ = snapshot.List(filepath.Join(dir, "snap"))
	f, err := os.OpenFile(snaps[0].Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("garbage!"), snaps[0].Size/2)
	f.Close()
	b = open(t, dir, 1<<30)
	same(t, want, dump(t, b))
	b.Close()
}

func TestSecondProcessOnSameDirRefused(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 0)
	defer b.Close()
	_, err := Open(Options{Dir: dir, Logger: quiet})
	if err == nil {
		t.Fatal("a second broker on the same directory must be refused")
	}
}

func TestLongPollWokenByPutAndByTime(t *testing.T) {
	b := open(t, t.TempDir(), 0)
	defer b.Close()
	ctx := context.Background()
	got := make(chan []engine.Job, 1)
	go func() {
		jobs, _ := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"w"}}, 10*time.Second)
		got <- jobs
	}()
	// the put wakes the parked take; no polling interval involved
	for {
		if _, err := b.Put(ctx, "default", "w", engine.PutRequest{Payload: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		select {
		case jobs := <-got:
			if len(jobs) != 1 || string(jobs[0].Data) != "1" {
				t.Fatalf("woken take got %+v", jobs)
			}
			return
		case <-time.After(2 * time.Second):
			t.Fatal("parked take not woken by a put")
		}
	}
}

func TestDrainEndsLongPolls(t *testing.T) {
	b := open(t, t.TempDir(), 0)
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		_, err := b.Take(context.Background(), "default", engine.TakeRequest{Queues: []string{"none"}}, time.Minute)
		done <- err
	}()
	// wait until the take is parked, then drain
	for i := 0; ; i++ {
		n, _ := call(b, context.Background(), func(time.Time) (int, error) { return len(b.waiters.dl), nil })
		if n == 1 {
			break
		}
		if i > 1000 {
			t.Fatal("take never parked")
		}
		time.Sleep(time.Millisecond)
	}
	b.Drain()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("drain did not end the long poll")
	}
}

// One job delayed for a year must not keep the whole log alive: its payload
// is relocated and the old segments go.
func TestLongDelayedJobDoesNotPinTheLog(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 16<<10)
	ctx := context.Background()
	year := 365 * 24 * time.Hour
	pinned, err := b.Put(ctx, "default", "slow", engine.PutRequest{Payload: []byte("see you next year"), Delay: &year})
	if err != nil {
		t.Fatal(err)
	}
	consumed(t, b, 400) // ~800 KiB through 64 KiB segments, all consumed
	// let the loop compact and snapshot (bounded)
	deadline := time.Now().Add(10 * time.Second)
	for b.log.Segments()[0].Number == 1 && time.Now().Before(deadline) {
		b.Peek(ctx, "default", "slow", pinned.ID)
		time.Sleep(20 * time.Millisecond)
	}
	if first := b.log.Segments()[0].Number; first == 1 {
		t.Fatalf("segment 1 is still there, pinned by one delayed job (%d segments)", len(b.log.Segments()))
	}
	j, err := b.Peek(ctx, "default", "slow", pinned.ID)
	if err != nil || string(j.Data) != "see you next year" {
		t.Fatalf("relocated job: %v %q", err, j.Data)
	}
	b.Close()
	b = open(t, dir, 16<<10)
	defer b.Close()
	j, err = b.Peek(ctx, "default", "slow", pinned.ID)
	if err != nil || string(j.Data) != "see you next year" || j.State != engine.StateDelayed {
		t.Fatalf("after reopen: %v %+v", err, j)
	}
}

// consumed puts, takes and acks n jobs of 2000 bytes: log that nothing pins.
func consumed(t *testing.T, b *Broker, n int) {
	t.Helper()
	ctx := context.Background()
	pad := make([]byte, 2000)
	for i := 0; i < n; i++ {
		if _, err := b.Put(ctx, "default", "fast", engine.PutRequest{Payload: pad}); err != nil {
			t.Fatal(err)
		}
		jobs, _ := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"fast"}}, 0)
		for _, j := range jobs {
			b.Ack(ctx, "default", "fast", j.ID, engine.AckRequest{Receipt: j.Receipt})
		}
	}
}

// snapCounter counts finished snapshots.
type snapCounter struct {
	nopObserver
	n atomic.Int64
}

func (c *snapCounter) Snapshot(time.Duration) { c.n.Add(1) }

// Emptying pinned segments must not make the loop write a full snapshot
// per segment (a log full of long-lived jobs used to write them back to
// back): the emptied segments go once the moved payloads are durable.
func TestCompactionDoesNotCascadeSnapshots(t *testing.T) {
	dir := t.TempDir()
	obs := &snapCounter{}
	b, err := Open(Options{Dir: dir, Logger: quiet, SnapshotBytes: 128 << 10, Observer: obs,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	year := 365 * 24 * time.Hour
	var pinned []string
	for seg := 0; seg < 6; seg++ { // one long-delayed job in each of ~6 segments
		r, err := b.Put(ctx, "default", "slow", engine.PutRequest{Payload: []byte(fmt.Sprint("pinned ", seg)), Delay: &year})
		if err != nil {
			t.Fatal(err)
		}
		pinned = append(pinned, r.ID)
		consumed(t, b, 40)
	}
	// wait for a snapshot covering the pinned segments, then count
	deadline := time.Now().Add(10 * time.Second)
	for obs.n.Load() == 0 && time.Now().Before(deadline) {
		b.Peek(ctx, "default", "slow", pinned[0])
		time.Sleep(5 * time.Millisecond)
	}
	before := obs.n.Load()
	segs := len(b.log.Segments())
	for len(b.log.Segments()) > 3 && time.Now().Before(deadline) {
		b.Peek(ctx, "default", "slow", pinned[0])
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(b.log.Segments()); n > 3 {
		t.Fatalf("%d segments left of %d: the pinned ones were not dropped", n, segs)
	}
	if extra := obs.n.Load() - before; extra > 1 {
		t.Fatalf("compaction wrote %d snapshots; want at most 1 (no snapshot per emptied segment)", extra)
	}
	for i, id := range pinned {
		j, err := b.Peek(ctx, "default", "slow", id)
		if err != nil || string(j.Data) != fmt.Sprint("pinned ", i) {
			t.Fatalf("pinned job %d after compaction: %v %q", i, err, j.Data)
		}
	}
}

// snapRunningLog records SnapshotRunning calls in order.
type snapRunningLog struct {
	nopObserver
	mu    sync.Mutex
	calls []bool
	ended int
}

func (l *snapRunningLog) SnapshotRunning(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, on)
}

func (l *snapRunningLog) Snapshot(time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended++
}

// The running flag (chronoq_snapshot_running) must go up when a snapshot
// begins and down when it is written, so a scrape never shows a quiet node
// as snapshotting or the other way round.
func TestSnapshotRunningBracketsEachSnapshot(t *testing.T) {
	obs := &snapRunningLog{}
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), "default", "q", engine.PutRequest{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // writes the final snapshot
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.ended == 0 {
		t.Fatal("no snapshot was written on close")
	}
	if len(obs.calls) != 2*obs.ended {
		t.Fatalf("SnapshotRunning calls %v for %d snapshots; want one true and one false each", obs.calls, obs.ended)
	}
	for i, on := range obs.calls {
		if on != (i%2 == 0) {
			t.Fatalf("SnapshotRunning calls %v: want true, false alternating", obs.calls)
		}
	}
}
