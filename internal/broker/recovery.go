package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/memhint"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// recover rebuilds the engine: the newest snapshot that validates (else
// the one before, else none), then every log record after its position.
func (b *Broker) recover() error {
	start := time.Now()
	if b.opts.WAL.CountJobs == nil {
		b.opts.WAL.CountJobs = CountJobRecords
	}
	b.opts.WAL.OnDamage = b.onDamage
	b.opts.WAL.OnCheckDamage = b.onCheckDamage
	log, err := wal.Open(b.walDir(), b.opts.WAL)
	if err != nil {
		return fmt.Errorf("broker: open log: %w", err)
	}
	b.log = log
	if err := snapshot.RemoveLeftovers(b.snapDir()); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	snaps, err := snapshot.List(b.snapDir())
	if err != nil {
		return fmt.Errorf("broker: list snapshots: %w", err)
	}
	var from wal.Position
	sides := prefetchSides(b.farDir())
	defer sides.wait()
	b.eng = engine.New(engine.Options{})
	loaded := ""
	var farManifest []byte
	for _, s := range snaps {
		eng, _, far, err := loadSnapshotFar(s.Path)
		if err != nil {
			b.lg.Warn("snapshot unusable, trying an older one", "file", s.Path, "err", err)
			continue
		}
		b.eng, from, loaded, farManifest = eng, s.Pos, s.Path, far
		break
	}
	b.far.init(b)
	var decodeErr error
	report, err := log.Replay(from, func(pos wal.Position, body []byte) error {
		ent, err := engine.DecodeEntry(body, pos.Segment, pos.Offset+wal.FrameHeaderSize)
		if err != nil {
			// The frame's CRC matched, so these bytes are what was written:
			// a record this version cannot read is not a torn write.
			decodeErr = fmt.Errorf("record at %s of %s: %w", pos, b.walDir(), err)
			if b.opts.WAL.ForceRecovery {
				b.lg.Warn("skipping undecodable record (--force-recovery)", "pos", pos.String(), "err", err)
				return nil
			}
			return decodeErr
		}
		b.far.replayRecord(ent)
		b.eng.Apply(ent)
		return nil
	})
	if err != nil {
		log.Close()
		return fmt.Errorf("broker: recover: %w", err)
	}
	if err := b.far.recover(farManifest, loaded, sides); err != nil {
		log.Close()
		return fmt.Errorf("broker: recover: %w", err)
	}
	b.eng.SetFarHorizon(b.opts.FarHorizon)
	b.eng.Advance(b.now())
	b.eng.SetMaxJobs(b.opts.MaxJobs)
	b.snap.init(b, report)
	b.recovered = report
	b.lg.Info("recovered", "snapshot", loaded, "records", report.Records, "segments", report.Segments,
		"torn_tail", report.TornTail, "jobs", b.eng.Jobs(), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// CountJobRecords is the log's wal.JobCounter: how many job records
// (changes and deletions) a log record holds, so that messages about
// dropped frames can say how many jobs they cost. A body that does not
// decode (it is damaged) is not counted.
func CountJobRecords(body []byte) (int, bool) {
	ent, err := engine.DecodeEntry(body, 0, 0)
	if err != nil {
		return 0, false
	}
	n := 0
	for i := range ent.Records {
		if k := ent.Records[i].Kind; k == engine.KindJob || k == engine.KindJobDelete {
			n++
		}
	}
	return n, true
}

// Damaged stored bytes are handled in three places, all ending in the
// same logged engine change (engine.DeadLetterDamaged: the job goes dead,
// its damaged blobs are dropped, its last error names the file and
// offset), so replay reproduces it like any other change:
//
//   - at start, for every range recovery reported damaged (segments before
//     the snapshot position whose header is unreadable; with
//     --force-recovery, what it skipped), before the loop serves anything;
//   - when the deferred check of a segment before the snapshot position
//     (the background scrub, scrub.go, or the first payload read from that
//     segment) finds bad regions: queued to the loop (onCheckDamage);
//   - on a payload read that fails its checksum (peek, take, list, results,
//     compaction), which runs off the loop: the read is refused with an
//     error naming file and offset, and the dead-lettering is queued to the
//     loop as an ordinary request.

// retireDamaged dead-letters the jobs whose blobs lie in the ranges
// recovery reported, and makes that durable. It runs in Open, after the
// sink is set and before the loop starts.
func (b *Broker) retireDamaged() error {
	rep := b.recovered
	if len(rep.Damaged) == 0 && !rep.Repaired() {
		return nil
	}
	now := b.now()
	total := 0
	for _, d := range rep.Damaged {
		n, err := b.eng.DeadLetterDamaged(now, d.Segment, d.From, d.To, "payload or result lost: damaged log data in "+d.String())
		if err != nil {
			return fmt.Errorf("broker: dead-letter jobs with damaged payloads in %s: %w", d, err)
		}
		if n > 0 {
			b.lg.Error("jobs dead-lettered: their payload or result is in damaged log data", "range", d.String(), "jobs", n)
		} else {
			b.lg.Warn("damaged log data holds no live job's payload", "range", d.String())
		}
		total += n
	}
	if b.sink.pending {
		err := b.log.Commit()
		b.sink.pending, b.sink.entries, b.sink.bytes = false, 0, 0
		if err != nil {
			return fmt.Errorf("broker: log the dead-lettering of damaged jobs: %w", err)
		}
	}
	b.observeDamage("job_dead_lettered", total)
	if b.opts.WAL.ForceRecovery && rep.Repaired() {
		b.lg.Warn("forced recovery: what the damage cost",
			"dropped_frames", rep.SkippedFrames, "dropped_job_records", rep.SkippedJobs,
			"skipped_segments", rep.SkippedSegments, "missing_segments", rep.MissingSegments,
			"skipped_bytes", rep.SkippedBytes, "jobs_dead_lettered", total,
			"torn_frames", rep.TornFrames, "torn_job_records", rep.TornJobs)
	}
	return nil
}

type damageObserver interface{ Damage(event string, n int) }

func (b *Broker) observeDamage(event string, n int) {
	if o, ok := b.opts.Observer.(damageObserver); ok && n > 0 {
		o.Damage(event, n)
	}
}

// onDamage is the log's OnDamage: a payload read was refused. It runs on
// the reading goroutine, so the dead-lettering is queued to the loop (once
// per damaged range at a time).
func (b *Broker) onDamage(e *wal.DamageError) {
	b.observeDamage("read_refused", 1)
	from, to := e.Offset, uint32(min(uint64(e.Offset)+uint64(e.Len), 1<<32-1))
	if e.FrameEnd > 0 {
		from, to = uint32(e.FrameOffset), uint32(min(e.FrameEnd, 1<<32-1))
	}
	if b.retireLater(e.Segment, from, to, "payload or result lost: "+e.Error(), e.File, e.FrameOffset) {
		b.lg.Error("refused to serve damaged stored bytes; dead-lettering the jobs that own them", "err", e.Error())
	}
}

// retireLater dead-letters, through the loop, the jobs whose blobs lie in
// [from, to) of segment seg, once per range at a time; file and offset are
// for the log line. It reports false when that range is being retired
// already.
func (b *Broker) retireLater(seg, from, to uint32, reason, file string, offset int64) bool {
	key := [3]uint32{seg, from, to}
	if _, busy := b.retiring.LoadOrStore(key, true); busy {
		return false
	}
	go func() {
		defer b.retiring.Delete(key)
		res, err := b.do(context.Background(), func(now time.Time) (any, error) {
			return b.eng.DeadLetterDamaged(now, seg, from, to, reason)
		})
		if err != nil {
			if !errors.Is(err, errClosed) {
				b.lg.Error("dead-lettering jobs with damaged payloads failed; the next read retries", "err", err)
			}
			return
		}
		n, _ := res.(int)
		b.observeDamage("job_dead_lettered", n)
		b.lg.Warn("jobs dead-lettered: their payload or result is damaged", "file", file, "offset", offset, "jobs", n)
	}()
	return true
}

// slabHints are the memory hints a snapshot load gives for the slab it
// fills, when it fills at least slabHintsMin bytes (variables so the
// restart measurement can compare them). Below that they did not pay:
// reopening 10 M jobs (0.7 GB named) took 0.2–0.6 s more system CPU with
// huge pages, while at 100 M (6.8 GB) huge pages and pre-faulting saved 18
// of 49 s of CPU (docs/benchmarks.md, "Restart at 100 M jobs"). Since the
// load stopped copying every chunk into fresh memory (round 3 there), huge
// pages cost more than they save at 100 M — 10–15 s of system CPU
// (compaction) where pre-faulting alone takes 6 s — so only that is asked.
var (
	slabHints    = memhint.Populate
	slabHintsMin = 2 << 30
)

// blockPool is how many block buffers a snapshot load keeps for reuse:
// about the blocks the queue between reading and applying holds (256 job
// chunks of ~57 KB, four or five a block), ~17 MB.
var blockPool = 64 // a variable so a test can make every block recycle

// blockBuf is a block's buffer during a snapshot load, with a count of who
// still uses its bytes: the reader while it returns the block's items,
// and each job chunk of it until it is applied. The last to be done puts
// it back in the pool (dropped when the pool is full).
type blockBuf struct {
	b    []byte
	refs atomic.Int32
}

func (bb *blockBuf) done(pool chan []byte) {
	if bb == nil || bb.refs.Add(-1) != 0 {
		return
	}
	select {
	case pool <- bb.b:
	default:
	}
}

func loadSnapshot(path string) (*engine.Engine, wal.Position, error) {
	eng, pos, _, err := loadSnapshotFar(path)
	return eng, pos, err
}

// loadSnapshotFar is loadSnapshot that also returns the far store's
// manifest item (far.go), nil when the snapshot has none.
func loadSnapshotFar(path string) (*engine.Engine, wal.Position, []byte, error) {
	// Read once: a damaged block fails Next, and the engine built so far
	// is thrown away (recover then tries an older snapshot).
	r, err := snapshot.OpenStream(path)
	if err != nil {
		return nil, wal.Position{}, nil, err
	}
	defer r.Close()
	// Each block is read into a buffer of its own, so a job chunk is
	// parsed and applied where it lies instead of being copied for the
	// applying goroutine; a buffer is recycled once every chunk of its
	// block is applied (blockBuf), so the load does not fault in fresh
	// memory for the whole snapshot (docs/benchmarks.md).
	pool := make(chan []byte, blockPool)
	var cur *blockBuf // the block the reader is in
	r.FreshBlocks(func() []byte {
		cur.done(pool) // the reader has left it
		var b []byte
		select {
		case b = <-pool:
		default:
			b = make([]byte, snapshot.BlockSize+16)
		}
		cur = &blockBuf{b: b}
		cur.refs.Store(1) // the reader's, until it reads the next block
		return b
	})
	// Reading and applying overlap: one goroutine reads (and checks) the
	// next items, decoding the entries of older snapshots and parsing and
	// checking job chunks (engine.ParseChunk), while this one applies,
	// which keeps both cores busy. Job chunks need no decoding per job: the
	// engine copies their records into its slab (engine/snapchunk.go).
	type decoded struct {
		ent   *engine.Entry
		chunk *engine.ParsedChunk
		block *blockBuf // the chunk's bytes
		far   []byte    // the far store's manifest
		where string    // block and offset of a chunk, for errors
		err   error
	}
	// A deep queue (~16 MB of job chunks of 1024 jobs) so that a slow
	// stretch of disk reads, when the snapshot is not in the page cache,
	// does not stall the applying side.
	ch := make(chan decoded, 256)
	stop := make(chan struct{})
	// The reader goroutine must be gone before the reader closes (the
	// deferred Close above runs after this): applying can fail and return
	// while it is still reading.
	var reading sync.WaitGroup
	reading.Add(1)
	defer func() { close(stop); reading.Wait() }()
	go func() {
		defer reading.Done()
		defer close(ch)
		for {
			item, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var d decoded
			switch {
			case err != nil:
				d.err = err
			case isFarManifest(item):
				d.far = bytes.Clone(item)
			case engine.IsChunk(item):
				// parsed and checked here, off the applying goroutine,
				// in its block's buffer, held until it is applied
				blk, off := r.Where()
				d.where = fmt.Sprintf("block %d at offset %d", blk, off)
				d.block = cur
				cur.refs.Add(1)
				if d.chunk, d.err = engine.ParseChunk(item); d.err != nil {
					d.err = fmt.Errorf("snapshot %s: %s: %w", path, d.where, d.err)
				}
			default:
				if d.ent, d.err = engine.DecodeEntry(item, 0, 0); d.err != nil {
					d.err = fmt.Errorf("snapshot %s: %w", path, d.err)
				}
			}
			select {
			case ch <- d:
			case <-stop:
				return
			}
			if d.err != nil {
				return
			}
		}
	}()
	// A job takes at least minJobRecord bytes of a snapshot, which bounds
	// what the snapshot's sizing hint may reserve.
	const minJobRecord = 24
	limit := 0
	if st, err := os.Stat(path); err == nil {
		limit = int(min(st.Size()/minJobRecord, 1<<32-2))
	}
	eng := engine.New(engine.Options{ReserveLimit: limit})
	eng.StartBulkLoad()
	var far []byte
	// The metadata entry (first) sizes the slab (and the delayed arrays)
	// for the snapshot's jobs; then a goroutine asks the kernel to back
	// that memory (huge pages, faulted in ahead) while this one copies
	// records into it, so the copy stops taking a page fault per 4 KiB
	// (internal/memhint).
	hinted := false
	var hinting sync.WaitGroup
	stopHints := make(chan struct{})
	defer func() { close(stopHints); hinting.Wait() }()
	for d := range ch {
		if d.err != nil {
			return nil, wal.Position{}, nil, d.err
		}
		if d.far != nil {
			far = d.far
			continue
		}
		if d.chunk != nil {
			if err := eng.LoadParsed(d.chunk); err != nil {
				return nil, wal.Position{}, nil, fmt.Errorf("snapshot %s: %s: %w", path, d.where, err)
			}
			d.block.done(pool)
			continue
		}
		// an entry (the metadata, first) sees the delayed heap in order
		eng.FinishBulkLoad()
		eng.Apply(d.ent)
		eng.StartBulkLoad()
		if !hinted && slabHints != 0 {
			hinted = true
			mem := eng.LoadMemory()
			n := 0
			for _, m := range mem {
				n += len(m)
			}
			if n < slabHintsMin {
				continue
			}
			hinting.Add(1)
			go func() {
				defer hinting.Done()
				memhint.Prepare(mem, slabHints, stopHints)
			}()
		}
	}
	eng.FinishBulkLoad()
	return eng, r.Pos(), far, nil
}
