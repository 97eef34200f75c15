package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// commitLog records the entries of every commit.
type commitLog struct {
	nopObserver
	mu      sync.Mutex
	entries []int
}

func (c *commitLog) Commit(entries, _ int, _ time.Duration) {
	c.mu.Lock()
	c.entries = append(c.entries, entries)
	c.mu.Unlock()
}

// The loop leaves requests that arrive while an fdatasync is in flight
// queued and runs them all in the turn after it, with one write, instead
// of running and writing each as it arrives: their answers wait for the
// next sync in either case. Every answer still comes after the sync that
// covers it.
func TestRequestsWaitOutTheSyncInFlight(t *testing.T) {
	obs := &commitLog{}
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, Observer: obs,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Put(ctx, "default", "w", engine.PutRequest{Payload: []byte("queue exists")}); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	obs.entries = nil
	obs.mu.Unlock()

	held := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	defer unhold() // before Close, on failure too
	var first atomic.Bool
	first.Store(true)
	hook := func() {
		if first.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
	}
	b.beforeSync.Store(&hook)

	const n = 20
	errs := make(chan error, n+1)
	var acked atomic.Int32
	put := func(i int) {
		_, err := b.Put(ctx, "default", "w", engine.PutRequest{Payload: []byte(fmt.Sprint(i))})
		acked.Add(1)
		errs <- err
	}
	go put(0)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first put's sync never started")
	}
	for i := 1; i <= n; i++ {
		go put(i)
	}
	// The loop holds one of them while it waits for the sync; the rest
	// stay queued.
	for deadline := time.Now().Add(10 * time.Second); len(b.reqs) < n-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d puts queued while a sync was in flight: the loop ran the others before it ended", len(b.reqs), n)
		}
	}
	if a := acked.Load(); a != 0 {
		t.Fatalf("%d puts answered before their sync", a)
	}
	unhold()
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []int{1, n}; !slices.Equal(obs.entries, want) {
		t.Fatalf("commits wrote %v entries, want %v: one turn for the puts that waited", obs.entries, want)
	}
}
