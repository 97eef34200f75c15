// Package engine is chronoq's state machine: namespaces, queues, jobs and
// every rule of what a queue does. It has no goroutines, no I/O and no
// clock: every call receives `now`, and every change is expressed as an
// Entry of records that the caller's Sink logs before the engine applies it
// (see record.go). Time-derived transitions — delayed→ready, reservation
// expiry, TTL, retention — are computed from timestamps whenever a call
// arrives (advance.go), so replaying the log at the records' own times
// rebuilds exactly the same state.
//
// An Engine is not safe for concurrent use: one goroutine (the broker's
// loop) owns it.
package engine

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/robfig/cron/v3"
)

// Sink logs an entry before the engine applies it. Append encodes ent,
// buffers it for the next durable write and calls ent.Locate with the
// position its bytes will have, so inline blobs get their references. An
// error means nothing was logged; the engine then changes nothing and
// returns the error.
type Sink interface {
	Append(ent *Entry) error
}

// Options configures a new Engine.
type Options struct {
	Sink Sink
	// Seed seeds the jitter source and the 32 random bits of server job
	// ids (idtable.go); 0 picks a random seed. Either only matters when a
	// command is decided, never on replay: the chosen activation time and
	// id are in the record.
	Seed uint64
	// Entropy feeds the random half of receipts; nil uses crypto/rand.
	// Tests pass a seeded source.
	Entropy io.Reader
	// OnFirstTake, when set, is told how long each job waited between its
	// activation and its first delivery (the produce→consume latency).
	OnFirstTake func(ns, queue string, waited time.Duration)
	// ReserveLimit is the most jobs a snapshot's sizing hint may reserve
	// room for; the loader sets it from the snapshot's size, since a hint
	// read from disk must not be able to make the process allocate
	// without bound. 0 ignores hints.
	ReserveLimit int
}

// DefaultNamespace always exists.
const DefaultNamespace = "default"

type namespace struct {
	name   string
	cfg    NamespaceConfig
	queues map[string]uint32
}

type queue struct {
	idx         uint32
	ns          *namespace
	name        string
	cfg         QueueConfig
	paused      bool
	pausedUntil int64 // a timed pause (beanstalkd pause-tube) ends by itself
	created     int64
	counts      Counts
	ready       readySet
	dead        slotHeap // bySeq
	chains      map[uint32]*chain
	stats       QueueStats
	lists       queueLists // listing indexes (listindex.go)
	tgt         target     // see target
}

type token struct {
	ns   string
	desc string
}

// Engine is the state machine. Create it with New.
type Engine struct {
	now int64
	// resvBase is what reservation deadlines count from: the current
	// command's time rounded up to the millisecond (now is rounded down).
	// A client sees a reservation start no earlier than the real time, so
	// a deadline from the rounded-down one would end up to 1 ms before
	// its TTR has passed for the client (an early DEADLINE_SOON, an early
	// expiry); rounded up it ends no earlier than that.
	resvBase int64
	sink     Sink

	jobs slab
	ids  slotTable[idHasher]
	exts extStore
	resv map[uint32]resvInfo
	// attempts holds the attempt count of jobs that were taken and are no
	// longer reserved (flag fAttempt; slab.go)
	attempts map[uint32]uint32

	nss    map[string]*namespace
	queues []*queue // by index; nil once deleted

	delayed   slotHeap                   // all pending jobs whose activation is in the future
	bulk      bulkLoad                   // a snapshot load's delayed jobs not yet in heap order (snapchunk.go)
	hints     struct{ tags, perTag int } // a snapshot's tag counts for its bulk load (loadhints.go)
	reserved  timeHeap                   // by reservation deadline
	completed timeHeap                   // by retention end
	ttl       ttlHeap                    // lazily validated TTL deadlines
	idem      map[string]idemEnt
	idemQ     idemHeap
	pauses    []uint32 // queues with a timed pause (few; scanned)
	seqs      seqIndex // enqueue sequence number → slot (seqtable.go)

	keys     refTable[string]   // key strings of per-key FIFO
	cls      refTable[classKey] // (queue, TTR, priority) classes of job records (slab.go)
	tagIndex map[string]map[uint32]struct{}

	seq   uint64 // last enqueue sequence number handed out
	nonce uint64 // last reservation number handed out

	rng      *mrand.Rand
	random   io.Reader // Options.Entropy itself: receipt nonces
	nonceBuf []byte
	crons    map[string]cron.Schedule
	tokens   map[string]token // by token hash

	stats        Stats
	live         map[uint32]int64 // segment → bytes of live payloads and results
	liveN        map[uint32]int64 // segment → count of those payloads and results
	onFirstTake  func(ns, queue string, waited time.Duration)
	ent          Entry     // scratch entry for the command being decided
	plans        []planned // scratch for putMany
	dirty        map[uint32]struct{}
	tmp          []uint32
	events       eventLog
	reserveLimit int
	maxJobs      uint64 // 0: no limit (SetMaxJobs)
	chans        map[chanKey]*durableChan
	// visited counts the jobs read by queue stats and listings, so tests
	// can hold them to O(priorities) and O(page) at any queue size.
	visited uint64
	// idPivot is the id of a listing's cursor while it seeks in an id
	// index (listindex.go)
	idPivot string
	far     farState // far.go
	// walks counts the snapshot walks under way (snapshot.go), which the
	// job table must not shrink under
	walks int
	// refits is the next kind of table a finished shrink rebuilds, 0:
	// none (shrink.go)
	refits int
}

