package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/farstore"
	"github.com/chronoq/chronoq/internal/wal"
)

// The far-future store (docs/architecture.md): delayed jobs due beyond
// Options.FarHorizon leave memory for bucket files (internal/farstore), one
// per time bucket of half the horizon, and come back a quarter horizon
// before their bucket's window opens. The loop owns everything here.
//
// Durability rests on three rules (docs/architecture.md explains why they
// suffice):
//
//  1. Handing a job out is not logged, and happens only while no snapshot
//     walk is running. A snapshot records each bucket's size in its first
//     item (the manifest) and syncs the buckets written since the last
//     snapshot before it commits (off the loop: snapshotter.seal); a
//     recovery cuts every bucket back to the size its snapshot recorded and
//     deletes buckets it does not list. So a job handed out after the
//     snapshot began is, after a crash, in the snapshot's memory part or
//     put again by replay — never lost, never twice.
//  2. Taking a job back is logged (a KindFarIn record with the payload
//     inline, naming the bucket), and is followed by a tombstone in the
//     bucket. Replay treats every KindFarIn as that tombstone, so a
//     tombstone the crash lost is restored before the bucket is read.
//  3. A command that names a job (by id or beanstalkd id), or all jobs of a
//     queue (cancel by filter, purge, delete), first takes the far jobs it
//     may touch back (bring*), so the engine applies it to a job in memory
//     and logs it like any other; nothing ever changes a job in a bucket.

const (
	farItemJob  = 'J' // an encoded engine.Entry: one KindJob image, payload inline
	farItemTomb = 'T' // ns \x00 queue \x00 id: the job left the bucket

	farManifestMagic = 0xFA
	// version 2 names each bucket's generation (a rewritten bucket's
	// file); version 1, written before rewrites existed, means
	// generation 0
	farManifestVersion = 2
)

// farOutPerTurn bounds the jobs one loop turn hands out (a variable so tests
// can leave a backlog across turns and snapshot walks).
var farOutPerTurn = 4096

// farOutBudget is the wall time one turn's hand-out aims at. A hand-out
// costs a write per bucket it touches, and jobs spread over a year touch
// one bucket each: 4096 of them took ~50 ms a turn, which every request
// of that turn waited for. The turn's count adapts (outMax): halved after a
// turn over budget, doubled after one under half of it, between farOutMin
// and farOutPerTurn. A backlog then drains over more turns, the loop
// waking each millisecond while one remains (nextDue).
var farOutBudget = 2 * time.Millisecond

const farOutMin = 32

// farHoldBucket: a bucket holding this many bytes is written at once
// (a block stays far below farstore.MaxBlock).
const farHoldBucket = 1 << 20

// farHoldMax bounds the bytes of handed-out job items held in memory
// before they are appended to their buckets. Jobs spread over a year fall
// one per bucket per turn, and a write per job was what bounded handing
// out (~20 000 jobs/s at 10 M); held, they are written up to a few
// hundred per block. Writing starts when half of it is held, or when no
// candidates are left; at farHoldMax no more are handed out until
// writes catch up. Everything that reads a bucket, and a snapshot's
// manifest, writes the bucket's held items first (writeHeld's callers).
var farHoldMax = 32 << 20

type bucketState uint8

const (
	bucketOpen    bucketState = iota // takes new jobs
	bucketLoading                    // its window is near: being taken back in
	bucketDone                       // every job is back in memory
)

type farBucket struct {
	start int64 // unix ms
	file  *farstore.File
	state bucketState
	jobs  int // jobs in the bucket, tombstoned ones not counted
	// dead counts the items that are no longer live: tombstones and the
	// job items they end
	dead int
	// sideSize is the bucket size its side file on disk describes (0:
	// none written by this process)
	sideSize int64
	ids      farstore.Filter
	seqs     farstore.Filter
	// gone holds the jobs taken in while the bucket is loading: the
	// loader read the file before their tombstones were written. Other
	// readers read the tombstones from the file, so nothing else is kept.
	gone map[string]struct{}
	byQ  []farQ // jobs per queue, usually one entry
	// old generations of the file (rewrite.go), kept while a kept
	// snapshot may list them
	old       []farOld
	rewriting bool
	// snapshots finished since the bucket was done: its file goes once
	// no kept snapshot lists it
	doneSnaps int
	// pending: items not yet appended. Job items are held across turns
	// (held bytes of them, farHoldMax); tombstones are written in the
	// turn that makes them.
	pending [][]byte
	held    int
	wb      farBucketWB // far_writeback.go
}

// farQ is how many jobs of a queue (ns \x00 queue, interned) a bucket
// holds. A slice, not a map: a sparse bucket holds one or two queues, and
// a map would cost hundreds of bytes per bucket.
type farQ struct {
	key string
	n   int
}

// queued is how many jobs of queue key the bucket holds.
func (bk *farBucket) queued(key string) int {
	for i := range bk.byQ {
		if bk.byQ[i].key == key {
			return bk.byQ[i].n
		}
	}
	return 0
}

// addQueued changes the bucket's count of queue key by d.
func (f *farStore) addQueued(bk *farBucket, key string, d int) {
	for i := range bk.byQ {
		if q := &bk.byQ[i]; q.key == key {
			if q.n += d; q.n <= 0 {
				bk.byQ = append(bk.byQ[:i], bk.byQ[i+1:]...)
				if len(bk.byQ) == 0 {
					bk.byQ = nil
				}
			}
			return
		}
	}
	if d > 0 {
		bk.byQ = append(bk.byQ, farQ{key: f.intern(key), n: d})
	}
}

// intern returns one shared copy of a queue key, so a year of buckets
// holding jobs of one queue does not hold the key's string once each.
func (f *farStore) intern(key string) string {
	if k, ok := f.qkeys[key]; ok {
		return k
	}
	if f.qkeys == nil {
		f.qkeys = map[string]string{}
	}
	f.qkeys[key] = key
	return key
}

type farPins struct {
	bytes map[uint32]int64 // segment → bytes
	need  int              // snapshots still to finish
}

