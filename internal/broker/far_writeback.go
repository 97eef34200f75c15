package broker

import (
	"time"

	"github.com/chronoq/chronoq/internal/farstore"
)

// farWriteback hands the bytes appended to bucket files to the disk off the
// loop (farstore.WriteBack, at most a chunk in the disk's queue at a
// time), in epochs of farWritebackAge: at the end of an epoch, each bucket
// appended to in the epoch before hands over its whole pages not yet
// handed over, so bytes go to the disk 10–20 s after they were written.
//
// Between snapshots nothing else writes the buckets back but the kernel's
// flusher, which writes what is older than 30 s at once: hundreds of MB
// after a bulk drain, and the log's fdatasyncs waited up to ~100–170 ms
// behind them. Handing each append over as it came (a few KB to each of
// thousands of buckets) wrote the same bytes in many small writes, a page
// often twice, and the log's p99 doubled instead; waiting an epoch lets a
// bucket's appends gather into runs of pages as the flusher's do
// (docs/benchmarks.md "Far buckets written back as they grow").
//
// It makes nothing durable: the snapshot's syncs still do (manifest), and
// find little left to write. Time here paces I/O only; the engine never
// sees it.
type farWriteback struct {
	listed []*farBucket // appended to in this epoch
	prev   []*farBucket // in the one before
	epoch  uint32
	began  time.Time
	run    chore
}

// farWritebackAge is an epoch's length. Below the kernel's 30 s
// (vm.dirty_expire_centisecs), so the flusher finds nothing old.
var farWritebackAge = 10 * time.Second

// farPage is the page size write-back works in: a bucket's partial last
// page waits for the next epoch, not to be written twice.
const farPage = 4096

// farWriteBack is farstore.WriteBack (a variable so a test can watch it).
var farWriteBack = farstore.WriteBack

// farBucketWB is a bucket's write-back state.
type farBucketWB struct {
	handed int64  // its file was handed over up to here (a page boundary)
	gen    uint32 // of this generation of the file
	epoch  uint32 // listed in this epoch (+1)
}

// appended notes that bk's file was appended to from offset from. The
// epoch ends in step, which the loop calls at the end of every turn.
func (w *farWriteback) appended(bk *farBucket, from int64) {
	if gen := bk.file.Gen(); gen != bk.wb.gen || from < bk.wb.handed {
		// a rewritten file (synced whole when it was made) or one cut
		// back: hand over from this append on
		bk.wb.gen, bk.wb.handed = gen, from&^(farPage-1)
	}
	if bk.wb.epoch != w.epoch+1 {
		bk.wb.epoch = w.epoch + 1
		w.listed = append(w.listed, bk)
	}
}

// step ends the epoch when it is over and the last hand-over is written.
// Called at the end of every loop turn while buckets are listed
// (farStore.handOut).
func (w *farWriteback) step(dir string, now time.Time) {
	if w.began.IsZero() {
		w.began = now
	}
	if now.Sub(w.began) < farWritebackAge || w.run.running() {
		return
	}
	var ranges []farstore.Range
	for _, bk := range w.prev {
		if bk.file == nil || bk.file.Gen() != bk.wb.gen {
			continue
		}
		if to := bk.file.Size() &^ (farPage - 1); to > bk.wb.handed {
			ranges = append(ranges, farstore.Range{Start: bk.start, Gen: bk.wb.gen, From: bk.wb.handed, To: to})
			bk.wb.handed = to
		}
	}
	clear(w.prev)
	w.prev, w.listed = w.listed, w.prev[:0]
	w.epoch++
	w.began = now
	if len(ranges) > 0 {
		w.run.start(func() { farWriteBack(dir, ranges) })
	}
}

// pending reports whether buckets wait for an epoch's end.
func (w *farWriteback) pending() bool { return len(w.listed)+len(w.prev) > 0 }

// wait returns once the last hand-over is written.
func (w *farWriteback) wait() { w.run.wait() }
