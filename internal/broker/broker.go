// Package broker is the only path into the engine. One goroutine, the loop,
// owns the engine and the log (docs/architecture.md): it blocks for one request, drains
// whatever else is pending, runs each against the engine (which appends its
// records to the log buffer), serves parked waiters the batch made ready,
// then does one write and one fdatasync, and only then answers everyone.
// No client hears about a state a crash could lose, batches form by
// themselves under load, and log order is apply order.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// Options configures a broker.
type Options struct {
	Dir    string // data directory (wal/, snap/, LOCK)
	WAL    wal.Options
	Logger *slog.Logger
	// Clock returns the current time; tests may replace it.
	Clock func() time.Time
	// SnapshotBytes triggers a snapshot after this much log growth
	// (default 1 GiB); SnapshotInterval after this much time with changes
	// (default 10 minutes).
	SnapshotBytes    int64
	SnapshotInterval time.Duration
	// MaxBatch bounds how many requests one loop turn drains.
	MaxBatch int
	// MaxJobs bounds the jobs the node holds (engine.SetMaxJobs); 0: none.
	MaxJobs uint64
	// Observer, when set, is told about commits, snapshots and latencies
	// (the metrics package implements it).
	Observer Observer
	// Cluster, when set, makes the broker a raft member (cluster.go);
	// nil is the single-node mode, with no raft in its path.
	Cluster *ClusterOptions
	// FarHorizon moves delayed jobs due further ahead than this out of
	// memory into bucket files (far.go); 0: off.
	FarHorizon time.Duration
	// ScrubRate bounds the bytes per second the background check of the
	// log segments before the snapshot reads (scrub.go); 0: the default
	// (64 MiB/s), negative: no scrub (a segment is then checked by the
	// first payload read from it).
	ScrubRate int64
	// ReclaimRate bounds the bytes per second of old log segments and
	// pruned snapshots removed, so that freeing disk space does not stall
	// the log's fdatasyncs on a filesystem that discards freed blocks
	// (reclaim.go); 0: the default (32 MiB/s), negative: at once. The
	// pace rises with the log's own write rate and is off while the disk
	// is short of space.
	ReclaimRate int64
}

// Observer receives the broker's measurements.
type Observer interface {
	Commit(entries, bytes int, d time.Duration)
	Snapshot(d time.Duration)
	// SnapshotRunning says a snapshot began (true) or ended, written or
	// not (false), so a scrape can tell a quiet node from one writing one.
	SnapshotRunning(on bool)
	FirstTake(ns, queue string, waited time.Duration)
	Lateness(d time.Duration)
	Publication()
}

type nopObserver struct{}

func (nopObserver) Commit(int, int, time.Duration)          {}
func (nopObserver) Snapshot(time.Duration)                  {}
func (nopObserver) SnapshotRunning(bool)                    {}
func (nopObserver) FirstTake(string, string, time.Duration) {}
func (nopObserver) Lateness(time.Duration)                  {}
func (nopObserver) Publication()                            {}

// Broker runs the loop. Create it with Open.
type Broker struct {
	opts   Options
	log    *wal.Log
	eng    *engine.Engine
	lg     *slog.Logger
	clock  func() time.Time
	unlock func() error

	reqs     chan *request
	stop     chan struct{}
	done     chan struct{}
	closing  atomic.Bool
	draining atomic.Bool
	drained  chan struct{} // closed by Drain: long-polls off the loop end
	ready    atomic.Bool
	failed   atomic.Pointer[error]

	sink     logSink
	syncQ    chan syncItem // pipelined commit (always policy); nil otherwise
	syncDone chan struct{}
	// syncIdle holds the commit token under the always policy: the loop
	// takes it before a turn, hands it to the syncer with the turn's
	// written batch, and the syncer puts it back once that batch is
	// durable and answered. While a sync is in flight the loop leaves new
	// requests queued instead of running each as it arrives: their
	// answers could not go out before the next fdatasync anyway, and one
	// turn for all of them costs one wake-up, one write(2) and one pass
	// over the timers instead of one per request. This was adaptive once
	// (only from 16 requests per sync on); waiting always measured 5–15 %
	// less server CPU per request at 8 and 64 connections and the same at
	// one (docs/benchmarks.md, "The loop always waits out the sync").
	syncIdle chan struct{}
	// beforeSync, when set (tests), runs in the syncer before each
	// fdatasync.
	beforeSync atomic.Pointer[func()]
	waiters    waiters
	snap       snapshotter
	compact    compactor
	chans      channels
	far        farStore

	skipFinalSnapshot bool // tests: close like a crash would, leaving a log tail

	recovered wal.RecoveryReport // what recovery found, for retireDamaged
	retiring  sync.Map           // damaged ranges being dead-lettered
	scrub     scrubber           // background check of old segments (scrub.go)

	tokMu  sync.RWMutex
	tokens map[string]string // token hash → namespace (a copy readable off-loop)
	// onTokens, when set, learns of every change to the token table (the
	// real-time server closes connections of revoked tokens).
	onTokens atomic.Pointer[func()]

	cl *clusterState // nil in single-node mode
}