type farStore struct {
	b       *Broker
	on      bool
	dir     string
	horizon time.Duration
	width   int64 // ms
	lead    int64 // ms
	// seed keys the filter hash; it is saved in each side file, and a
	// restart adopts the seed of the side files it finds
	seed    uint64
	buckets map[int64]*farBucket
	qkeys   map[string]string // interned queue keys (intern)
	// the side files of a snapshot are written off the loop, one
	// snapshot's after the other's (sidePrev is closed when the last
	// started writer is done), so an older state never overwrites a newer
	sidePrev chan struct{}
	sideWG   sync.WaitGroup
	// nextLoad is the earliest time (unix ms) an open bucket's window is
	// within the lead time, so a turn need not look at every bucket
	nextLoad int64

	// frames logged this turn: a turn's hand-outs are mostly its own puts,
	// whose payloads are read a frame at a time (readPayloads)
	frames []wal.Position
	lens   []uint32
	// recovery: jobs replay took back in, by bucket
	replayed map[int64]map[string]struct{}
	// The log segments holding payloads of handed-out jobs are kept
	// (pinned) until both kept snapshots began after the hand-out: a
	// recovery from the older one must still find the payloads in the log.
	pinCur map[uint32]int64
	pinQ   []farPins
	// SkippedBytes counts bucket bytes --force-recovery gave up on.
	skippedBytes int64
	skippedFiles int
	// fromSide counts the buckets the last recovery opened from their
	// side files without reading them
	fromSide int
	// outMax is how many jobs the next turn hands out (farOutBudget)
	outMax int
	// linking counts backups linking bucket files off the loop
	// (backup.go); no bucket file is deleted meanwhile
	linking atomic.Int32
	// preparing: a snapshot is due and waits for the held items to be
	// written; nothing more is handed out meanwhile
	preparing bool
	// holding: buckets with held job items, oldest first (a bucket may
	// be listed twice; the second finds nothing to write); heldBytes:
	// their total (farHoldMax)
	holding   []*farBucket
	heldBytes int
	// handedOut: item bytes handed out since the last snapshot began
	// (Broker.unsnapshotted)
	handedOut int64
	// opened: buckets whose descriptor a hand-out opened, so releaseFiles
	// looks at those, not at every bucket of the year each turn
	opened []*farBucket
	// one bucket is rewritten at a time (far_rewrite.go)
	rewriting bool
	rewrites  int // rewrites switched to
	minDead   int // farRewriteMinDead when the store opened
	rwWG      sync.WaitGroup
	// wb writes appended bucket bytes back as they grow (far_writeback.go)
	wb farWriteback
}

func farKey(ns, queue, id string) string { return ns + "\x00" + queue + "\x00" + id }

func (f *farStore) init(b *Broker) {
	f.b = b
	f.dir = b.farDir()
	f.horizon = b.opts.FarHorizon
	f.minDead = farRewriteMinDead
	f.seed = rand.Uint64()
	f.buckets = map[int64]*farBucket{}
	f.nextLoad = 1<<63 - 1
	f.on = f.horizon > 0
	f.width = max(f.horizon.Milliseconds()/2, 1)
	f.lead = max(f.horizon.Milliseconds()/4, 1)
	if f.horizon <= 0 {
		// off: whatever buckets a previous run left come back at once
		f.lead = 1 << 62
	}
}

func (f *farStore) hash(s string) uint64 { return farstore.Hash(f.seed, s) }

func (f *farStore) seqHash(seq uint64) uint64 { return farstore.HashUint64(f.seed, seq) }

// manifest is the far store's snapshot item: every bucket not yet taken
// back in, with the size of it the snapshot covers. It also returns the
// bucket files written since they were last synced: the snapshotter syncs
// them off the loop before it commits the snapshot (farstore.SyncFiles),
// so those bytes are durable before the snapshot can count, and calls
// unsynced if that fails.
//
// It also saves, for every bucket that changed since its last one, a side
// file (internal/farstore/side.go) with the bucket's counts and filters at
// the size recorded, so a restart from this snapshot need not read the
// bucket. They are copied here and written off the loop; they are a cache
// (a missing, damaged or stale one makes the restart read the bucket), so
// neither their fsync nor their order against the snapshot matters.
func (f *farStore) manifest() ([]byte, []string) {
	f.writeAllHeld()
	starts := make([]int64, 0, len(f.buckets))
	var sides []*farstore.Side
	var syncs []string
	for s, bk := range f.buckets {
		if bk.state == bucketDone {
			continue
		}
		if bk.file.TakeUnsynced() {
			syncs = append(syncs, bk.file.Path())
		}
		starts = append(starts, s)
		if size := bk.file.Size(); bk.sideSize >= 0 && size != bk.sideSize {
			sides = append(sides, f.side(bk))
			bk.sideSize = size
		}
	}
	f.writeSides(sides)
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	f.releaseAllFiles()
	if f.pinCur != nil {
		f.pinQ = append(f.pinQ, farPins{bytes: f.pinCur, need: 2})
		f.pinCur = nil
	}
	m := []byte{farManifestMagic, farManifestVersion}
	m = binary.AppendUvarint(m, uint64(len(starts)))
	for _, s := range starts {
		m = binary.AppendVarint(m, s)
		m = binary.AppendUvarint(m, uint64(f.buckets[s].file.Gen()))
		m = binary.AppendUvarint(m, uint64(f.buckets[s].file.Size()))
	}
	return m, syncs
}

// unsynced counts every bucket file as unsynced again: a snapshot whose
// syncs failed did not count, and the next one must sync them all.
func (f *farStore) unsynced() {
	for _, bk := range f.buckets {
		if bk.file != nil {
			bk.file.MarkUnsynced()
		}
	}
}

// side copies what a bucket's side file holds.
func (f *farStore) side(bk *farBucket) *farstore.Side {
	s := &farstore.Side{Start: bk.start, Size: bk.file.Size(), Gen: bk.file.Gen(), Seed: f.seed, Jobs: int64(bk.jobs), Dead: int64(bk.dead),
		IDs: bk.ids.Clone(), Seqs: bk.seqs.Clone(), Queues: make([]farstore.QueueCount, len(bk.byQ))}
	for i, q := range bk.byQ {
		s.Queues[i] = farstore.QueueCount{Key: q.key, Jobs: int64(q.n)}
	}
	return s
}

// writeSides writes side files off the loop. A failure is logged and
// costs only a read of the bucket at the next start.
func (f *farStore) writeSides(sides []*farstore.Side) {
	if len(sides) == 0 {
		return
	}
	prev, done := f.sidePrev, make(chan struct{})
	f.sidePrev = done
	f.sideWG.Add(1)
	go func() {
		defer f.sideWG.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		failed := 0
		var first error
		for _, s := range sides {
			if err := farstore.WriteSide(f.dir, s); err != nil {
				if failed++; first == nil {
					first = err
				}
			}
		}
		if failed > 0 {
			f.b.lg.Warn("far-future store: side files not written; the next start reads those buckets instead", "failed", failed, "of", len(sides), "err", first)
		}
	}()
}

func isFarManifest(item []byte) bool { return len(item) > 0 && item[0] == farManifestMagic }

type farListed struct {
	start, size int64
	gen         uint32
}

