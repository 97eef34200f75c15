package engine

import (
	"time"
)

// The far-future store (docs/architecture.md) keeps jobs whose activation
// lies beyond a horizon out of memory, in bucket files the broker owns
// (internal/broker/far.go). The engine's part is pure:
//
//   - it notes every job placed as delayed beyond the horizon (placePending
//     calls noteFar), and FarOut hands those out: each is removed from the
//     slab and every index — as if it had never been put — once the
//     caller has accepted its image. Handing out is not logged: the job's
//     state does not change, only where it is kept;
//   - FarIn takes jobs back: each comes back as a KindFarIn record, logged
//     with its payload inline (the bucket holds the bytes, so a far job
//     pins no log segment) and naming its bucket, so a replay knows which
//     bucket no longer holds the job;
//   - a queue's delayed count includes its far jobs (AddFar).
//
// Only plain delayed jobs go out: a keyed job sits in its key's chain and a
// job with a TTL in the TTL heap, which both need the job in memory.

type farState struct {
	horizon int64 // ms; 0: nothing goes out
	cand    []farCand
	head    int               // cand[:head] were offered already (no shift per offer)
	count   map[uint32]uint64 // queue index → far jobs
	total   uint64            // far jobs of every queue (--max-jobs counts them)
}

type farCand struct {
	slot uint32 // where the job was; seq finds it if it moved (slotOf)
	seq  uint64
}

// FarJob is a job FarOut offers to the far store.
type FarJob struct {
	NS, Queue, ID string
	Seq           uint64
	At            int64 // activation, unix ms
	Tags          map[string]string
	Payload       BlobRef // where the payload is in the log (Len 0: none)
	img           JobImage
	cand          farCand
}

// Encode appends the job's bucket item: an encoded Entry holding the job's
// image as a KindJob record with the payload inline.
func (f *FarJob) Encode(dst []byte, payload []byte) []byte {
	img := f.img
	if payload != nil {
		img.Payload = inlineBlob(payload)
	}
	ent := Entry{Time: f.At, Records: []Record{{Kind: KindJob, Job: img}}}
	return ent.Encode(dst)
}

// SetFarHorizon makes delayed jobs due more than d ahead candidates for
// FarOut; 0 turns handing out off.
func (e *Engine) SetFarHorizon(d time.Duration) {
	e.far.horizon = d.Milliseconds()
	e.far.cand, e.far.head = nil, 0
	if d <= 0 {
		return
	}
	// Jobs placed before (a snapshot's, replay's) were not noted. They
	// are noted in slot order, which is about put order, so the far
	// store reads their payloads frame by frame in log order; the delayed
	// heap's order made each payload read its own ~200 KB batch frame
	// (half the loop's CPU draining 1.5 M jobs after a restart).
	e.forEachJob(func(slot uint32, j *job) {
		if j.state == StateDelayed {
			e.noteFar(slot)
		}
	})
}

// FarHorizon is the horizon set by SetFarHorizon.
func (e *Engine) FarHorizon() time.Duration { return time.Duration(e.far.horizon) * time.Millisecond }

func (e *Engine) noteFar(slot uint32) {
	if e.far.horizon <= 0 {
		return
	}
	j := e.jobs.get(slot)
	if j.key == 0 && j.atMS()-e.now > e.far.horizon {
		e.far.cand = append(e.far.cand, farCand{slot: slot, seq: j.seqNo()})
	}
}

// FarPending reports whether FarOut has candidates to look at.
func (e *Engine) FarPending() bool { return len(e.far.cand) > e.far.head }

// FarBacklog is how many candidates FarOut has to look at.
func (e *Engine) FarBacklog() int { return len(e.far.cand) - e.far.head }

