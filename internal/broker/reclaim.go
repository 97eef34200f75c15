package broker

import (
	"os"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Files the data no longer needs (old log segments, pruned snapshots) are
// removed at a pace, not as soon as they may go. On a filesystem mounted
// with online discard, freeing blocks makes the log's fdatasyncs wait
// while the device discards them: ~10 ms per 64 MiB segment here, 200 ms
// for a 700 MB snapshot. Compaction after a far drain empties a segment
// every ~0.4 s, and removing each at once kept activation lateness p99 at
// ~20 ms while it ran (docs/benchmarks.md, "Log compaction and activation
// lateness", "Removals at a pace"). Spread out, the same stalls touch a
// small enough share of requests to leave the p99 alone. RocksDB's
// SstFileManager rate-limits deletions for the same reason.
//
// The pace must never let removals fall behind the log for good, so
// credit accrues at the configured rate or at twice the rate the log is
// being written, whichever is more, and while the filesystem has less
// than a tenth of its size free (or its space cannot be read) files go at
// once.

// defaultReclaimRate is the removal pace when Options.ReclaimRate is 0:
// one 64 MiB segment every two seconds.
const defaultReclaimRate = 32 << 20

// reclaimBurst is the credit an idle pacer builds up: one default-size
// log segment goes at once after a quiet spell.
const reclaimBurst = 64 << 20

// reclaimPacer decides when the next file may go. It holds no clock: the
// caller passes the time and the log's written byte count.
type reclaimPacer struct {
	rate    float64 // bytes a second, > 0
	burst   float64 // most credit an idle pacer keeps (reclaimBurst)
	credit  float64 // bytes that may be removed now; negative: a debt
	at      time.Time
	written int64 // the log's BytesWritten at `at`
}

// wait brings the credit up to now and answers how long to wait before a
// file of size bytes may go; 0 means now, and the file's size is charged.
// A file larger than the burst needs a full credit and leaves a debt, so
// the files after it wait for as long as its own discard kept the disk
// busy. With low set the file goes at once and costs nothing.
func (p *reclaimPacer) wait(now time.Time, written, size int64, low bool) time.Duration {
	if p.at.IsZero() {
		p.credit = p.burst
	} else if dt := now.Sub(p.at).Seconds(); dt > 0 {
		p.credit += max(p.rate*dt, 2*float64(written-p.written))
		p.credit = min(p.credit, p.burst)
	}
	p.at, p.written = now, written
	if low || size <= 0 {
		return 0
	}
	need := min(float64(size), p.burst)
	if p.credit >= need {
		p.credit -= float64(size)
		return 0
	}
	return time.Duration((need - p.credit) / p.rate * float64(time.Second))
}

// spaceLow reports whether the data directory's filesystem has less than
// a tenth of its size free, or cannot say.
func spaceLow(dir string) bool {
	free, size, err := datadir.Space(dir)
	return err != nil || free < size/10
}

// awaitReclaim blocks until a file of size bytes may be removed, checking
// again at least every second (the log's write rate and the free space
// change meanwhile). It answers false when the broker stops first: what
// is left stays on disk, and the next start removes it.
func (b *Broker) awaitReclaim(size int64) bool {
	p := &b.snap.pacer
	if p.rate <= 0 {
		return true
	}
	for {
		d := p.wait(time.Now(), b.log.BytesWritten(), size, spaceLow(b.opts.Dir))
		if d <= 0 {
			return true
		}
		if !pause(min(d, time.Second), b.stop) {
			return false
		}
	}
}

// fileSize is a file's size, 0 if it cannot be read (it is then removed
// without waiting, as a missing file costs no discard).
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