func decodeFarManifest(item []byte) ([]farListed, error) {
	if len(item) < 2 || item[0] != farManifestMagic || item[1] < 1 || item[1] > farManifestVersion {
		return nil, errors.New("far-future manifest: unknown version")
	}
	version := item[1]
	p := item[2:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return nil, errors.New("far-future manifest: bad count")
	}
	p = p[k:]
	out := make([]farListed, 0, n)
	for i := uint64(0); i < n; i++ {
		s, k1 := binary.Varint(p)
		if k1 <= 0 {
			return nil, errors.New("far-future manifest: bad bucket start")
		}
		p = p[k1:]
		var gen uint64
		if version >= 2 {
			var k int
			if gen, k = binary.Uvarint(p); k <= 0 || gen > math.MaxUint32 {
				return nil, errors.New("far-future manifest: bad bucket generation")
			}
			p = p[k:]
		}
		sz, k2 := binary.Uvarint(p)
		if k2 <= 0 || sz < farstore.HeaderSize || sz > 1<<50 {
			return nil, errors.New("far-future manifest: bad bucket size")
		}
		out = append(out, farListed{start: s, gen: uint32(gen), size: int64(sz)})
		p = p[k2:]
	}
	if len(p) != 0 {
		return nil, errors.New("far-future manifest: trailing bytes")
	}
	return out, nil
}

// replayRecord is recovery's look at each replayed entry: a job taken back
// in leaves its bucket (rule 2).
func (f *farStore) replayRecord(ent *engine.Entry) {
	for i := range ent.Records {
		r := &ent.Records[i]
		if r.Kind != engine.KindFarIn {
			continue
		}
		if f.replayed == nil {
			f.replayed = map[int64]map[string]struct{}{}
		}
		m := f.replayed[r.FarBucket]
		if m == nil {
			m = map[string]struct{}{}
			f.replayed[r.FarBucket] = m
		}
		m[farKey(r.Job.NS, r.Job.Queue, r.Job.ID)] = struct{}{}
	}
}

// sidePrefetch reads every side file in the far store's directory in the
// background while recovery loads the snapshot: a year of 30-minute
// buckets is ~17 500 small files, ~0.2 s of opening, reading and closing
// that would otherwise run on one core after the load (docs/benchmarks.md,
// "Restart with far-future jobs"). What it read is only used for buckets
// the snapshot lists with the size the side file describes, the same
// checks as a side file read later; nothing else writes the directory
// until recover has waited for it.
type sidePrefetch struct {
	reading chore
	sides   map[int64]sideRead
}

type sideRead struct {
	side *farstore.Side
	err  error
}

func prefetchSides(dir string) *sidePrefetch {
	p := &sidePrefetch{sides: map[int64]sideRead{}}
	p.reading.start(func() {
		starts, err := farstore.ListSides(dir)
		if err != nil {
			return // read one by one later, where the error is reported
		}
		for _, start := range starts {
			s, err := farstore.ReadSide(dir, start)
			p.sides[start] = sideRead{s, err}
		}
	})
	return p
}

// wait returns once the prefetch is over (at once for none).
func (p *sidePrefetch) wait() {
	if p != nil {
		p.reading.wait()
	}
}

// read returns start's side file as the prefetch read it, or reads it now.
func (p *sidePrefetch) read(dir string, start int64) (*farstore.Side, error) {
	if p != nil {
		if r, ok := p.sides[start]; ok {
			return r.side, r.err
		}
	}
	return farstore.ReadSide(dir, start)
}

// recover opens the buckets the loaded snapshot lists (manifest nil: none)
// after replay. A bucket whose side file describes exactly the size the
// snapshot recorded is not read: its counts and filters come from the side
// file, and only its length is checked. Any other bucket — no side file, a
// damaged or stale one, or one replay took jobs back from (their
// tombstones lie past the recorded size, and which of them the bucket
// still holds is only known by reading it) — is checked block by block up
// to its recorded size, and its filters and counts are rebuilt. Each is
// cut back to its recorded size, and the jobs replay took back in are
// tombstoned. Bucket files the snapshot does not list hold only jobs that
// the snapshot or the log hold too, and are deleted, with any side file
// without a listed bucket. A missing or damaged bucket stops recovery with
// the file and offset, unless --force-recovery, which keeps what precedes
// the damage and counts what it skipped. Side files come from pre, which
// read them while the snapshot loaded.
func (f *farStore) recover(manifest []byte, snapPath string, pre *sidePrefetch) error {
	pre.wait()
	var listed []farListed
	if manifest != nil {
		var err error
		if listed, err = decodeFarManifest(manifest); err != nil {
			return fmt.Errorf("snapshot %s: %w", snapPath, err)
		}
	}
	keep := map[farstore.ID]bool{}
	keepSide := map[int64]bool{}
	for _, l := range listed {
		keep[farstore.ID{Start: l.start, Gen: l.gen}] = true
		keepSide[l.start] = true
	}
	files, err := farstore.List(f.dir)
	if err != nil {
		return fmt.Errorf("far-future store: list %s: %w", f.dir, err)
	}
	sideFiles, err := farstore.ListSides(f.dir)
	if err != nil {
		return fmt.Errorf("far-future store: list %s: %w", f.dir, err)
	}
	// a generation the snapshot does not list: a rewrite that had not
	// been switched to, or one whose old generation no snapshot needs
	for _, id := range files {
		if !keep[id] {
			if err := farstore.Remove(f.dir, id.Start, id.Gen, false); err != nil {
				return fmt.Errorf("far-future store: remove unlisted bucket: %w", err)
			}
		}
	}
	for _, s := range sideFiles {
		if !keepSide[s] {
			if err := farstore.RemoveSide(f.dir, s); err != nil {
				return fmt.Errorf("far-future store: remove unlisted side file: %w", err)
			}
		}
	}
	// the side files first: the filters of every bucket must share one
	// seed, and the ones rebuilt below take that of the side files
	sides := make([]*farstore.Side, len(listed))
	var missing, stale, damaged, touched int
	seeded := false
	for i, l := range listed {
		if len(f.replayed[l.start]) > 0 {
			touched++
			continue
		}
		s, err := pre.read(f.dir, l.start)
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing++
			continue
		case err != nil:
			damaged++
			f.b.lg.Warn("far-future store: side file damaged; reading its bucket instead", "err", err)
			continue
		case s.Size != l.size || s.Gen != l.gen || seeded && s.Seed != f.seed:
			stale++
			f.b.lg.Info("far-future store: side file describes other bytes than the snapshot lists; reading its bucket instead",
				"bucket", farstore.Name(l.start, l.gen), "side_size", s.Size, "side_generation", s.Gen, "snapshot_size", l.size)
			continue
		}
		if !seeded {
			f.seed, seeded = s.Seed, true
		}
		sides[i] = s
	}
	force := f.b.opts.WAL.ForceRecovery
	fromSide := 0
	defer func() { f.fromSide = fromSide }()
	for i, l := range listed {
		var bk *farBucket
		if s := sides[i]; s != nil {
			bk = &farBucket{start: l.start, jobs: int(s.Jobs), dead: int(s.Dead), sideSize: l.size, ids: s.IDs, seqs: s.Seqs}
			for _, q := range s.Queues {
				f.addQueued(bk, q.Key, int(q.Jobs))
			}
			if bk.file, err = farstore.OpenAt(f.dir, l.start, l.gen, l.size); err == nil {
				fromSide++
			} else if errors.As(err, new(*farstore.DamageError)) || errors.Is(err, os.ErrNotExist) {
				// the bucket itself is short or gone: the checks below
				// apply the rules for damage
				bk = nil
			} else {
				return fmt.Errorf("far-future store: %w", err)
			}
		}
		if bk == nil {
			var size int64
			bk, size, err = f.scan(l.start, l.gen, l.size, f.replayed[l.start])
			if err != nil {
				if !force {
					return fmt.Errorf("far-future store (listed by snapshot %s): %w; --force-recovery skips the damaged part", snapPath, err)
				}
				f.skippedFiles++
				f.skippedBytes += l.size - size
				f.b.lg.Error("far-future bucket damaged: skipping the rest of it (--force-recovery); the jobs it held are lost", "err", err, "kept_bytes", size, "skipped_bytes", l.size-size)
				if size < farstore.HeaderSize {
					_ = farstore.Remove(f.dir, l.start, l.gen, true)
					continue
				}
			}
			if bk.file, err = farstore.OpenAt(f.dir, l.start, l.gen, size); err != nil {
				return fmt.Errorf("far-future store: %w", err)
			}
		}
		f.buckets[l.start] = bk
		f.nextLoad = min(f.nextLoad, l.start-f.lead)
		f.flushBucket(bk)
		f.on = true
		for _, q := range bk.byQ {
			ns, qn, _ := strings.Cut(q.key, "\x00")
			f.b.eng.AddFar(ns, qn, int64(q.n))
		}
	}
	if len(listed) > 0 {
		f.b.lg.Info("far-future store: buckets opened", "buckets", len(listed), "from_side_files", fromSide,
			"read", len(listed)-fromSide, "side_file_missing", missing, "side_file_damaged", damaged, "side_file_stale", stale, "touched_by_replay", touched)
	}
	f.replayed = nil
	f.releaseAllFiles()
	for _, bk := range f.buckets {
		f.maybeRewrite(bk)
	}
	return nil
}

