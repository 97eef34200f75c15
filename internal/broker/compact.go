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
	next, done, err := b.eng.Relocate(b.now(), c.seg, c.cursor, compactSlotsPerTurn, compactBytesPerTurn, func(ref engine.BlobRef) ([]byte, error) {
		return b.log.ReadAt(ref.Segment, ref.Offset, ref.Len)
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

// pick chooses the oldest segment that a snapshot already covers but live
// payloads still pin, when compacting it is worth it: it is less than half
// live, or the space it pins behind it is larger than what it holds.
func (c *compactor) pick(b *Broker) uint32 {
	snaps, err := snapshot.List(b.snapDir())
	if err != nil || len(snaps) == 0 {
		return 0
	}
	cover := snaps[len(snaps)-1].Pos.Segment
	live := b.eng.LiveBytes()
	segs := b.log.Segments()
	for i, s := range segs {
		if s.Number >= cover {
			return 0
		}
		l := live[s.Number]
		if l == 0 {
			continue
		}
		var behind int64
		for _, o := range segs[i+1:] {
			if o.Number >= cover {
				break
			}
			behind += o.Size - live[o.Number]
		}
		if l*2 < s.Size || behind > l {
			return s.Number
		}
		return 0
	}
	return 0
}

func (c *compactor) busy() bool { return c.seg != 0 }
