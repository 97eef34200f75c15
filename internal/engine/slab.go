package engine

// The job table is built so the garbage collector has nothing to scan in it
// (docs/architecture.md): fixed-size, pointer-free job records in chunked slabs,
// addressed by a uint32 slot. Everything a job needs on the hot path lives
// here; rarely used fields (tags, reply_to, cron, client ids, results, ...)
// live in the ext map, paid for only by jobs that use them.

const (
	chunkBits = 16
	chunkSize = 1 << chunkBits
	noSlot    = ^uint32(0)
)

// job flags.
const (
	fULID        uint8 = 1 << iota // id is the ULID in job.id; else ext.clientID
	fPayloadJSON                   // payload answered as JSON
	fHasExt                        // an ext entry exists
	fBuried                        // dead by bury, not by running out of tries
	fHasResult                     // completed with a result
	fResultJSON
)

// job is one slab entry: 72 bytes, no pointers.
type job struct {
	id      [16]byte // binary ULID when fULID
	seq     uint64   // enqueue order; also the beanstalkd id
	at      int64    // activate_at, unix ms
	prio    uint32
	ttr     uint32 // ms
	queue   uint32 // index into Engine.queues
	key     uint32 // interned key id, 0 = none
	payload BlobRef
	hidx    uint32 // position in the heap the job's state puts it in
	attempt uint32
	tries   uint16
	state   State
	flags   uint8
}

// jobExt holds what most jobs do not have.
type jobExt struct {
	clientID     string
	created      int64 // for client-id jobs (ULIDs carry their own time)
	expire       int64 // TTL deadline, 0 = none
	tags         []string
	replyTo      string
	cron         string
	notify       string // channel that gets the job's lifecycle events
	lastError    string
	result       BlobRef
	retainResult int64 // ms; the job keeps its result at least this long (call)
	retainUntil  int64 // completed: when the job goes away

	timeouts, releases, buries, kicks uint32 // beanstalkd's stats-job counters
}

func (x *jobExt) empty() bool {
	return x.clientID == "" && x.expire == 0 && len(x.tags) == 0 && x.replyTo == "" &&
		x.cron == "" && x.notify == "" && x.lastError == "" && x.retainResult == 0 && x.retainUntil == 0 &&
		x.result == (BlobRef{}) && x.timeouts == 0 && x.releases == 0 && x.buries == 0 && x.kicks == 0
}

// resvInfo is the state of one reservation; only reserved jobs have one.
type resvInfo struct {
	nonce  uint64 // the receipt
	until  int64  // deadline, unix ms
	ttr    uint32 // effective TTR of this reservation, ms
	origAt int64
}

type slab struct {
	chunks [][]job
	free   []uint32
	next   uint32 // slots below next have been handed out at least once
	live   int
}

func (s *slab) get(slot uint32) *job {
	return &s.chunks[slot>>chunkBits][slot&(chunkSize-1)]
}

func (s *slab) alloc() uint32 {
	s.live++
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	slot := s.next
	if int(slot>>chunkBits) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]job, chunkSize))
	}
	s.next++
	return slot
}

func (s *slab) release(slot uint32) {
	*s.get(slot) = job{}
	s.free = append(s.free, slot)
	s.live--
}