// scan reads a bucket's first size bytes into a new header; taken are
// the jobs replay took back in. On damage it returns what it read before
// the damaged block and that block's offset as the size to keep.
func (f *farStore) scan(start int64, gen uint32, size int64, taken map[string]struct{}) (*farBucket, int64, error) {
	bk := &farBucket{start: start}
	type entry struct {
		q   string
		seq uint64
	}
	live := map[string]entry{}
	items := 0
	path := filepath.Join(f.dir, farstore.Name(start, gen))
	err := farstore.Read(path, size, func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: path, Offset: off, Reason: err.Error()}
		}
		items++
		if it.tomb {
			delete(live, it.key)
			return nil
		}
		live[it.key] = entry{q: it.rec.Job.NS + "\x00" + it.rec.Job.Queue, seq: it.rec.Job.Seq}
		return nil
	})
	if err != nil {
		var de *farstore.DamageError
		switch {
		case errors.As(err, &de):
			size = de.Offset
		case errors.Is(err, os.ErrNotExist):
			size = 0
			err = &farstore.DamageError{File: path, Offset: 0, Reason: "the bucket file is missing"}
		default:
			return nil, 0, err
		}
	}
	// sized from the count: a rebuilt filter holds no slack
	bk.ids, bk.seqs = farstore.Sized(len(live)), farstore.Sized(len(live))
	bk.dead = items - len(live)
	for key, e := range live {
		bk.ids.Add(f.hash(key))
		bk.seqs.Add(f.seqHash(e.seq))
		if _, ok := taken[key]; ok {
			// replay took it back in: write the tombstone the crash lost
			bk.pending = append(bk.pending, append([]byte{farItemTomb}, key...))
			bk.dead += 2
			continue
		}
		bk.jobs++
		f.addQueued(bk, e.q, 1)
	}
	return bk, size, err
}

type farItem struct {
	tomb bool
	key  string
	rec  *engine.Record // job items
}

func decodeFarItem(item []byte) (farItem, error) {
	if len(item) == 0 {
		return farItem{}, errors.New("empty item")
	}
	switch item[0] {
	case farItemTomb:
		return farItem{tomb: true, key: string(item[1:])}, nil
	case farItemJob:
		ent, err := engine.DecodeEntry(item[1:], 0, 0)
		if err != nil {
			return farItem{}, err
		}
		if len(ent.Records) != 1 || ent.Records[0].Kind != engine.KindJob {
			return farItem{}, errors.New("job item without exactly one job record")
		}
		r := &ent.Records[0]
		return farItem{key: farKey(r.Job.NS, r.Job.Queue, r.Job.ID), rec: r}, nil
	}
	return farItem{}, fmt.Errorf("unknown item kind %#x", item[0])
}

// flushBucket appends the turn's items of a bucket as one block.
func (f *farStore) flushBucket(bk *farBucket) {
	if len(bk.pending) > 0 && bk.file != nil {
		if !bk.file.Open() {
			f.opened = append(f.opened, bk)
		}
		from := bk.file.Size()
		if err := bk.file.Append(bk.pending); err != nil {
			// memory now holds less than the buckets and the log say:
			// stop writing, as a failed log write does
			f.b.fail(fmt.Errorf("far-future store: %w", err))
		} else {
			f.wb.appended(bk, from)
		}
	}
	// not kept for the next turn: the array would hold the items (job
	// images with their payloads) of every bucket's last turn
	bk.pending = nil
	f.heldBytes -= bk.held
	bk.held = 0
}

// writeHeld appends the held job items of the oldest holding buckets
// while the turn's hand-out budget lasts (at least one bucket a turn),
// when half of farHoldMax is held or no candidates are left to batch with.
func (f *farStore) writeHeld(started time.Time) {
	for len(f.holding) > 0 && f.b.failed.Load() == nil {
		if f.heldBytes < farHoldMax/2 && f.b.eng.FarPending() && !f.preparing {
			return
		}
		bk := f.holding[0]
		f.holding[0] = nil
		f.holding = f.holding[1:]
		if bk.held == 0 {
			continue
		}
		f.flushBucket(bk)
		if time.Since(started) > farOutBudget {
			break
		}
	}
	if len(f.holding) == 0 {
		f.holding = nil // let the drained array go
	}
}

