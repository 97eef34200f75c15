package engine

// The job table is built so the garbage collector has nothing to scan in it
// (docs/architecture.md): fixed-size, pointer-free job records in chunked slabs,
// addressed by a uint32 slot. Everything a job needs on the hot path lives
// here; rarely used fields (tags, reply_to, cron, client ids, results, ...)
// live encoded in the ext arena (ext.go), paid for only by jobs that use them.

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
	fAttempt // a non-reserved job's attempt count is in Engine.attempts
)

// job is one slab entry: 56 bytes, no pointers, 4-byte aligned so no
// padding. seq and activate_at are 48-bit (seqNo, atMS): enough for 2^48
// puts and for activation times within ±4,000 years of 1970, which the put
// path refuses to exceed (MaxSeq, validate.go's time bounds). Fields most
// jobs of a queue share (queue, TTR, priority) are one interned class; the
// attempt count, zero until a job is first taken, lives with the
// reservation (resvInfo) while the job is reserved and in Engine.attempts
// afterwards (flag fAttempt), so a job never taken pays nothing for it.
type job struct {
	id      [16]byte // binary ULID when fULID
	seqLo   uint32   // enqueue order, low bits; also the beanstalkd id
	atLo    uint32   // activate_at, unix ms, low bits
	seqHi   uint16
	atHi    int16
	cls     uint32 // (queue, ttr, priority) class: Engine.jq, Engine.jttr, Engine.jprio
	key     uint32 // interned key id, 0 = none
	payload BlobRef
	hidx    uint32 // position in the heap the job's state puts it in
	tries   uint16
	state   State
	flags   uint8
}

// classKey is a job's (queue, TTR, priority) triple, interned in
// Engine.cls: the jobs of a queue mostly share its default TTR and one or
// a few priorities, so a record holds one 4-byte class instead of all three.
type classKey struct{ queue, ttr, prio uint32 }

// jq is the index of the job's queue.
func (e *Engine) jq(j *job) uint32 { return e.cls.keys[j.cls].queue }

// jttr is the job's TTR in ms.
func (e *Engine) jttr(j *job) uint32 { return e.cls.keys[j.cls].ttr }

// jprio is the job's priority.
func (e *Engine) jprio(j *job) uint32 { return e.cls.keys[j.cls].prio }

// setClass gives a job its queue, TTR and priority; had says it held a
// class. A job in a heap ordered by priority must not change priority
// (unplace it first).
func (e *Engine) setClass(j *job, queue, ttr, prio uint32, had bool) {
	k := classKey{queue, ttr, prio}
	if had && e.cls.keys[j.cls] == k {
		return
	}
	id := e.cls.ref(k)
	if had {
		e.cls.unref(j.cls)
	}
	j.cls = id
}

// attempt is how many times the job in slot has been taken.
func (e *Engine) attempt(slot uint32) uint32 {
	j := e.jobs.get(slot)
	if j.state == StateReserved {
		return e.resv[slot].attempt
	}
	if j.flags&fAttempt != 0 {
		return e.attempts[slot]
	}
	return 0
}

// setAttempt records the attempt count of a job that is not reserved (a
// reserved job's count is in its resvInfo).
func (e *Engine) setAttempt(slot uint32, a uint32) {
	j := e.jobs.get(slot)
	switch {
	case a != 0:
		e.attempts[slot] = a
		j.flags |= fAttempt
	case j.flags&fAttempt != 0:
		delete(e.attempts, slot)
		j.flags &^= fAttempt
	}
}

// MaxSeq is the largest enqueue sequence number a job record holds.
const MaxSeq = 1<<48 - 1

func (j *job) seqNo() uint64 { return uint64(j.seqHi)<<32 | uint64(j.seqLo) }

func (j *job) setSeq(v uint64) { j.seqLo, j.seqHi = uint32(v), uint16(v>>32) }

func (j *job) atMS() int64 { return int64(j.atHi)<<32 | int64(j.atLo) }

func (j *job) setAt(v int64) { j.atLo, j.atHi = uint32(v), int16(v>>32) }

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
	nonce uint64 // the receipt
	until int64  // deadline, unix ms
	ttr   uint32 // effective TTR of this reservation, ms
	// attempt counts the takes including this one (kept here rather than
	// in the job record, see job)
	attempt uint32
	origAt  int64
}

type slab struct {
	chunks [][]job
	free   []uint32
	next   uint32 // slots below next have been handed out at least once
	live   int
	// limit, while the slab shrinks (shrink.go), is the slot count it
	// shrinks to: the free list holds only slots below it, and a slot at or
	// above it that is released is not reused (its job has moved or gone).
	// 0: not shrinking.
	limit uint32
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
	if s.limit == 0 || slot < s.limit {
		s.free = append(s.free, slot)
	}
	s.live--
}
