package snapshot

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/chronoq/chronoq/internal/datadir"
)

// A snapshot is written on the broker's loop into the page cache. Left
// there, gigabytes of it went to the disk in bursts — when the kernel's
// dirty limits were reached and at the final fsync — and the log's
// fdatasyncs queued behind them (put p99 up to ~100 ms while a 2.3 GB
// snapshot was written, docs/benchmarks.md "Snapshots written at the
// disk's pace").
// So a writebacker goroutine hands the file to the kernel's writeback
// writebackChunk at a time as it is written, waiting for each chunk before
// it hands over the next (datadir.WriteBack): at most two chunks are
// ahead of the log in the disk's queue. The waiting is this goroutine's,
// never the loop's. RocksDB's bytes_per_sync does the same for its files.
const writebackChunk = 4 << 20

type writebacker struct {
	f    *os.File
	wake chan struct{} // cap 1: "written moved"
	done chan struct{}
	once sync.Once

	written atomic.Int64 // bytes the writer has written so far
	woken   int64        // the writer's: written when it last woke the goroutine

	handed int64 // bytes handed to writeback, once stop returned
}

func startWriteback(f *os.File) *writebacker {
	b := &writebacker{f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go b.run()
	return b
}

// advance tells the goroutine that n bytes of the file are written,
// waking it only when a whole chunk more is there. It never waits.
func (b *writebacker) advance(n int64) {
	b.written.Store(n)
	if n/writebackChunk == b.woken/writebackChunk {
		return
	}
	b.woken = n
	select {
	case b.wake <- struct{}{}:
	default: // a wake is pending; the goroutine reads written after it
	}
}

// stop ends the goroutine once it has handed over the whole chunks
// written; the file must stay open until then. Safe to call twice.
func (b *writebacker) stop() {
	b.once.Do(func() {
		close(b.wake)
		<-b.done
	})
}

func (b *writebacker) run() {
	defer close(b.done)
	var handed, prev int64 // handed over up to; where the last chunk starts
	for range b.wake {
		written := b.written.Load()
		for written-handed >= writebackChunk {
			datadir.WriteBack(b.f, prev, handed-prev, handed, writebackChunk)
			prev, handed = handed, handed+writebackChunk
		}
	}
	b.handed = handed
}