// prepareSnapshot is asked by a snapshot that is due: while job items are
// held it answers true and the hand-outs of the next turns only write them
// (a budget per turn), so the manifest, which writes what is left on the
// loop at once, finds nothing: up to farHoldMax spread over thousands of
// buckets is a write per bucket.
func (f *farStore) prepareSnapshot() bool {
	f.preparing = f.heldBytes > 0 && f.b.failed.Load() == nil
	return f.preparing
}

// writeAllHeld appends every held job item (a snapshot's manifest).
func (f *farStore) writeAllHeld() {
	for _, bk := range f.holding {
		f.flushBucket(bk)
	}
	f.holding = nil
}

func (f *farStore) bucket(start int64, create bool) *farBucket {
	bk := f.buckets[start]
	if bk != nil || !create {
		return bk
	}
	file, err := farstore.Create(f.dir, start, 0)
	if err != nil {
		f.b.lg.Error("far-future store: cannot create a bucket; its jobs stay in memory", "err", err)
		return nil
	}
	bk = &farBucket{start: start, file: file}
	f.buckets[start] = bk
	f.nextLoad = min(f.nextLoad, start-f.lead)
	return bk
}

// handOut moves delayed jobs beyond the horizon out of memory (rule 1: never
// while a snapshot walk runs). It runs after the turn's commit, so the
// payloads it reads are in the log file. A job leaves memory once its item
// is held for its bucket (farHoldMax): not logged, like the hand-out
// itself, the item is durable only once a snapshot's manifest has written
// and counted it, and until then a crash recovers the job from the
// previous snapshot or the log (rule 1).
func (f *farStore) handOut(now time.Time) {
	defer func() {
		f.frames, f.lens = f.frames[:0], f.lens[:0]
		if f.wb.pending() {
			f.wb.step(f.dir, time.Now())
		}
	}()
	if !f.on || f.horizon <= 0 || f.b.snap.iter != nil || f.b.failed.Load() != nil {
		return
	}
	if !f.b.eng.FarPending() || f.heldBytes >= farHoldMax || f.preparing {
		if len(f.holding) > 0 {
			f.writeHeld(time.Now())
		}
		return
	}
	if f.outMax <= 0 || f.outMax > farOutPerTurn {
		f.outMax = farOutPerTurn
	}
	started := time.Now()
	defer func() {
		switch took := time.Since(started); {
		case took > farOutBudget:
			f.outMax = max(f.outMax/2, min(farOutMin, farOutPerTurn))
		case took < farOutBudget/2:
			f.outMax = min(f.outMax*2, farOutPerTurn)
		}
	}()
	offer := f.b.eng.FarOffer(now, f.outMax)
	kept := offer[:0]
	var bks []*farBucket
	for i := range offer {
		fj := &offer[i]
		start := fj.At - fj.At%f.width
		bk := f.bucket(start, true)
		if bk == nil || bk.state != bucketOpen || start-f.lead <= now.UnixMilli() {
			continue
		}
		kept = append(kept, *fj)
		bks = append(bks, bk)
	}
	data, ok := f.readPayloads(kept)
	if !ok {
		return
	}
	for i := range kept {
		fj, bk := &kept[i], bks[i]
		item := fj.Encode([]byte{farItemJob}, data[i])
		if bk.held == 0 {
			f.holding = append(f.holding, bk)
		}
		bk.pending = append(bk.pending, item)
		bk.held += len(item)
		f.heldBytes += len(item)
		f.handedOut += int64(len(item))
		bk.ids.Add(f.hash(farKey(fj.NS, fj.Queue, fj.ID)))
		bk.seqs.Add(f.seqHash(fj.Seq))
		bk.jobs++
		f.addQueued(bk, fj.NS+"\x00"+fj.Queue, 1)
		if bk.held >= farHoldBucket {
			f.flushBucket(bk)
		}
	}
	if f.b.failed.Load() == nil && f.b.eng.FarTake(kept) > 0 {
		for i := range kept {
			if p := kept[i].Payload; p.Len > 0 {
				if f.pinCur == nil {
					f.pinCur = map[uint32]int64{}
				}
				f.pinCur[p.Segment] += int64(p.Len)
			}
		}
	}
	f.writeHeld(started)
	f.releaseFiles()
}

// noteFrame remembers a frame the sink logged this turn (its position and
// body length).
func (f *farStore) noteFrame(pos wal.Position, n int) {
	if f.on && f.horizon > 0 {
		f.frames = append(f.frames, wal.Position{Segment: pos.Segment, Offset: pos.Offset})
		f.lens = append(f.lens[:len(f.frames)-1], uint32(n))
	}
}

// readPayloads reads the payloads of jobs from the log. Those in a frame
// logged this turn (a batch's puts share one) are cut from that frame, read
// once with its checksum checked; any other is read on its own.
func (f *farStore) readPayloads(jobs []engine.FarJob) ([][]byte, bool) {
	out := make([][]byte, len(jobs))
	bodies := map[int][]byte{}
	// Jobs put in earlier turns (a backlog left by a snapshot walk or by
	// farOutPerTurn) come in log order: a frame reader checks each of
	// their frames once, not once per payload (a batch's frame is ~200 KB).
	var older *wal.FrameReader
	for i := range jobs {
		p := jobs[i].Payload
		if p.Len == 0 {
			continue
		}
		k := sort.Search(len(f.frames), func(k int) bool {
			fr := f.frames[k]
			return fr.Segment > p.Segment || fr.Segment == p.Segment && fr.Offset+wal.FrameHeaderSize+f.lens[k] > p.Offset
		})
		if k < len(f.frames) && f.frames[k].Segment == p.Segment && f.frames[k].Offset+wal.FrameHeaderSize <= p.Offset {
			body, ok := bodies[k]
			if !ok {
				var err error
				if body, err = f.b.log.ReadFrame(f.frames[k]); err != nil || uint32(len(body)) != f.lens[k] {
					body = nil
				}
				bodies[k] = body
			}
			if at := p.Offset - f.frames[k].Offset - wal.FrameHeaderSize; body != nil && at+p.Len <= uint32(len(body)) {
				out[i] = body[at : at+p.Len]
				continue
			}
		}
		if older == nil {
			older = f.b.log.NewFrameReader()
		}
		data, err := older.ReadAt(p.Segment, p.Offset, p.Len)
		if err != nil {
			f.b.lg.Error("far-future store: cannot read payloads to hand jobs out; they stay in memory", "err", err)
			return nil, false
		}
		out[i] = data
	}
	return out, true
}

// farMaxOpen bounds the bucket descriptors kept open between turns.
const farMaxOpen = 64

