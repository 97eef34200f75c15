package broker

import (
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// snapshotter writes fuzzy snapshots a chunk per loop turn while writes go
// on (engine/snapshot.go explains why that is sound), then lets the log
// drop segments the snapshot covers that hold no live payload.
type snapshotter struct {
	iter    *engine.SnapshotIter
	w       *snapshot.Writer
	pos     wal.Position
	last    time.Time
	lastErr time.Time
	sealing chan error // the background commit of a finished snapshot
	started time.Time
	buf     []byte // the item being written (Writer.Add copies it)

	// Online backups (backup.go): want waits for the next snapshot to be
	// complete, taking for the commit of the one just complete at cut.
	want, taking []backupWaiter
	// far: the bucket files the running snapshot's manifest lists, which
	// a backup taken from it copies
	far     []farListed
	cut     wal.Position
	cutJobs int
	bk      backups
}

// A running snapshot gets a time budget per loop turn, in chunks, so a
// server holding millions of jobs spreads the export over many turns and
// requests never wait behind more than about the budget.
// (Variables so tests can spread a small snapshot over many turns.)
var (
	snapChunk      = 1024
	snapTurnBudget = 2 * time.Millisecond
)

func (s *snapshotter) init(b *Broker, _ wal.RecoveryReport) { s.last = b.now() }

func (s *snapshotter) due(b *Broker, now time.Time) bool {
	if s.iter != nil || s.sealing != nil || b.failed.Load() != nil {
		return false
	}
	if len(s.want) > 0 {
		return true
	}
	if now.Sub(s.lastErr) < time.Minute {
		return false
	}
	w := b.sink.written
	return w >= b.opts.SnapshotBytes || (w > 0 && now.Sub(s.last) >= b.opts.SnapshotInterval)
}

// step advances a running snapshot by one chunk, or starts one when due.
func (s *snapshotter) step(b *Broker) {
	now := b.now()
	if s.sealing != nil {
		select {
		case err := <-s.sealing:
			s.sealing = nil
			s.finish(b, err)
		default:
		}
		return
	}
	if s.iter == nil {
		if !s.due(b, now) {
			return
		}
		if err := s.begin(b); err != nil {
			s.lastErr = now
			b.lg.Error("snapshot: cannot start", "err", err)
			s.failBackups(err)
			return
		}
	}
	start := time.Now()
	for chunk := 0; chunk == 0 || time.Since(start) < snapTurnBudget; chunk++ {
		item, ok := s.iter.NextItem(s.buf[:0], snapChunk)
		s.buf = item
		if !ok {
			s.cut, s.cutJobs = b.log.End(), b.eng.Jobs()
			s.taking, s.want = append(s.taking, s.want...), nil
			w := s.w
			s.iter, s.w = nil, nil
			s.sealing = make(chan error, 1)
			go func() { _, err := w.Commit(); s.sealing <- err }()
			return
		}
		if err := s.w.Add(item); err != nil {
			s.abort(b, err)
			return
		}
	}
}

func (s *snapshotter) begin(b *Broker) error {
	// The snapshot's replay position must lie within durable log: wait for
	// the pipelined syncs in flight.
	b.syncBarrier()
	s.pos = b.log.End()
	w, err := snapshot.Create(b.snapDir(), s.pos)
	if err != nil {
		return err
	}
	if b.far.on { // the far store's bucket list and sizes come first (far.go)
		m, err := b.far.manifest()
		if err == nil {
			s.far, err = decodeFarManifest(m)
		}
		if err == nil {
			err = w.Add(m)
		}
		if err != nil {
			w.Abort()
			return err
		}
	}
	s.w, s.iter, s.started = w, b.eng.Snapshot(), b.now()
	b.sink.written = 0
	b.opts.Observer.SnapshotRunning(true)
	return nil
}

func (s *snapshotter) abort(b *Broker, err error) {
	b.lg.Error("snapshot failed", "err", err)
	b.opts.Observer.SnapshotRunning(false)
	s.w.Abort()
	s.iter, s.w = nil, nil
	s.lastErr = b.now()
	s.failBackups(err)
}

func (s *snapshotter) finish(b *Broker, err error) {
	b.opts.Observer.SnapshotRunning(false)
	s.backupsTaken(b, err)
	if err != nil {
		b.lg.Error("snapshot: commit failed", "err", err)
		s.lastErr = b.now()
		return
	}
	s.last = b.now()
	b.opts.Observer.Snapshot(b.now().Sub(s.started))
	b.lg.Info("snapshot written", "pos", s.pos.String(), "jobs", b.eng.Jobs(), "took", b.now().Sub(s.started).Round(time.Millisecond).String())
	if err := snapshot.Prune(b.snapDir(), 2); err != nil {
		b.lg.Warn("snapshot: prune failed", "err", err)
	}
	s.dropSegments(b)
	b.far.snapshotDone()
}

// dropSegments removes the longest run of oldest segments that the oldest
// kept snapshot covers and that no live job's payload lives in.
func (s *snapshotter) dropSegments(b *Broker) {
	snaps, err := snapshot.List(b.snapDir())
	if err != nil || len(snaps) == 0 {
		return
	}
	cover := snaps[len(snaps)-1].Pos.Segment
	if pin, ok := s.bk.minPin(); ok && pin < cover {
		cover = pin
	}
	live := b.eng.LiveBytes()
	upto := uint32(0)
	for _, seg := range b.log.Segments() {
		if seg.Number >= cover || live[seg.Number] > 0 || b.far.pinned(seg.Number) {
			break
		}
		upto = seg.Number + 1
	}
	if upto > 0 {
		if err := b.log.RemoveSegmentsBefore(upto); err != nil {
			b.lg.Warn("log: removing old segments failed", "err", err)
		}
	}
}

// final writes a complete snapshot synchronously (clean shutdown).
func (s *snapshotter) final(b *Broker, _ time.Time) error {
	s.failBackups(errClosed)
	if s.sealing != nil {
		s.backupsTaken(b, errClosed) // no copy of a log that is closing
		s.finish(b, <-s.sealing)
		s.sealing = nil
	}
	if s.iter == nil {
		if b.sink.written == 0 && !s.last.IsZero() && len(mustList(b)) > 0 {
			return nil // nothing changed since the last snapshot
		}
		if err := s.begin(b); err != nil {
			return err
		}
	}
	for {
		item, ok := s.iter.NextItem(s.buf[:0], snapChunk)
		s.buf = item
		if !ok {
			break
		}
		if err := s.w.Add(item); err != nil {
			b.opts.Observer.SnapshotRunning(false)
			s.w.Abort()
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	_, err := s.w.Commit()
	s.iter, s.w = nil, nil
	s.finish(b, err)
	return err
}

func mustList(b *Broker) []snapshot.Info {
	l, _ := snapshot.List(b.snapDir())
	return l
}

// nextDue tells the loop when to wake for snapshot work.
func (s *snapshotter) nextDue(now time.Time) (time.Time, bool) {
	if s.iter != nil || s.sealing != nil {
		return now.Add(time.Millisecond), true
	}
	return time.Time{}, false
}

// idle reports that no snapshot is being written.
func (s *snapshotter) idle() bool { return s.iter == nil && s.sealing == nil }
