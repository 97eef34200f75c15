package bench

import (
	"context"
	"testing"
)

func TestBacklogBoundsAndCloses(t *testing.T) {
	ctx := context.Background()
	b := newBacklog(2)
	if !b.acquire(ctx) || !b.acquire(ctx) {
		t.Fatal("a backlog of 2 refused one of the first two puts")
	}
	if len(b.slots) != 2 {
		t.Fatalf("%d slots taken, want 2", len(b.slots))
	}
	got := make(chan bool)
	go func() { got <- b.acquire(ctx) }()
	b.release() // a take makes room for the waiting put
	if !<-got {
		t.Fatal("the put waiting for room did not get it after a take")
	}
	go func() { got <- b.acquire(ctx) }()
	b.close() // the run is over: the waiting put gives up
	if <-got {
		t.Fatal("a put waiting for room went ahead after the run ended")
	}
	if b.acquire(ctx) {
		t.Fatal("a put after the run ended got room")
	}
	b.close() // twice is fine
	// a release without a slot taken (a job no put here made) is ignored
	e := newBacklog(1)
	e.release()
	if !e.acquire(ctx) || len(e.slots) != 1 {
		t.Fatal("a stray release changed the backlog")
	}

	var unpaced *backlog = newBacklog(0)
	if unpaced != nil || !unpaced.acquire(ctx) {
		t.Fatal("an unpaced run waited for room")
	}
	unpaced.release()
	unpaced.close()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if unpaced.acquire(cctx) || b.acquire(cctx) {
		t.Fatal("acquire went ahead after the context ended")
	}
}

func TestConfigBacklog(t *testing.T) {
	for _, c := range []struct{ conns, backlog, want int }{
		{64, 0, 128}, {1000, 0, 2000}, {64, 10, 10}, {64, -1, 0},
	} {
		cfg := Config{Conns: c.conns, Backlog: c.backlog}
		if got := cfg.backlog(); got != c.want {
			t.Errorf("conns %d, --backlog %d: bound %d, want %d", c.conns, c.backlog, got, c.want)
		}
	}
}