// releaseFiles closes the descriptors hand-outs opened once more than
// farMaxOpen are (they reopen on the next write).
func (f *farStore) releaseFiles() {
	if len(f.opened) <= farMaxOpen {
		return
	}
	for _, bk := range f.opened {
		if bk.file != nil {
			bk.file.Release()
		}
	}
	clear(f.opened)
	f.opened = f.opened[:0]
}

// releaseAllFiles closes bucket descriptors once more than farMaxOpen of
// all buckets are open, whoever opened them (a snapshot's syncs, a
// rewrite's new file); it looks at every bucket, so it runs only at such
// rarer moments.
func (f *farStore) releaseAllFiles() {
	clear(f.opened)
	f.opened = f.opened[:0]
	open := 0
	for _, bk := range f.buckets {
		if bk.file != nil && bk.file.Open() {
			open++
		}
	}
	if open <= farMaxOpen {
		return
	}
	for _, bk := range f.buckets {
		if bk.file != nil {
			bk.file.Release()
		}
	}
}

// find reads a bucket for the last live image of a job matching fn.
func (f *farStore) find(bk *farBucket, match func(*engine.Record) bool) (*engine.Record, error) {
	var found *engine.Record
	var foundKey string
	f.flushBucket(bk) // held items are part of what the bucket holds
	path := bk.file.Path()
	err := farstore.Read(path, bk.file.Size(), func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: path, Offset: off, Reason: err.Error()}
		}
		switch {
		case it.tomb:
			if it.key == foundKey {
				found, foundKey = nil, ""
			}
		case match(it.rec):
			// the item aliases the read buffer
			ent, _ := engine.DecodeEntry(bytes.Clone(item[1:]), 0, 0)
			found, foundKey = &ent.Records[0], it.key
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found != nil {
		if _, ok := bk.gone[foundKey]; ok {
			return nil, nil
		}
	}
	return found, nil
}

// takeIn brings jobs of a bucket back into memory (rule 2): logged
// KindFarIn records, tombstones in the bucket, lower far counts.
func (f *farStore) takeIn(now time.Time, bk *farBucket, recs []engine.Record) error {
	live := recs[:0:0]
	for i := range recs {
		key := farKey(recs[i].Job.NS, recs[i].Job.Queue, recs[i].Job.ID)
		if _, ok := bk.gone[key]; !ok {
			live = append(live, recs[i])
		}
	}
	if len(live) == 0 {
		return nil
	}
	if _, err := f.b.eng.FarIn(now, bk.start, live); err != nil {
		return err
	}
	for i := range live {
		j := &live[i].Job
		key := farKey(j.NS, j.Queue, j.ID)
		if bk.state == bucketLoading {
			if bk.gone == nil {
				bk.gone = map[string]struct{}{}
			}
			bk.gone[key] = struct{}{}
		}
		if bk.state != bucketDone {
			bk.pending = append(bk.pending, append([]byte{farItemTomb}, key...))
		}
		bk.jobs--
		bk.dead += 2
		f.addQueued(bk, j.NS+"\x00"+j.Queue, -1)
		f.b.eng.AddFar(j.NS, j.Queue, -1)
	}
	f.flushBucket(bk)
	f.releaseFiles()
	f.maybeRewrite(bk)
	return nil
}

// bring takes a job named by id back into memory before a command that
// names it (rule 3). Only buckets whose filter may hold it are read.
func (f *farStore) bring(now time.Time, ns, queue, id string) error {
	if !f.on || len(f.buckets) == 0 || id == "" || f.b.eng.HasJob(ns, queue, id) {
		return nil
	}
	key := farKey(ns, queue, id)
	h := f.hash(key)
	for _, bk := range f.sorted() {
		if bk.state == bucketDone || bk.jobs == 0 || !bk.ids.MayHave(h) {
			continue
		}
		rec, err := f.find(bk, func(r *engine.Record) bool { return r.Job.ID == id && r.Job.Queue == queue && r.Job.NS == ns })
		if err != nil {
			return farUnavailable(err)
		}
		if rec != nil {
			return f.takeIn(now, bk, []engine.Record{*rec})
		}
	}
	return nil
}

// bringSeq is bring for a beanstalkd id (a sequence number) in ns.
func (f *farStore) bringSeq(now time.Time, ns string, seq uint64) error {
	if !f.on || len(f.buckets) == 0 || f.b.eng.HasSeq(seq) {
		return nil
	}
	h := f.seqHash(seq)
	for _, bk := range f.sorted() {
		if bk.state == bucketDone || bk.jobs == 0 || !bk.seqs.MayHave(h) {
			continue
		}
		rec, err := f.find(bk, func(r *engine.Record) bool { return r.Job.Seq == seq && r.Job.NS == ns })
		if err != nil {
			return farUnavailable(err)
		}
		if rec != nil {
			return f.takeIn(now, bk, []engine.Record{*rec})
		}
	}
	return nil
}

// bringQueue takes back every far job of a queue (every queue of ns when
// queue is "") whose tags include tags (nil: all), before a command that acts on the queue's jobs by filter
// (cancel by filter, purge, delete). Buckets holding none of the queue's
// jobs are not read; each other bucket is read once.
func (f *farStore) bringQueue(now time.Time, ns, queue string, tags map[string]string) error {
	if !f.on || len(f.buckets) == 0 {
		return nil
	}
	q := ns + "\x00" + queue
	holds := func(bk *farBucket) bool {
		if queue != "" {
			return bk.queued(q) > 0
		}
		for _, e := range bk.byQ {
			if strings.HasPrefix(e.key, q) {
				return true
			}
		}
		return false
	}
	for _, bk := range f.sorted() {
		if bk.state == bucketDone || !holds(bk) {
			continue
		}
		recs, err := f.readAll(bk, func(r *engine.Record) bool {
			return (queue == "" || r.Job.Queue == queue) && r.Job.NS == ns && hasTags(r.Job.Tags, tags)
		})
		if err != nil {
			return farUnavailable(err)
		}
		if err := f.takeIn(now, bk, recs); err != nil {
			return err
		}
	}
	return nil
}