// FarOffer returns up to max delayed jobs due beyond the horizon, without
// changing anything; FarTake then removes the ones the caller has stored.
// A job no longer eligible (taken back in, changed, deleted, or now within
// the horizon) is dropped from the candidates.
func (e *Engine) FarOffer(now time.Time, max int) []FarJob {
	e.Advance(now)
	var out []FarJob
	i := e.far.head
	for ; i < len(e.far.cand) && len(out) < max; i++ {
		c := e.far.cand[i]
		slot := e.farEligible(c)
		if slot == noSlot {
			continue
		}
		j := e.jobs.get(slot)
		q := e.queues[e.jq(j)]
		img := e.image(q, slot)
		fj := FarJob{NS: q.ns.name, Queue: q.name, ID: img.ID, Seq: img.Seq, At: img.At, Payload: j.payload, img: img, cand: c}
		if len(img.Tags) > 0 {
			fj.Tags = make(map[string]string, len(img.Tags)/2)
			for k := 0; k+1 < len(img.Tags); k += 2 {
				fj.Tags[img.Tags[k]] = img.Tags[k+1]
			}
		}
		// the image's strings may point into the rare-field arena, which
		// the removal frees for reuse
		fj.ID = string([]byte(fj.ID))
		fj.img.ID = fj.ID
		fj.img.Tags = cloneStrings(img.Tags)
		fj.img.ReplyTo, fj.img.Cron, fj.img.LastError, fj.img.Notify = string([]byte(img.ReplyTo)), string([]byte(img.Cron)), string([]byte(img.LastError)), string([]byte(img.Notify))
		out = append(out, fj)
	}
	// A backlog of millions is offered a few thousand at a time: moving
	// the rest down every turn would copy it all each time, so the
	// offered prefix is dropped only once it is the larger half.
	e.far.head = i
	switch {
	case i == len(e.far.cand):
		e.far.cand, e.far.head = e.far.cand[:0], 0
	case i > len(e.far.cand)/2:
		e.far.cand, e.far.head = append(e.far.cand[:0], e.far.cand[i:]...), 0
	}
	return out
}

// farEligible returns the candidate's slot if its job may still go out,
// else noSlot.
func (e *Engine) farEligible(c farCand) uint32 {
	if e.far.horizon <= 0 {
		return noSlot
	}
	slot := e.slotOf(c.slot, c.seq)
	if slot == noSlot {
		return noSlot
	}
	j := e.jobs.get(slot)
	if j.state != StateDelayed || j.key != 0 || j.atMS()-e.now <= e.far.horizon {
		return noSlot
	}
	if x, _ := e.ext(slot); x.expire != 0 {
		return noSlot
	}
	return slot
}

// FarTake removes from memory the offered jobs the caller has stored (in
// the same turn as FarOffer: nothing may have changed them in between). It
// returns how many left.
func (e *Engine) FarTake(jobs []FarJob) int {
	n := 0
	for i := range jobs {
		slot := e.farEligible(jobs[i].cand)
		if slot == noSlot {
			continue
		}
		q := e.queues[e.jq(e.jobs.get(slot))]
		e.deleteJob(q, slot)
		if e.far.count == nil {
			e.far.count = map[uint32]uint64{}
		}
		e.far.count[q.idx]++
		e.far.total++
		n++
	}
	return n
}

// FarOut is FarOffer and FarTake of the jobs accept stores.
func (e *Engine) FarOut(now time.Time, max int, accept func(*FarJob) bool) int {
	offer := e.FarOffer(now, max)
	kept := offer[:0]
	for i := range offer {
		if accept(&offer[i]) {
			kept = append(kept, offer[i])
		}
	}
	return e.FarTake(kept)
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string([]byte(v))
	}
	return out
}

// FarIn takes jobs back from bucket into memory: recs are the records of
// bucket items (KindJob images with the payload inline). Each is logged as
// a KindFarIn record and applied. A job whose queue is gone, or that is in
// memory already, is left out. It returns how many came back; the caller
// lowers the far counts (AddFar) for every job it took out of a bucket.
func (e *Engine) FarIn(now time.Time, bucket int64, recs []Record) (int, error) {
	e.begin(now)
	for i := range recs {
		r := &recs[i]
		if r.Kind != KindJob {
			continue
		}
		q := e.lookupQueue(r.Job.NS, r.Job.Queue)
		if q == nil {
			continue
		}
		k := makeIDKey(r.Job.ID)
		if e.idLookup(q.idx, &k) != noSlot {
			continue
		}
		out := e.ent.add()
		*out = *r
		out.Kind, out.FarBucket = KindFarIn, bucket
	}
	n := len(e.ent.Records)
	if err := e.commit(); err != nil {
		return 0, err
	}
	return n, nil
}

