package broker

import (
	"errors"
	"time"

	"github.com/chronoq/chronoq/internal/wal"
)

// The scrub checks, in the background after start, the log segments that
// lie before the snapshot position: recovery does not read them (their
// records are in the snapshot; reading and checking all of them took 12.6
// s of a 56 s restart at 100 M jobs, docs/benchmarks.md), but live jobs'
// payloads still live there. It reads one segment at a time through
// wal.Log.CheckSegment, no faster than Options.ScrubRate, off the loop.
// Damage it finds is handled like damage found by a read: logged,
// counted (metric event scrub_damaged_range), and the jobs whose payloads
// or results lie in it are dead-lettered through the loop (onCheckDamage).
// Until the scrub reaches a segment, the first payload read from it runs
// the same check, and every read checks its own frame anyway, so no
// damaged byte is served either way.

// defaultScrubRate is the scrub's read rate when Options.ScrubRate is 0:
// a fraction of a disk's sequential rate (~570 MB/s uncached on the
// benchmark machine), so that serving keeps most of it.
const defaultScrubRate = 64 << 20

type scrubber struct {
	stop chan struct{}
	done chan struct{}
}

func (b *Broker) startScrub() {
	segs := b.log.Unchecked()
	rate := b.opts.ScrubRate
	if rate == 0 {
		rate = defaultScrubRate
	}
	if len(segs) == 0 || rate < 0 {
		return
	}
	b.scrub = scrubber{stop: make(chan struct{}), done: make(chan struct{})}
	go b.runScrub(segs, rate)
}

func (b *Broker) stopScrub() {
	if b.scrub.stop == nil {
		return
	}
	close(b.scrub.stop)
	<-b.scrub.done
}

func (b *Broker) runScrub(segs []uint32, rate int64) {
	defer close(b.scrub.done)
	began := time.Now()
	var read int64
	checked := 0
	for _, num := range segs {
		select {
		case <-b.scrub.stop:
			return
		default:
		}
		t0 := time.Now()
		n, err := b.log.CheckSegment(num)
		if err != nil {
			if errors.Is(err, wal.ErrClosed) {
				return
			}
			// Not damage (that is reported through onCheckDamage) but a
			// failed read: the segment stays unchecked, and the first
			// payload read from it tries again.
			b.lg.Warn("log scrub: could not check a segment; a read from it will retry", "segment", num, "err", err)
			continue
		}
		read += n
		checked++
		// Sleep off what reading n bytes at rate would have taken.
		if wait := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(t0); wait > 0 && !pause(wait, b.scrub.stop) {
			return
		}
	}
	b.lg.Info("log scrub complete: the segments before the snapshot were checked",
		"segments", checked, "bytes", read, "took", time.Since(began).Round(time.Millisecond).String())
}

// onCheckDamage is the log's OnCheckDamage: the deferred check of a
// segment before the snapshot (the scrub, or the first payload read from
// it) found damaged ranges. It may run on any goroutine, the loop's
// included (compaction reads there), so the dead-lettering is queued.
func (b *Broker) onCheckDamage(ranges []wal.DamagedRange) {
	b.observeDamage("scrub_damaged_range", len(ranges))
	for _, d := range ranges {
		b.lg.Error("damaged log data found by the check of a segment before the snapshot; dead-lettering the jobs whose payloads or results are in it",
			"range", d.String())
		b.retireLater(d.Segment, d.From, d.To, "payload or result lost: damaged log data in "+d.String(), d.File, int64(d.From))
	}
}
