package engine

import (
	"fmt"
	"time"
)

// More operations for the beanstalkd protocol, where its rules differ from
// the native API's in ways the protocol cannot express with the calls
// above: a reserve picks the most urgent job across all watched tubes, a
// release puts a job back where it stood in the ready order, and the peek
// commands look at one end of a state without listing the queue.

// TakeBest reserves the single most urgent ready job across the listed
// queues (serving order compared across queues, as beanstalkd compares the
// heads of all watched tubes), or nothing. Take instead drains the queues
// in the order given, which would hand out a less urgent job from an
// earlier tube.
func (e *Engine) TakeBest(now time.Time, ns string, queues []string) ([]Job, error) {
	e.Advance(now)
	nsObj, err := e.findNS(ns)
	if err != nil {
		return nil, err
	}
	best, bestName := noSlot, ""
	var bestQ *queue
	for _, name := range queues {
		qi, ok := nsObj.queues[name]
		if !ok {
			continue
		}
		q := e.queues[qi]
		if q.paused || len(q.ready.s) == 0 {
			continue
		}
		// Heaps of different queues share one order, so comparing their
		// heads with either heap's order is sound.
		if head := q.ready.s[0]; best == noSlot || e.less(&q.ready, head, best) {
			best, bestName, bestQ = head, name, q
		}
	}
	if bestQ == nil {
		return nil, nil
	}
	return e.Take(now, ns, TakeRequest{Queues: []string{bestName}, Max: 1})
}

// ReleaseRequest gives a reservation back the beanstalkd way.
type ReleaseRequest struct {
	Receipt  string
	Priority *uint32 // nil keeps the job's priority
	Delay    time.Duration
	// Silent releases without counting a release: beanstalkd does not
	// count the releases of jobs whose connection went away.
	Silent bool
}

// Release is Nack with beanstalkd's ordering: released without a delay,
// the job takes back its place among the ready jobs (beanstalkd orders
// them by priority, then id) instead of queueing behind every job that
// became ready while it ran. It answers the job's resulting state: ready,
// delayed, dead (its tries ran out) or StateGone (its TTL passed).
func (e *Engine) Release(now time.Time, ns, qn, id string, req ReleaseRequest) (State, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return 0, err
	}
	if err := e.checkReceipt(slot, id, req.Receipt, false); err != nil {
		return 0, err
	}
	if err := checkDuration("delay", req.Delay, MaxDelay); err != nil {
		return 0, err
	}
	img := e.image(q, slot) // At is the activation time the reservation began from
	img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
	if !req.Silent {
		img.Releases++
	}
	if req.Priority != nil {
		img.Prio = *req.Priority
	}
	r := e.ent.add()
	switch {
	case img.Expire != 0 && img.Expire <= e.now:
		r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, id
	case img.Tries > 0 && img.Attempt >= img.Tries:
		img.Phase = phaseDead
		img.Flags &^= fBuried
		if img.LastError == "" {
			img.LastError = fmt.Sprintf("released on the last of %d tries", img.Tries)
		}
		r.Kind, r.Job = KindJob, img
	default:
		img.Phase = phasePending
		if req.Delay > 0 {
			img.At = e.now + req.Delay.Milliseconds()
		} else {
			// Creation times grow with sequence numbers, so activating at
			// the creation time sorts the job by id among its priority.
			img.At = min(img.At, img.Created)
		}
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	e.stats.Nacked++
	q.stats.Nacked++
	if e.ent.Records[0].Kind == KindJobDelete {
		e.stats.Expired++
		q.stats.Expired++
		return StateGone, nil
	}
	s := e.jobs.get(slot).state
	if s == StateDead {
		e.stats.Dead++
		q.stats.Dead++
	}
	return s, nil
}

// KickBounded is Kick with n cut to the number of jobs that could move:
// clients kick "everything" with a bound of 2^32-1, and Kick sizes its
// work by n.
func (e *Engine) KickBounded(now time.Time, ns, qn string, n int) (int, error) {
	e.Advance(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	avail := len(q.dead.s)
	if avail == 0 {
		avail = int(q.counts.Delayed)
	}
	return e.Kick(now, ns, qn, min(n, avail))
}

// PeekState returns the job at the head of one state of a queue: the next
// ready job in serving order, the delayed job that activates first, or
// the dead job with the lowest sequence number. Listing would visit every
// job of the engine to find one.
func (e *Engine) PeekState(now time.Time, ns, qn string, state State) (Job, error) {
	e.Advance(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return Job{}, err
	}
	slot := noSlot
	switch state {
	case StateReady:
		if len(q.ready.s) > 0 {
			slot = q.ready.s[0]
		}
	case StateDead:
		if len(q.dead.s) > 0 {
			slot = q.dead.s[0]
		}
	case StateDelayed:
		// The delayed heap spans all queues; its size bounds the scan.
		for _, s := range e.delayed.s {
			if e.jobs.get(s).queue == q.idx && (slot == noSlot || e.less(&e.delayed, s, slot)) {
				slot = s
			}
		}
	default:
		return Job{}, badf("state", "only ready, delayed and dead can be peeked, got %s", state)
	}
	if slot == noSlot {
		return Job{}, errf(CodeJobNotFound, "no %s job in queue %q", state, qn)
	}
	v := e.view(q, slot)
	v.Receipt = ""
	return v, nil
}