// request is one unit of work for the loop. fn runs on the loop (or, for
// a put, put says what to put); the answer is delivered after the batch
// is durable.
type request struct {
	fn   func(now time.Time) (any, error)
	res  any
	err  error
	done chan struct{} // receives one value: the answer is ready
	// park, when set by fn, keeps the request unanswered: a waiter owns it.
	park bool
	// answered guards done: a take can park and be served in one turn, so
	// it shows up both in the batch and among the served waiters.
	answered bool
	// put, when on, is the request's put: carried by value, so a put needs
	// no closure and no boxed result.
	put putArgs
}

type putArgs struct {
	on    bool
	ns, q string
	req   engine.PutRequest
	res   engine.PutResult
}

// requests are recycled, as a request per command is most of a put's
// allocations. Only a request whose sender always waits for its answer and
// that never parks goes back (see release): a parked one is still known
// to the waiters.
var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest() *request { return requests.Get().(*request) }

// release recycles r once its sender has read the answer: by then the loop
// and the syncer are done with it.
func (r *request) release() {
	*r = request{done: r.done}
	requests.Put(r)
}

// run executes the request on the loop.
func (r *request) run(b *Broker, now time.Time) {
	if r.put.on {
		r.put.res, r.err = b.putNow(now, &r.put)
		return
	}
	r.res, r.err = r.fn(now)
}

func (r *request) finish() {
	if !r.answered {
		r.answered = true
		r.done <- struct{}{}
	}
}

// slowCommit is when a commit is worth a warning: every request of the
// batch waited that long.
const slowCommit = 100 * time.Millisecond

var errClosed = &engine.Error{Code: engine.CodeUnavailable, Message: "server is shutting down"}

