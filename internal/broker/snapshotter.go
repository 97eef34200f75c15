package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/farstore"
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
	// newest: the position of the newest snapshot on disk. A snapshot
	// at the same position (nothing logged since, only far hand-outs)
	// takes its file's place instead of adding one (snapshotDone).
	newest     wal.Position
	haveNewest bool
	started    time.Time
	buf        []byte // the item being written (Writer.Add copies it)

	// Online backups (backup.go): want waits for the next snapshot to be
	// complete, taking for the commit of the one just complete at cut.
	want, taking []backupWaiter
	// far: the bucket files the running snapshot's manifest lists, which
	// a backup taken from it copies; farSyncs: those to sync before it
	// commits
	far      []farListed
	farSyncs []string
	cut      wal.Position
	cutJobs  int
	bk       backups
	// removing: the background removal of old segments and pruned
	// snapshot files (dropSegments).
	// dropAgain: a removal was due while one ran, and step starts it once
	// that one is over.
	removing  chore
	dropAgain bool
	// goneBelow: the segments numbered below it are being removed, or
	// are gone; backups leave them out
	goneBelow uint32
	// pacer spaces the removals out (reclaim.go); used by the removal
	// goroutine only, one removal at a time
	pacer reclaimPacer
	// retired: pruned snapshot files the next removal deletes
	retired []string
	// taken: the log bytes and far hand-out bytes the running snapshot
	// took over from Broker.unsnapshotted (undo gives them back)
	taken [2]int64
}

// A running snapshot gets a time budget per loop turn, in chunks, so a
// server holding millions of jobs spreads the export over many turns and
// requests never wait behind more than about the budget.
// (Variables so tests can spread a small snapshot over many turns.)
var (
	snapChunk      = 1024
	snapTurnBudget = 2 * time.Millisecond
)

func (s *snapshotter) init(b *Broker, _ wal.RecoveryReport) {
	s.last = b.now()
	s.pacer.burst = reclaimBurst
	switch r := b.opts.ReclaimRate; {
	case r == 0:
		s.pacer.rate = defaultReclaimRate
	case r > 0:
		s.pacer.rate = float64(r)
	}
	if l := mustList(b); len(l) > 0 {
		s.newest, s.haveNewest = l[0].Pos, true // List: newest first
	}
}

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
	// Only log growth counts towards SnapshotBytes: a far drain hands out
	// gigabytes, and a snapshot per GiB of them would pause the hand-outs
	// (never during a walk) for most of the drain.
	return b.sink.written >= b.opts.SnapshotBytes || (b.unsnapshotted() > 0 && now.Sub(s.last) >= b.opts.SnapshotInterval)
}

// step advances a running snapshot by one chunk, or starts one when due.
func (s *snapshotter) step(b *Broker) {
	if s.dropAgain && s.dropSegments(b) {
		s.dropAgain = false
	}
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
		// held far items are written a budget per turn first (far.go:
		// writeHeld), not all at once in the manifest on the loop
		if b.far.prepareSnapshot() {
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
			syncs, dir := s.farSyncs, b.far.dir
			s.farSyncs = nil
			go func() { s.sealing <- s.seal(w, dir, syncs) }()
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
		m, syncs := b.far.manifest()
		s.farSyncs = syncs
		s.far, err = decodeFarManifest(m)
		if err == nil {
			err = w.Add(m)
		}
		if err != nil {
			w.Abort()
			b.far.unsynced()
			s.farSyncs = nil
			return err
		}
	}
	s.w, s.iter, s.started = w, b.eng.Snapshot(), b.now()
	s.taken = [2]int64{b.sink.written, b.far.handedOut}
	b.sink.written, b.far.handedOut = 0, 0
	b.opts.Observer.SnapshotRunning(true)
	return nil
}

// undo is what every snapshot that failed once begun does: the bucket files
// its manifest counted are unsynced again, and the changes it would have
// recorded count as unsnapshotted again (Broker.unsnapshotted), so a clean
// stop does not skip its final snapshot for a state no snapshot holds.
func (s *snapshotter) undo(b *Broker) {
	b.far.unsynced()
	b.sink.written += s.taken[0]
	b.far.handedOut += s.taken[1]
	s.taken = [2]int64{}
}

func (s *snapshotter) abort(b *Broker, err error) {
	b.lg.Error("snapshot failed", "err", err)
	s.undo(b)
	s.farSyncs = nil
	b.opts.Observer.SnapshotRunning(false)
	s.w.Abort()
	s.iter.Close()
	s.iter, s.w = nil, nil
	s.lastErr = b.now()
	s.failBackups(err)
}