func hasTags(img []string, want map[string]string) bool {
	for k, v := range want {
		ok := false
		for i := 0; i+1 < len(img); i += 2 {
			if img[i] == k && img[i+1] == v {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// readAll returns the live images of a bucket that match.
func (f *farStore) readAll(bk *farBucket, match func(*engine.Record) bool) ([]engine.Record, error) {
	type at struct{ i int }
	var out []engine.Record
	idx := map[string]int{}
	f.flushBucket(bk) // held items are part of what the bucket holds
	path := bk.file.Path()
	size := int64(-1)
	if bk.file != nil {
		size = bk.file.Size()
	}
	err := farstore.Read(path, size, func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: path, Offset: off, Reason: err.Error()}
		}
		if it.tomb {
			if i, ok := idx[it.key]; ok {
				out[i].Kind = 0
				delete(idx, it.key)
			}
			return nil
		}
		if !match(it.rec) {
			return nil
		}
		ent, _ := engine.DecodeEntry(bytes.Clone(item[1:]), 0, 0)
		if i, ok := idx[it.key]; ok {
			out[i].Kind = 0
		}
		idx[it.key] = len(out)
		out = append(out, ent.Records[0])
		return nil
	})
	if err != nil {
		return nil, err
	}
	live := out[:0]
	for _, r := range out {
		if r.Kind == 0 {
			continue
		}
		if _, ok := bk.gone[farKey(r.Job.NS, r.Job.Queue, r.Job.ID)]; ok {
			continue
		}
		live = append(live, r)
	}
	return live, nil
}

func farUnavailable(err error) error {
	return unavailable("far-future store: %v", err)
}

func (f *farStore) sorted() []*farBucket {
	out := make([]*farBucket, 0, len(f.buckets))
	for _, bk := range f.buckets {
		out = append(out, bk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// step starts taking back the buckets whose window is within the lead
// time. The read runs off the loop; the jobs come back to the loop in
// chunks, so no turn stalls behind a large bucket.
func (f *farStore) step(now time.Time) {
	if !f.on || now.UnixMilli() < f.nextLoad {
		return
	}
	f.nextLoad = 1<<63 - 1
	for _, bk := range f.buckets {
		if bk.state != bucketOpen {
			continue
		}
		if due := bk.start - f.lead; due > now.UnixMilli() {
			f.nextLoad = min(f.nextLoad, due)
			continue
		}
		bk.state = bucketLoading
		f.flushBucket(bk) // the load reads the file; nothing is handed to a loading bucket
		go f.load(bk, bk.file.Path(), bk.file.Size())
	}
}

const farLoadChunk = 256

func (f *farStore) load(bk *farBucket, path string, size int64) {
	var recs []engine.Record
	idx := map[string]int{}
	err := farstore.Read(path, size, func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: path, Offset: off, Reason: err.Error()}
		}
		if i, ok := idx[it.key]; ok {
			recs[i].Kind = 0
			delete(idx, it.key)
		}
		if it.tomb {
			return nil
		}
		ent, _ := engine.DecodeEntry(bytes.Clone(item[1:]), 0, 0)
		idx[it.key] = len(recs)
		recs = append(recs, ent.Records[0])
		return nil
	})
	if err != nil {
		// the next start must read this bucket, not trust its side file
		// (which only says what the bucket should hold)
		if rerr := farstore.RemoveSide(f.dir, bk.start); rerr != nil {
			f.b.lg.Error("far-future store: removing a side file failed", "err", rerr)
		}
		f.b.do(context.Background(), func(time.Time) (any, error) {
			bk.sideSize = -1 // no later snapshot writes it again
			return nil, nil
		})
		f.b.lg.Error("far-future store: cannot take a bucket back in; its jobs stay out until a restart checks it", "err", err)
		return
	}
	live := recs[:0]
	for _, r := range recs {
		if r.Kind != 0 {
			live = append(live, r)
		}
	}
	for len(live) > 0 {
		n := min(len(live), farLoadChunk)
		chunk := live[:n]
		live = live[n:]
		if _, err := f.b.do(context.Background(), func(now time.Time) (any, error) {
			return nil, f.takeIn(now, bk, chunk)
		}); err != nil {
			f.b.lg.Error("far-future store: taking a bucket back in failed; the rest follows after a restart", "bucket", path, "err", err)
			return
		}
	}
	f.b.do(context.Background(), func(time.Time) (any, error) {
		bk.state = bucketDone
		bk.ids, bk.seqs, bk.gone, bk.byQ = farstore.Filter{}, farstore.Filter{}, nil, nil
		f.heldBytes -= bk.held
		bk.pending, bk.held = nil, 0
		return nil, nil
	})
}

// snapshotDone deletes the files of buckets taken back in once no kept
// snapshot (snapshot.Prune keeps two) lists them. A snapshot that replaced
// the newest one (the same log position: only hand-outs since) adds no kept
// snapshot: it counts only for what happened after the one it replaced
// began (a pin made at its own start, a bucket not yet counted), which the
// replaced one did not cover.
func (f *farStore) snapshotDone(replaced bool) {
	kept := f.pinQ[:0]
	for _, p := range f.pinQ {
		if replaced && p.need < 2 {
			kept = append(kept, p)
			continue
		}
		if p.need--; p.need > 0 {
			kept = append(kept, p)
		}
	}
	f.pinQ = kept
	if f.linking.Load() > 0 {
		return // the next snapshot deletes what this one would have
	}
	for s, bk := range f.buckets {
		f.dropOldGens(bk)
		if bk.state != bucketDone {
			continue
		}
		if replaced && bk.doneSnaps > 0 {
			continue
		}
		if bk.doneSnaps++; bk.doneSnaps < 2 {
			continue
		}
		bk.file.Close()
		if err := farstore.Remove(f.dir, s, bk.file.Gen(), true); err != nil {
			f.b.lg.Warn("far-future store: removing a bucket taken back in failed", "err", err)
		}
		for _, o := range bk.old {
			_ = farstore.Remove(f.dir, s, o.gen, false)
		}
		delete(f.buckets, s)
	}
}

// draining reports a backlog of jobs about to leave memory (more than a
// turn hands out, or items held): compaction waits for it, since it would
// re-log payloads that are about to be written to buckets anyway — at 10 M
// jobs over a year it took half the loop's CPU while the backlog drained.
func (f *farStore) draining() bool {
	return f.on && f.horizon > 0 && (f.b.eng.FarBacklog() > farOutPerTurn || f.heldBytes > 0)
}

// nextDue is when the loop must wake for the far store.
func (f *farStore) nextDue(now time.Time) (time.Time, bool) {
	if !f.on {
		return time.Time{}, false
	}
	if f.horizon > 0 && (f.b.eng.FarPending() || len(f.holding) > 0) {
		return now.Add(time.Millisecond), true
	}
	if f.nextLoad == 1<<63-1 {
		return time.Time{}, false
	}
	return time.UnixMilli(max(f.nextLoad, 0)), true
}

// pinned reports whether a log segment must stay for handed-out payloads.
func (f *farStore) pinned(seg uint32) bool {
	if f.pinCur[seg] > 0 {
		return true
	}
	for _, p := range f.pinQ {
		if p.bytes[seg] > 0 {
			return true
		}
	}
	return false
}

// close closes the bucket files (after the final snapshot) and waits for
// the side files being written.
func (f *farStore) close() {
	f.sideWG.Wait()
	f.rwWG.Wait()
	f.wb.wait()
	for _, bk := range f.buckets {
		if bk.file != nil {
			bk.file.Close()
		}
	}
}

// FarStats describes the far-future store: jobs and buckets out of memory,
// and the memory their headers and filters take.
type FarStats struct {
	Jobs, Buckets int
	FilterBytes   int
	// Backlog: jobs in memory due beyond the horizon, still to go out;
	// HeldBytes: items handed out, not yet written to their buckets
	Backlog   int
	HeldBytes int
}

// FarStats reports the far store's size.
func (b *Broker) FarStats(ctx context.Context) (FarStats, error) {
	return call(b, ctx, func(time.Time) (FarStats, error) {
		s := FarStats{HeldBytes: b.far.heldBytes}
		if b.far.on && b.far.horizon > 0 {
			s.Backlog = b.eng.FarBacklog()
		}
		for _, bk := range b.far.buckets {
			if bk.state == bucketDone {
				continue
			}
			s.Buckets++
			s.Jobs += bk.jobs
			s.FilterBytes += bk.ids.Bytes() + bk.seqs.Bytes()
		}
		return s, nil
	})
}

// farMayMatch reports whether a cancel filter can match far jobs: they are
// delayed and have no key.
func farMayMatch(f engine.Filter) bool {
	if f.HasKey && f.Key != "" {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if s == engine.StateDelayed {
			return true
		}
	}
	return false
}

// bringEarliest takes back the far jobs of a queue from the earliest bucket
// holding any (beanstalkd peek-delayed when no delayed job of the queue is
// in memory). It returns how many came back.
func (f *farStore) bringEarliest(now time.Time, ns, queue string) (int, error) {
	if !f.on || len(f.buckets) == 0 {
		return 0, nil
	}
	q := ns + "\x00" + queue
	for _, bk := range f.sorted() {
		if bk.state == bucketDone || bk.queued(q) == 0 {
			continue
		}
		recs, err := f.readAll(bk, func(r *engine.Record) bool { return r.Job.Queue == queue && r.Job.NS == ns })
		if err != nil {
			return 0, farUnavailable(err)
		}
		return len(recs), f.takeIn(now, bk, recs)
	}
	return 0, nil
}

// bringForKick takes back, before a kick of n jobs of a queue (rule 3),
// the far jobs the kick needs: whole buckets in time order until they
// hold as many of the queue's jobs as the delayed jobs in memory fall
// short of n. The kick then picks the soonest n as usual; what it leaves
// goes out again.
func (f *farStore) bringForKick(now time.Time, ns, queue string, n int) error {
	if !f.on || len(f.buckets) == 0 {
		return nil
	}
	short := f.b.eng.FarKickShort(ns, queue, n)
	q := ns + "\x00" + queue
	for _, bk := range f.sorted() {
		if short <= 0 {
			break
		}
		if bk.state == bucketDone || bk.queued(q) == 0 {
			continue
		}
		recs, err := f.readAll(bk, func(r *engine.Record) bool { return r.Job.Queue == queue && r.Job.NS == ns })
		if err != nil {
			return farUnavailable(err)
		}
		if err := f.takeIn(now, bk, recs); err != nil {
			return err
		}
		short -= len(recs)
	}
	return nil
}

// farCursor starts the cursors of listing pages that continue into the
// buckets: "far.<bucket start>.<jobs of that bucket already listed>".
const farCursor = "far."

// list is the engine's listing followed, once it is exhausted, by the far
// jobs of the queue that match the filter: bucket by bucket in time order,
// each bucket in the order its jobs went out, jobs listed as the bucket
// holds them (payload included). A page reads the buckets it lists from,
// never more than the ones it needs; buckets holding none of the queue's
// jobs are not read.
func (f *farStore) list(now time.Time, ns, queue string, req engine.ListRequest) (engine.ListResult, error) {
	var res engine.ListResult
	from, skip := int64(math.MinInt64), 0
	if c, ok := strings.CutPrefix(req.Cursor, farCursor); ok {
		s, n, found := strings.Cut(c, ".")
		var err1, err2 error
		from, err1 = strconv.ParseInt(s, 10, 64)
		skip, err2 = strconv.Atoi(n)
		if !found || err1 != nil || err2 != nil || skip < 0 || !f.b.eng.HasQueue(ns, queue) {
			return res, &engine.Error{Code: engine.CodeBadRequest, Field: "cursor", Message: "not a cursor from a previous page of this listing"}
		}
		if req.Limit < 0 || req.Limit > engine.MaxListLimit {
			return res, &engine.Error{Code: engine.CodeBadRequest, Field: "limit", Message: fmt.Sprintf("must be between 1 and %d, got %d", engine.MaxListLimit, req.Limit)}
		}
	} else {
		var err error
		if res, err = f.b.eng.List(now, ns, queue, req); err != nil || res.NextCursor != "" {
			return res, err
		}
	}
	if !f.on || !farMayMatch(req.Filter) || f.b.eng.FarCount(ns, queue) == 0 {
		return res, nil
	}
	limit := req.Limit
	if limit == 0 {
		limit = engine.DefaultListLimit
	}
	q := ns + "\x00" + queue
	holds := func(bk *farBucket) bool { return bk.start >= from && bk.state != bucketDone && bk.queued(q) > 0 }
	buckets := f.sorted()
	for _, bk := range buckets {
		if !holds(bk) {
			continue
		}
		if len(res.Jobs) >= limit {
			// the page ended with the bucket before: continue at this one
			res.NextCursor = farCursor + strconv.FormatInt(bk.start, 10) + ".0"
			return res, nil
		}
		recs, err := f.readAll(bk, func(r *engine.Record) bool {
			return r.Job.Queue == queue && r.Job.NS == ns && hasTags(r.Job.Tags, req.Filter.Tags)
		})
		if err != nil {
			return res, farUnavailable(err)
		}
		n := 0
		if bk.start == from {
			n = min(skip, len(recs))
		}
		for ; n < len(recs) && len(res.Jobs) < limit; n++ {
			res.Jobs = append(res.Jobs, engine.ImageJob(&recs[n]))
		}
		if n < len(recs) {
			res.NextCursor = farCursor + strconv.FormatInt(bk.start, 10) + "." + strconv.Itoa(n)
			return res, nil
		}
	}
	return res, nil
}

// bringPut takes back the far job a put may be a duplicate of: the job with
// its client id, or the one its idempotency key names.
func (f *farStore) bringPut(now time.Time, ns, queue string, req *engine.PutRequest) error {
	if !f.on || len(f.buckets) == 0 {
		return nil
	}
	if err := f.bring(now, ns, queue, req.ID); err != nil {
		return err
	}
	if id, ok := f.b.eng.IdempotentID(ns, queue, req.IdempotencyKey); ok {
		return f.bring(now, ns, queue, id)
	}
	return nil
}
