package broker

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// While the disk is too full for the next segment, readiness says so (the
// HTTP layer answers /readyz 503 with this reason); once the free space
// would hold it, readiness and writes come back without a restart.
func TestReadinessFollowsDiskFull(t *testing.T) {
	var full atomic.Bool
	var free atomic.Int64
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, WAL: wal.Options{SegmentSize: 4096, Logger: quiet,
		Preallocate: func(f *os.File, size int64) error {
			if full.Load() {
				return syscall.ENOSPC
			}
			return nil
		},
		FreeSpace: func(string) (int64, error) { return free.Load(), nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	full.Store(true)
	var refused error
	for i := 0; i < 100 && refused == nil; i++ {
		_, refused = b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(strings.Repeat("x", 500))})
	}
	if refused == nil || !strings.Contains(refused.Error(), "disk is full") {
		t.Fatalf("puts on a full disk: %v", refused)
	}
	err = b.Ready()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Ready on a full disk: %v", err)
	}
	full.Store(false)
	free.Store(1 << 20)
	// NoSpace looks at the free space at most once a second.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for b.Ready() != nil {
		if !waitABit(wctx) {
			t.Fatalf("still not ready after space came back: %v", b.Ready())
		}
	}
	if _, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("after")}); err != nil {
		t.Fatalf("put after space came back: %v", err)
	}
}

func waitABit(ctx context.Context) bool {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