// Open locks the data directory, recovers state (newest valid snapshot,
// then the log after it) and starts the loop.
func Open(opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.SnapshotBytes == 0 {
		opts.SnapshotBytes = 1 << 30
	}
	if opts.SnapshotInterval == 0 {
		opts.SnapshotInterval = 10 * time.Minute
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 4096
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.WAL.Logger == nil {
		opts.WAL.Logger = opts.Logger
	}
	unlock, err := datadir.Lock(opts.Dir)
	if err != nil {
		return nil, err
	}
	// Older versions created data files readable by every local user.
	if n, err := datadir.Restrict(opts.Dir); err != nil {
		opts.Logger.Warn("data directory: could not make every data file private (mode 0600, folders 0700)", "dir", opts.Dir, "changed", n, "err", err)
	} else if n > 0 {
		opts.Logger.Info("data directory: removed group and other permissions from existing data files", "dir", opts.Dir, "changed", n)
	}
	b := &Broker{
		opts:    opts,
		lg:      opts.Logger,
		clock:   opts.Clock,
		unlock:  unlock,
		reqs:    make(chan *request, 1024),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		drained: make(chan struct{}),
		tokens:  map[string]string{},
	}
	if opts.Cluster != nil {
		if err := b.openCluster(); err != nil {
			unlock()
			return nil, err
		}
		b.ready.Store(true)
		go b.clusterLoop()
		return b, nil
	}
	if err := b.recover(); err != nil {
		unlock()
		return nil, err
	}
	if err := b.startChannels(); err != nil {
		b.log.Close()
		unlock()
		return nil, fmt.Errorf("broker: restore channel history: %w", err)
	}
	b.sink.b = b
	b.eng.SetSink(&b.sink)
	if err := b.retireDamaged(); err != nil {
		b.log.Close()
		unlock()
		return nil, err
	}
	b.eng.ResetStats()
	b.eng.SetOnFirstTake(opts.Observer.FirstTake)
	b.refreshTokens()
	b.ready.Store(true)
	if opts.WAL.Sync == wal.SyncAlways {
		b.syncQ = make(chan syncItem, 256)
		b.syncDone = make(chan struct{})
		b.syncIdle = make(chan struct{}, 1)
		b.syncIdle <- struct{}{}
		go b.syncer(b.syncQ)
	}
	go b.loop()
	b.startScrub()
	return b, nil
}

func (b *Broker) now() time.Time { return b.clock().UTC() }

// do runs fn on the loop and waits for its durable answer. A cancelled ctx
// stops the wait only for requests that have not run yet.
func (b *Broker) do(ctx context.Context, fn func(now time.Time) (any, error)) (any, error) {
	if b.closing.Load() {
		return nil, errClosed
	}
	r := newRequest()
	r.fn = fn
	if err := b.submit(ctx, r); err != nil {
		r.release()
		return nil, err
	}
	b.await(r)
	res, err := r.res, r.err
	r.release()
	return res, err
}

// await waits for the answer to r, which submit handed to the loop. A
// send can land in the queue after the loop's final drain (submit saw the
// broker running, then Close ran its shutdown before the send): once the
// loop is gone, such a request is refused here, so its sender does not
// wait forever — as a far-bucket rewrite did, and Close with it.
func (b *Broker) await(r *request) {
	select {
	case <-r.done:
	case <-b.done:
		b.refuseRequests()
		<-r.done
	}
}

// refuseRequests answers errClosed to every request still queued for the
// loop. Each is received by one goroutine, which alone answers it.
func (b *Broker) refuseRequests() {
	for {
		select {
		case r := <-b.reqs:
			r.res, r.err = nil, errClosed
			r.finish()
		default:
			return
		}
	}
}

// submit hands r to the loop, unless ctx ends or the broker stops first.
func (b *Broker) submit(ctx context.Context, r *request) error {
	// Most often the loop has room: asking ctx for its Done channel first
	// would allocate one per request. A stopping broker refuses first, as
	// the select below would not always (the queue has room after the
	// loop's last drain).
	select {
	case <-b.stop:
		return errClosed
	default:
	}
	select {
	case b.reqs <- r:
		return nil
	default:
	}
	select {
	case b.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return errClosed
	}
}

func (b *Broker) loop() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]*request, 0, b.opts.MaxBatch)
	for {
		batch = batch[:0]
		gated := false
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
			gated = b.syncIdle != nil
		case <-timer.C:
			// A turn the clock starts (a delayed job due, a long-poll
			// ending) runs at once: waiting out the sync in flight would
			// add a hand-off to its lateness and save nothing.
		case <-b.stop:
			b.shutdown()
			return
		}
		if gated {
			// Wait out the sync in flight (see syncIdle); what arrives
			// meanwhile joins this turn.
			<-b.syncIdle
		}
	drain:
		for len(batch) < cap(batch) {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		now := b.now()
		b.eng.Advance(now)
		for _, r := range batch {
			r.run(b, now)
		}
		answered := b.waiters.serve(b, now)
		b.queueEvents(now)
		b.far.step(now)
		b.snap.step(b)
		if b.snap.idle() && !b.far.draining() {
			b.compact.step(b)
		}
		b.commit(batch, answered, gated)
		b.far.handOut(now)
		b.resetTimer(timer, now)
	}
}