func (s *snapshotter) finish(b *Broker, err error) {
	b.opts.Observer.SnapshotRunning(false)
	s.backupsTaken(b, err)
	if err != nil {
		s.undo(b)
		b.lg.Error("snapshot: commit failed", "err", err)
		s.lastErr = b.now()
		return
	}
	s.last, s.taken = b.now(), [2]int64{}
	replaced := s.haveNewest && s.pos == s.newest
	s.newest, s.haveNewest = s.pos, true
	b.opts.Observer.Snapshot(b.now().Sub(s.started))
	b.lg.Info("snapshot written", "pos", s.pos.String(), "jobs", b.eng.Jobs(), "took", b.now().Sub(s.started).Round(time.Millisecond).String())
	retired, err := snapshot.Retire(b.snapDir(), 2)
	if err != nil {
		b.lg.Warn("snapshot: prune failed", "err", err)
	}
	s.retired = append(s.retired, retired...)
	if !s.dropSegments(b) {
		s.dropAgain = true
	}
	b.far.snapshotDone(replaced)
}

// dropSegments removes the longest run of oldest segments that the oldest
// kept snapshot covers and that no live job's payload lives in, and the
// snapshot files pruned since the last time (snapshot.Retire). Which
// segments go is decided here, on the loop; the removal runs in a
// goroutine: it syncs the log first (the payloads log compaction moved out
// of those segments were written on the loop and must be durable before
// their old copies go), then unlinks the files one at a time, oldest
// first, at the reclaim pace (reclaim.go) — tens of milliseconds a 64 MiB
// segment, hundreds a large snapshot file, when they ran on the loop
// (docs/benchmarks.md, "Restart with far-future jobs", "Log compaction
// and activation lateness"). It reports false, doing nothing, while an
// earlier removal still runs: the caller asks again later.
func (s *snapshotter) dropSegments(b *Broker) bool {
	if s.removing.running() {
		return false
	}
	retired := s.retired
	s.retired = nil
	upto := s.droppable(b)
	if upto == 0 && len(retired) == 0 {
		return true
	}
	var segs []wal.SegmentInfo
	for _, seg := range b.log.Segments() {
		if seg.Number < upto {
			segs = append(segs, seg)
		}
	}
	s.goneBelow = max(s.goneBelow, upto)
	s.removing.start(func() {
		for i, p := range retired {
			if !b.awaitReclaim(fileSize(p)) {
				return // the rest are removed at the next start
			}
			if err := snapshot.RemoveRetired(retired[i : i+1]); err != nil {
				b.lg.Warn("snapshot: removing pruned snapshots failed", "err", err)
			}
		}
		if len(segs) == 0 {
			return
		}
		if err := b.log.SyncWritten(); err != nil {
			b.fail(err)
			return
		}
		for _, seg := range segs {
			if !b.awaitReclaim(seg.Size) {
				return // still in the log's table; the next start removes them
			}
			if err := b.log.RemoveSegmentsBefore(seg.Number + 1); err != nil {
				if !errors.Is(err, wal.ErrClosed) {
					b.lg.Warn("log: removing old segments failed", "err", err)
				}
				return
			}
		}
	})
	return true
}

// droppable answers the number of the first log segment that must stay,
// 0 if none can go.
func (s *snapshotter) droppable(b *Broker) uint32 {
	snaps, err := snapshot.List(b.snapDir())
	if err != nil || len(snaps) == 0 {
		return 0
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
	return upto
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
		if b.unsnapshotted() == 0 && !s.last.IsZero() && len(mustList(b)) > 0 {
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
			s.iter.Close()
			s.w.Abort()
			s.undo(b)
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	err := s.seal(s.w, b.far.dir, s.farSyncs)
	s.iter, s.w, s.farSyncs = nil, nil, nil
	s.finish(b, err)
	return err
}

// farSyncFiles is farstore.SyncFiles (a variable so a test can fail it).
var farSyncFiles = farstore.SyncFiles

// seal makes the far store's bucket bytes the snapshot counts durable,
// then commits it (off the loop, but for the final snapshot).
func (s *snapshotter) seal(w *snapshot.Writer, farDir string, syncs []string) error {
	if len(syncs) > 0 {
		if err := farSyncFiles(farDir, syncs); err != nil {
			w.Abort()
			return fmt.Errorf("snapshot: far-future store: %w", err)
		}
	}
	_, err := w.Commit()
	return err
}

// unsnapshotted is how much the state has changed since the last snapshot
// began: the log bytes appended since, and the bytes of the jobs handed
// out to the far store since. A hand-out writes nothing to the log (far.go,
// rule 1), but until a snapshot records it, every start takes those jobs
// back into memory and hands them out again: after a far drain that
// follows a start, that is millions of jobs.
func (b *Broker) unsnapshotted() int64 { return b.sink.written + b.far.handedOut }

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