// New returns an empty engine holding only the default namespace.
func New(opts Options) *Engine {
	seed := opts.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	ent := opts.Entropy
	if ent == nil {
		ent = rand.Reader
	}
	e := &Engine{
		sink:     opts.Sink,
		ids:      newIDTable(),
		exts:     newExtStore(),
		resv:     make(map[uint32]resvInfo),
		attempts: make(map[uint32]uint32),
		nss:      make(map[string]*namespace),
		delayed:  slotHeap{ord: byActivation},
		idem:     make(map[string]idemEnt),
		keys:     newRefTable[string](),
		cls:      newRefTable[classKey](),
		tagIndex: make(map[string]map[uint32]struct{}),
		rng:      mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		random:   ent,
		crons:    make(map[string]cron.Schedule),
		tokens:   make(map[string]token),
		dirty:    make(map[uint32]struct{}),
		live:     make(map[uint32]int64),
		liveN:    make(map[uint32]int64),
		chans:    make(map[chanKey]*durableChan),

		onFirstTake:  opts.OnFirstTake,
		reserveLimit: opts.ReserveLimit,
	}
	e.seqs.init()
	e.nss[DefaultNamespace] = &namespace{name: DefaultNamespace, cfg: NamespaceConfig{AutoCreateQueues: true}, queues: map[string]uint32{}}
	return e
}

// SetMaxJobs bounds the jobs the engine holds in any state: a put that
// would go beyond is refused (CodeQueueFull) instead of growing the
// process until the kernel kills it. Replay is never refused, so a lower
// limit than the jobs already held only stops new puts. 0: no limit.
func (e *Engine) SetMaxJobs(n uint64) { e.maxJobs = n }

// SetSink replaces the sink (the broker installs the log after replay).
func (e *Engine) SetSink(s Sink) { e.sink = s }

// Now is the engine's current time: the latest time it has been given.
func (e *Engine) Now() time.Time { return time.UnixMilli(e.now).UTC() }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// ceilMS is t in unix milliseconds, rounded up.
func ceilMS(t time.Time) int64 {
	v := t.UnixMilli()
	if t.After(time.UnixMilli(v)) {
		v++
	}
	return v
}

// commit logs the scratch entry and applies it. On a sink error nothing
// changes.
func (e *Engine) commit() error {
	if len(e.ent.Records) == 0 {
		return nil
	}
	if e.sink != nil {
		if err := e.sink.Append(&e.ent); err != nil {
			return err
		}
	}
	e.noteRecords()
	e.applyRecords(&e.ent)
	e.publishEvents()
	return nil
}

// begin advances time and readies the scratch entry for a new command.
func (e *Engine) begin(now time.Time) {
	e.Advance(now)
	e.resvBase = max(e.now, ceilMS(now))
	e.ent.reset(e.now)
	e.events.reset()
}

// TakeDirty calls fn for every queue that gained ready jobs (or was resumed)
// since the last call, so the broker can wake the waiters parked on it.
func (e *Engine) TakeDirty(fn func(ns, queue string)) {
	for qi := range e.dirty {
		if q := e.queueAt(qi); q != nil {
			fn(q.ns.name, q.name)
		}
		delete(e.dirty, qi)
	}
}

