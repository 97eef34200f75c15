package broker

import (
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
)

// compactor frees the oldest log segments that live jobs still pin. The
// log can only drop a prefix of segments, so one job delayed for a year in
// the oldest segment would keep every later segment too; the compactor
// re-logs such payloads (engine.Relocate) a bounded amount per loop turn,
// after which the next snapshot lets the segment go.
type compactor struct {
	seg      uint32 // segment being emptied, 0 = none
	cursor   uint32
	nextPick time.Time // picking reads the snapshot directory: not every turn
	emptied  bool      // a segment was emptied: drop it once the moves are durable
}

const (
	compactSlotsPerTurn = 50000
	compactBytesPerTurn = 1 << 20
)

// step runs on the loop between batches.
func (c *compactor) step(b *Broker) {
	if b.failed.Load() != nil {
		return
	}
	if c.emptied {
		// The moved payloads were written at the end of the previous turn;
		// once they are durable the emptied segment can go. Only the
		// segment's own records pinned it: a snapshot already covers it
		// (pick), so no new snapshot is needed — asking for one per
		// emptied segment made a log full of long-lived jobs write full
		// snapshots back to back, stalling the loop.
		c.emptied = false
		if err := b.log.SyncWritten(); err != nil {
			b.fail(err)
			return
		}
		b.snap.dropSegments(b)
	}
	if c.seg == 0 {
		now := b.now()
		if now.Before(c.nextPick) {
			return
		}
		c.nextPick = now.Add(time.Second)
		c.seg = c.pick(b)
		c.cursor = 0
		if c.seg == 0 {
			return
		}
	}
	// Jobs lie in the slab roughly in put order, so one turn's reads walk
	// the frames of batch puts in order: a frame reader checks each once.
	rd := b.log.NewFrameReader()
	next, done, err := b.eng.Relocate(b.now(), c.seg, c.cursor, compactSlotsPerTurn, compactBytesPerTurn, func(ref engine.BlobRef) ([]byte, error) {
		return rd.ReadAt(ref.Segment, ref.Offset, ref.Len)
	})
	if err != nil {
		b.lg.Warn("compaction: relocating payloads failed; will retry later", "segment", c.seg, "err", err)
		c.seg = 0
		return
	}
	c.cursor = next
	if done {
		b.lg.Info("compaction: segment emptied of live payloads", "segment", c.seg, "live_left", b.eng.LiveBytes()[c.seg])
		c.seg = 0
		c.emptied = true
		c.nextPick = time.Time{} // the next pinned segment may go at once
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

func (c *compactor) busy() bool { return c.seg != 0 }