// commit makes the batch durable and answers it. A failed write or sync
// fails the log for good: the batch hears unavailable, and so does every
// later write, because memory is now ahead of the disk.
//
// Under the always policy the commit is pipelined: the loop writes the
// batch and hands its answers to the syncer goroutine, which answers them
// after the fdatasync that covers them, in order — read-only requests too,
// since they may have seen the effects of a batch not yet synced.
func (b *Broker) commit(batch []*request, parked []*request, token bool) {
	if b.syncQ != nil {
		b.commitPipelined(batch, parked, token)
		return
	}
	var err error
	if b.sink.pending {
		start := time.Now()
		err = b.log.Commit()
		b.observeCommit(b.sink.entries, b.sink.bytes, time.Since(start))
		b.sink.pending, b.sink.entries, b.sink.bytes = false, 0, 0
		if err != nil {
			b.fail(err)
		}
	}
	if out := b.takeOut(); err == nil {
		b.deliver(out)
	}
	answer := func(r *request) {
		if r.park || r.answered {
			return
		}
		if err != nil {
			r.res, r.err = nil, unavailable("write to the log failed: %v", err)
		}
		r.finish()
	}
	for _, r := range batch {
		answer(r)
	}
	for _, r := range parked {
		answer(r)
	}
}

func (b *Broker) observeCommit(entries, bytes int, took time.Duration) {
	b.opts.Observer.Commit(entries, bytes, took)
	if took > slowCommit {
		b.lg.Warn("slow log commit: the disk took long to write and fdatasync a batch", "took", took.Round(time.Millisecond).String(), "entries", entries, "bytes", bytes)
	}
}

// syncItem is a written batch waiting for its fdatasync.
type syncItem struct {
	reqs    []*request
	pubs    []outPub // delivered to the hub once durable, before the answers
	entries int
	bytes   int
	err     error         // the write failed
	barrier chan struct{} // closed once everything before it is durable
	token   bool          // carries the commit token (syncIdle) back
}

// commitPipelined writes the batch and queues it for the syncer; token
// says the loop holds the commit token, which goes along with it.
func (b *Broker) commitPipelined(batch []*request, parked []*request, token bool) {
	it := syncItem{entries: b.sink.entries, bytes: b.sink.bytes, pubs: b.takeOut()}
	if b.sink.pending {
		if err := b.log.Flush(); err != nil {
			b.fail(err)
			it.err = err
		}
		b.sink.pending, b.sink.entries, b.sink.bytes = false, 0, 0
	}
	for _, list := range [2][]*request{batch, parked} {
		for _, r := range list {
			if !r.park && !r.answered {
				r.answered = true // the syncer closes done
				it.reqs = append(it.reqs, r)
			}
		}
	}
	if len(it.reqs) > 0 || it.entries > 0 || len(it.pubs) > 0 {
		it.token = token
		b.syncQ <- it
		return
	}
	if token {
		b.syncIdle <- struct{}{}
	}
}

// syncer answers written batches after the fdatasync that covers them,
// taking every batch queued so far into one sync.
func (b *Broker) syncer(q <-chan syncItem) {
	defer close(b.syncDone)
	var group []syncItem
	for first := range q {
		group = append(group[:0], first)
	more:
		for {
			select {
			case it, ok := <-q:
				if !ok {
					break more
				}
				group = append(group, it)
			default:
				break more
			}
		}
		entries, bytes := 0, 0
		for _, it := range group {
			entries += it.entries
			bytes += it.bytes
		}
		var err error
		if p := b.failed.Load(); p != nil {
			err = *p
		} else if entries > 0 || hasBarrier(group) {
			if f := b.beforeSync.Load(); f != nil {
				(*f)()
			}
			start := time.Now()
			err = b.log.SyncWritten()
			b.observeCommit(entries, bytes, time.Since(start))
			if err != nil {
				b.fail(err)
			}
		}
		for _, it := range group {
			e := err
			if it.err != nil {
				e = it.err
			}
			if e == nil {
				b.deliver(it.pubs)
			}
			for _, r := range it.reqs {
				if e != nil {
					r.res, r.err = nil, unavailable("write to the log failed: %v", e)
				}
				r.done <- struct{}{}
			}
			if it.barrier != nil {
				close(it.barrier)
			}
			if it.token {
				b.syncIdle <- struct{}{}
			}
		}
	}
}

func hasBarrier(g []syncItem) bool {
	for _, it := range g {
		if it.barrier != nil {
			return true
		}
	}
	return false
}