func (e *Engine) queueAt(i uint32) *queue {
	if int(i) < len(e.queues) {
		return e.queues[i]
	}
	return nil
}

func (e *Engine) findNS(name string) (*namespace, error) {
	ns := e.nss[name]
	if ns == nil {
		return nil, errf(CodeNamespaceNotFound, "namespace %q not found", name)
	}
	return ns, nil
}

func (e *Engine) findQueue(nsName, qName string) (*queue, error) {
	ns, err := e.findNS(nsName)
	if err != nil {
		return nil, err
	}
	qi, ok := ns.queues[qName]
	if !ok {
		return nil, errf(CodeQueueNotFound, "queue %q not found in namespace %q", qName, nsName)
	}
	return e.queues[qi], nil
}

func (e *Engine) findJob(nsName, qName, id string) (*queue, uint32, error) {
	q, err := e.findQueue(nsName, qName)
	if err != nil {
		return nil, noSlot, err
	}
	k := makeIDKey(id)
	slot := e.idLookup(q.idx, &k)
	if slot == noSlot {
		return q, noSlot, errf(CodeJobNotFound, "job %q not found in queue %q", id, qName)
	}
	return q, slot, nil
}

// jobID renders the id of the job in slot.
func (e *Engine) jobID(slot uint32) string {
	j := e.jobs.get(slot)
	if j.flags&fULID != 0 {
		return ulid.ULID(j.id).String()
	}
	return strings.Clone(e.exts.clientID(slot))
}

func (e *Engine) created(slot uint32) int64 {
	if x, _ := e.ext(slot); x.created != 0 {
		return x.created
	}
	j := e.jobs.get(slot)
	if j.flags&fULID != 0 {
		return int64(ulid.ULID(j.id).Time())
	}
	return 0
}

func (e *Engine) cronSchedule(spec string) (cron.Schedule, error) {
	if s, ok := e.crons[spec]; ok {
		return s, nil
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if len(e.crons) > 4096 {
		clear(e.crons)
	}
	e.crons[strings.Clone(spec)] = s // spec may point into the rare-field arena (ext.go)
	return s, nil
}

// refTable hands out small ids for values many jobs share (key strings,
// (queue, TTR) classes), with reference counts so that unused values are
// forgotten and their ids reused. Id 0 is never handed out: a zero id in a
// freed or keyless record means nothing.
type refTable[K comparable] struct {
	ids  map[K]uint32
	keys []K // by id
	refs []uint32
	free []uint32
}

func newRefTable[K comparable]() refTable[K] {
	var zero K
	return refTable[K]{ids: map[K]uint32{}, keys: []K{zero}, refs: []uint32{0}}
}

func (t *refTable[K]) ref(k K) uint32 {
	if id, ok := t.ids[k]; ok {
		t.refs[id]++
		return id
	}
	var id uint32
	if n := len(t.free); n > 0 {
		id = t.free[n-1]
		t.free = t.free[:n-1]
		t.keys[id], t.refs[id] = k, 1
	} else {
		id = uint32(len(t.keys))
		t.keys = append(t.keys, k)
		t.refs = append(t.refs, 1)
	}
	t.ids[k] = id
	return id
}

func (t *refTable[K]) unref(id uint32) {
	if id == 0 {
		return
	}
	t.refs[id]--
	if t.refs[id] == 0 {
		var zero K
		delete(t.ids, t.keys[id])
		t.keys[id] = zero
		t.free = append(t.free, id)
	}
}

// Stats counts what the engine did since it was created (replay included).
type Stats struct {
	Put, Taken, Acked, Nacked, Dead, Expired, Cancelled uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return e.stats }

// ResetStats zeroes every counter (after recovery, so counters count what
// this process did, not what replay re-did).
func (e *Engine) ResetStats() {
	e.stats = Stats{}
	for _, q := range e.queues {
		if q != nil {
			q.stats = QueueStats{}
		}
	}
}

// SetOnFirstTake installs the produce→consume latency hook.
func (e *Engine) SetOnFirstTake(fn func(ns, queue string, waited time.Duration)) { e.onFirstTake = fn }