// AddFar changes a queue's count of far jobs (the broker: jobs that left a
// bucket, or the counts of buckets found at recovery).
func (e *Engine) AddFar(ns, queue string, delta int64) {
	q := e.lookupQueue(ns, queue)
	if q == nil {
		return
	}
	if e.far.count == nil {
		e.far.count = map[uint32]uint64{}
	}
	old := e.far.count[q.idx]
	v := max(int64(old)+delta, 0)
	e.far.total = e.far.total - old + uint64(v)
	if v == 0 {
		delete(e.far.count, q.idx)
		return
	}
	e.far.count[q.idx] = uint64(v)
}

// FarTotal is how many jobs of every queue are in the far store.
func (e *Engine) FarTotal() uint64 { return e.far.total }

// FarCount is how many of a queue's jobs are in the far store.
func (e *Engine) FarCount(ns, queue string) uint64 {
	if q := e.lookupQueue(ns, queue); q != nil {
		return e.far.count[q.idx]
	}
	return 0
}

// HasJob reports whether a job is in memory.
func (e *Engine) HasJob(ns, queue, id string) bool {
	q := e.lookupQueue(ns, queue)
	if q == nil {
		return false
	}
	k := makeIDKey(id)
	return e.idLookup(q.idx, &k) != noSlot
}

// HasSeq reports whether the job with enqueue sequence number seq is in
// memory.
func (e *Engine) HasSeq(seq uint64) bool { return e.seqLookup(seq) != noSlot }

// HasQueue reports whether a queue exists.
func (e *Engine) HasQueue(ns, queue string) bool { return e.lookupQueue(ns, queue) != nil }

// farCounts adds far jobs to a queue's delayed count.
func (e *Engine) farCounts(q *queue, c *Counts) { c.Delayed += e.far.count[q.idx] }

// ImageJob turns a bucket item's record into the Job that peek answers,
// without taking it in (for listings of far jobs).
func ImageJob(r *Record) Job {
	img := &r.Job
	j := Job{ID: img.ID, Seq: img.Seq, Namespace: img.NS, Queue: img.Queue, State: StateDelayed,
		PayloadJSON: img.Flags&fPayloadJSON != 0, Priority: img.Prio, Key: img.Key,
		CreatedAt: fromMS(img.Created), ActivateAt: fromMS(img.At), TTR: time.Duration(img.TTR) * time.Millisecond,
		Tries: img.Tries, Attempt: img.Attempt, LastError: img.LastError, ReplyTo: img.ReplyTo, Cron: img.Cron, Notify: img.Notify,
		Timeouts: img.Timeouts, Releases: img.Releases, Buries: img.Buries, Kicks: img.Kicks}
	if len(img.Tags) > 0 {
		j.Tags = make(map[string]string, len(img.Tags)/2)
		for k := 0; k+1 < len(img.Tags); k += 2 {
			j.Tags[img.Tags[k]] = img.Tags[k+1]
		}
	}
	if img.Payload.Data != nil {
		j.Data = img.Payload.Data
	}
	return j
}

// IdempotentID is the id of the job an idempotency key of a queue names
// while it is remembered (so the broker can take that job back before a put
// that repeats the key).
func (e *Engine) IdempotentID(ns, queue, key string) (string, bool) {
	if key == "" {
		return "", false
	}
	ie, ok := e.idem[idemMapKey(ns, queue, key)]
	if !ok || ie.expire <= e.now {
		return "", false
	}
	return ie.id, true
}

// FarKickShort is how many of the n jobs a kick of the queue would move
// must come from the far store: a kick moves dead jobs when the queue has
// any, else its soonest delayed ones, and the far jobs are due after the
// delayed jobs in memory (they went out for being due beyond the horizon).
// A delayed job in memory that is due even later (a keyed one, one with a
// TTL) counts as sooner.
func (e *Engine) FarKickShort(ns, queue string, n int) int {
	q := e.lookupQueue(ns, queue)
	if q == nil || n <= 0 || len(q.dead.s) > 0 || e.far.count[q.idx] == 0 {
		return 0
	}
	return max(n-int(q.counts.Delayed), 0)
}
