package broker

import (
	"cmp"
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// compactor frees the oldest log segments that live jobs still pin. The
// log can only drop a prefix of segments, so one job delayed for a year in
// the oldest segment would keep every later segment too; the compactor
// re-logs such payloads (engine.FindPinned, engine.Relocate) a bounded
// amount per loop turn, after which the segment can go.
//
// It also shrinks the job table after a peak (engine.Shrink), between
// segments: a relocation walks the table by slot, which moves would
// confuse (harmlessly, but it would miss jobs and have to start over).
type compactor struct {
	seg uint32 // segment being emptied, 0 = none
	// Emptying it: first the job table is scanned (cursor) for the blobs
	// in it (engine.FindPinned), which are then sorted by offset and
	// re-logged in that order (todo[at:]).
	cursor   uint32
	scanned  bool
	todo     []engine.Pinned
	at       int
	rd       *wal.FrameReader // keeps the last frame read, across turns
	nextPick time.Time        // picking reads the snapshot directory: not every turn
	emptied  bool             // a segment was emptied: drop it once the moves are durable
	// a shrink of the job table under way: when it began, the table's size
	shrinkStart   time.Time
	shrinkFrom    int64
	shrinkLongest time.Duration // the longest turn's share of it
	// the counts per turn (compactBudget)
	slots, bytes, moves int
	// reading the segment being emptied through, off the loop
	// (wal.Log.Warm)
	warming chore
}

// warm reads segment seg through in a goroutine (wal.Log.Warm) so that
// the relocation turns that follow find its frames in the page cache
// instead of waiting for the disk on the loop.
func (c *compactor) warm(b *Broker, seg uint32) {
	c.warming.start(func() {
		if _, err := b.log.Warm(seg); err != nil && !errors.Is(err, wal.ErrClosed) {
			// not fatal: the relocation reads the segment itself
			b.lg.Warn("compaction: could not read a segment ahead", "segment", seg, "err", err)
		}
	})
}

// paced returns the next turn's count: n halved after a turn that took
// longer than compactBudget, doubled after one under half of it, within
// [lo, hi]; a count not yet set starts at hi.
func paced(n, lo, hi int, took time.Duration) int {
	switch {
	case n <= 0:
		return hi
	case took > compactBudget:
		return max(n/2, lo)
	case took > 0 && took < compactBudget/2:
		return min(n*2, hi)
	}
	return n
}

// compactBudget is the wall time a turn's scan or relocation, or a turn's
// share of a shrink, aims at: a job that comes due meanwhile waits for it
// (activation lateness). The counts per turn (slots scanned, payload bytes
// re-logged, moves) adapt (paced) between their minimum and maximum: a
// shrink's moves cost more with the cache cold, a relocation more where
// its frames are not in the page cache.
var compactBudget = time.Millisecond

const (
	// scanning costs ~20–50 ns a slot
	compactSlotsPerTurn = 32768
	compactSlotsMin     = 1024
	// Re-logging costs ~3 µs a job besides reading it: 16 KiB of 100-byte
	// payloads is ~0.5 ms. Turns of 128 KiB took 4–7 ms and held lateness
	// p99 at 16–22 ms while compaction ran (docs/benchmarks.md, "Log
	// compaction and activation lateness").
	compactBytesPerTurn = 16 << 10
	compactBytesMin     = 4 << 10
	// shrinkMovesPerTurn bounds a turn's job moves (~0.2 µs each,
	// BenchmarkShrinkAfterFarDrain in internal/engine)
	shrinkMovesPerTurn = 4096
	shrinkMovesMin     = 256
	// shrinkReturnBytes: a shrink freeing this much returns it to the
	// system at once
	shrinkReturnBytes = 64 << 20
)

// step runs on the loop between batches.
func (c *compactor) step(b *Broker) {
	if b.failed.Load() != nil {
		return
	}
	if c.emptied && b.snap.dropSegments(b) {
		// The moved payloads were written at the end of the previous turn;
		// once they are durable (dropSegments syncs first) the emptied
		// segment can go. Only the segment's own records pinned it: a
		// snapshot already covers it (pick), so no new snapshot is needed —
		// asking for one per emptied segment made a log full of long-lived
		// jobs write full snapshots back to back, stalling the loop.
		c.emptied = false
	}
	if c.seg == 0 && c.shrink(b) {
		return
	}
	if c.seg == 0 {
		now := b.now()
		if now.Before(c.nextPick) {
			return
		}
		c.nextPick = now.Add(time.Second)
		c.seg = c.pick(b)
		c.cursor, c.scanned, c.todo, c.at = 0, false, c.todo[:0], 0
		if c.seg == 0 {
			return
		}
		c.rd = b.log.NewFrameReader()
		c.warm(b, c.seg)
		// a new segment starts small: the counts the last one ended
		// with (the table's tail, often no work) say nothing about it
		c.slots, c.bytes = compactSlotsMin, compactBytesMin
	}
	if !c.scanned {
		// the scan reads no segment: it runs while the warming does
		start := time.Now()
		c.slots = paced(c.slots, compactSlotsMin, compactSlotsPerTurn, 0)
		var done bool
		c.cursor, done, c.todo = b.eng.FindPinned(c.seg, c.cursor, c.slots, c.todo)
		c.slots = paced(c.slots, compactSlotsMin, compactSlotsPerTurn, time.Since(start))
		if done {
			slices.SortFunc(c.todo, func(x, y engine.Pinned) int { return cmp.Compare(x.Off, y.Off) })
			c.scanned = true
		}
		return
	}
	if c.warming.running() {
		return
	}
	start := time.Now()
	c.bytes = paced(c.bytes, compactBytesMin, compactBytesPerTurn, 0)
	n, err := b.eng.Relocate(b.now(), c.seg, c.todo[c.at:], c.bytes, func(ref engine.BlobRef) ([]byte, error) {
		return c.rd.ReadAt(ref.Segment, ref.Offset, ref.Len)
	})
	c.bytes = paced(c.bytes, compactBytesMin, compactBytesPerTurn, time.Since(start))
	if err != nil {
		b.lg.Warn("compaction: relocating payloads failed; will retry later", "segment", c.seg, "err", err)
		c.seg, c.rd = 0, nil
		return
	}
	if c.at += n; c.at == len(c.todo) {
		b.lg.Info("compaction: segment emptied of live payloads", "segment", c.seg, "live_left", b.eng.LiveBytes()[c.seg])
		c.seg, c.rd = 0, nil
		c.emptied = true
		c.nextPick = time.Time{} // the next pinned segment may go at once
		if cap(c.todo) > 1<<16 {
			c.todo = nil // a dense segment's list: not kept for the next
		}
	}
}

// relogBytesPerBlob is about what re-logging one payload writes besides
// the payload: the job's whole record (ids, times, key, tags) in the new
// segment. Counting it is what keeps a log full of long-lived jobs with
// small payloads from being rewritten again and again: their payloads
// alone are half a segment or less, so every segment, the rewritten ones
// included, looked worth emptying.
const relogBytesPerBlob = 128

// pick chooses the oldest segment that a snapshot already covers but live
// payloads still pin, when compacting it is worth it: what re-logging its
// live payloads writes is less than half the segment, or less than the
// space it pins behind it (what the later segments hold beyond what
// re-logging their live payloads would write).
func (c *compactor) pick(b *Broker) uint32 {
	snaps, err := snapshot.List(b.snapDir())
	if err != nil || len(snaps) == 0 {
		return 0
	}
	cover := snaps[len(snaps)-1].Pos.Segment
	live, blobs := b.eng.LiveBytes(), b.eng.LiveBlobs()
	segs := b.log.Segments()
	for i, s := range segs {
		if s.Number >= cover {
			return 0
		}
		if live[s.Number] == 0 {
			continue
		}
		cost := func(n uint32) int64 { return live[n] + blobs[n]*relogBytesPerBlob }
		var behind int64
		for _, o := range segs[i+1:] {
			if o.Number >= cover {
				break
			}
			behind += max(0, o.Size-cost(o.Number))
		}
		if c := cost(s.Number); c*2 < s.Size || behind > c {
			return s.Number
		}
		return 0
	}
	return 0
}

func (c *compactor) busy() bool { return c.seg != 0 || c.shrinkFrom != 0 }

// shrink moves a turn's worth of jobs towards a smaller job table and
// reports whether a shrink is under way.
func (c *compactor) shrink(b *Broker) bool {
	if c.shrinkFrom == 0 && !b.eng.ShrinkDue() {
		return false // every turn asks: keep the clock and the table out of it
	}
	from := b.eng.SlabBytes()
	start := time.Now()
	c.moves = paced(c.moves, shrinkMovesMin, shrinkMovesPerTurn, 0)
	moved := b.eng.Shrink(c.moves)
	step := time.Since(start)
	if moved > 0 {
		c.moves = paced(c.moves, shrinkMovesMin, shrinkMovesPerTurn, step)
	}
	if c.shrinkFrom == 0 && (moved > 0 || b.eng.Shrinking()) {
		c.shrinkFrom, c.shrinkStart, c.shrinkLongest = from, b.now(), 0
		b.lg.Info("memory: shrinking the job table", "bytes", from, "jobs", b.eng.Jobs())
	}
	c.shrinkLongest = max(c.shrinkLongest, step)
	if b.eng.Shrinking() {
		return true
	}
	if c.shrinkFrom != 0 {
		to := b.eng.SlabBytes()
		took := b.now().Sub(c.shrinkStart).Round(time.Millisecond).String()
		if to < c.shrinkFrom {
			b.lg.Info("memory: job table shrunk", "from_bytes", c.shrinkFrom, "to_bytes", to, "jobs", b.eng.Jobs(), "took", took,
				"longest_turn", c.shrinkLongest.Round(10*time.Microsecond).String())
			if c.shrinkFrom-to >= shrinkReturnBytes {
				// An idle server would not collect the freed chunks for
				// minutes (nothing allocates), nor give the pages back.
				// Off the loop: the call waits for a whole collection.
				go debug.FreeOSMemory()
			}
		} else {
			b.lg.Info("memory: job table shrink stopped: the jobs grew back", "bytes", to, "jobs", b.eng.Jobs(), "took", took)
		}
		c.shrinkFrom = 0
	}
	return false
}

// JobTable describes the job table's memory: its records' bytes
// (engine.SlabBytes), and whether it is shrinking or due to.
type JobTable struct {
	Bytes     int64
	Shrinking bool
}

// JobTable reports the job table's memory.
func (b *Broker) JobTable(ctx context.Context) (JobTable, error) {
	return call(b, ctx, func(time.Time) (JobTable, error) {
		return JobTable{Bytes: b.eng.SlabBytes(), Shrinking: b.eng.ShrinkDue()}, nil
	})
}