// syncBarrier waits until everything written so far is durable (the loop
// calls it before a snapshot records the log position it starts from).
func (b *Broker) syncBarrier() {
	if b.syncQ == nil {
		return
	}
	done := make(chan struct{})
	b.syncQ <- syncItem{barrier: done}
	<-done
}

func (b *Broker) fail(err error) {
	if b.failed.CompareAndSwap(nil, &err) {
		b.lg.Error("log write failed: chronoq no longer accepts writes; restart after fixing the disk", "err", err)
	}
}

func unavailable(format string, args ...any) error {
	return &engine.Error{Code: engine.CodeUnavailable, Message: fmt.Sprintf(format, args...)}
}

func (b *Broker) resetTimer(t *time.Timer, now time.Time) {
	next := now.Add(time.Hour)
	if d, ok := b.eng.NextDeadline(); ok && d.Before(next) {
		next = d
	}
	if d, ok := b.waiters.nextDeadline(); ok && d.Before(next) {
		next = d
	}
	if d, ok := b.snap.nextDue(now); ok && d.Before(next) {
		next = d
	}
	if d, ok := b.far.nextDue(now); ok && d.Before(next) {
		next = d
	}
	if b.compact.busy() {
		next = now.Add(time.Millisecond)
	}
	wait := next.Sub(now)
	if wait < 0 {
		wait = 0
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(wait)
}

// Close shuts down gracefully: new requests are refused, waiters get empty
// answers, the log is synced and a final snapshot written.
func (b *Broker) Close() error {
	if !b.closing.CompareAndSwap(false, true) {
		<-b.done
		return nil
	}
	close(b.stop)
	<-b.done
	b.compact.warming.wait()
	b.snap.removing.wait()
	b.stopScrub()
	b.far.close()
	var errs []error
	if err := b.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("broker: close log: %w", err))
	}
	if err := b.unlock(); err != nil {
		errs = append(errs, fmt.Errorf("broker: unlock data dir: %w", err))
	}
	return errors.Join(errs...)
}

// refuseQueued answers every request still queued for the loop with
// errClosed and releases the long-poll waiters: the first step of either
// shutdown (single node or cluster member).
func (b *Broker) refuseQueued() {
	b.refuseRequests()
	b.waiters.releaseAll()
}

// shutdown runs on the loop when stopping: answer what is queued, release
// waiters, sync, snapshot.
func (b *Broker) shutdown() {
	now := b.now()
	b.refuseQueued()
	if b.syncQ != nil {
		close(b.syncQ)
		<-b.syncDone
		b.syncQ = nil // from here on the loop commits synchronously
	}
	if b.failed.Load() == nil {
		if err := b.log.Sync(); err != nil {
			b.lg.Error("final log sync failed", "err", err)
			return
		}
		if b.skipFinalSnapshot {
			return
		}
		if err := b.snap.final(b, now); err != nil {
			b.lg.Error("final snapshot failed", "err", err)
		}
	}
}

// Ready reports whether recovery is done and the log accepts writes.
func (b *Broker) Ready() error {
	if !b.ready.Load() {
		return unavailable("recovery in progress")
	}
	if p := b.failed.Load(); p != nil {
		return unavailable("log failed: %v", *p)
	}
	if b.cl != nil {
		if b.closing.Load() {
			return errClosed
		}
		return b.clusterReady()
	}
	if err := b.log.NoSpace(); err != nil {
		return unavailable("writes refused: %v", err)
	}
	if b.closing.Load() {
		return errClosed
	}
	return nil
}

func (b *Broker) walDir() string  { return filepath.Join(b.opts.Dir, "wal") }
func (b *Broker) snapDir() string { return filepath.Join(b.opts.Dir, "snap") }
func (b *Broker) farDir() string  { return filepath.Join(b.opts.Dir, "far") }

// Drain ends every long-poll with an empty answer and makes new ones answer
// at once; used at shutdown so in-flight requests finish promptly.
func (b *Broker) Drain() {
	if !b.draining.CompareAndSwap(false, true) || b.closing.Load() {
		return
	}
	close(b.drained)
	b.do(context.Background(), func(time.Time) (any, error) {
		b.waiters.releaseAll()
		return nil, nil
	})
}
