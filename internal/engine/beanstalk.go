package engine

import (
	"slices"
	"time"
)

// Operations the beanstalkd protocol needs beyond the native API: jobs
// addressed by their 64-bit sequence number, kick, and reserving one job by
// id. They follow the same validate → record → apply path.

// JobBySeq returns the job of namespace ns with the given sequence number.
func (e *Engine) JobBySeq(now time.Time, ns string, seq uint64) (Job, error) {
	e.Advance(now)
	slot := e.seqLookup(seq)
	if slot == noSlot {
		return Job{}, errf(CodeJobNotFound, "no job with sequence number %d", seq)
	}
	q := e.queues[e.jobs.get(slot).queue]
	if q.ns.name != ns {
		return Job{}, errf(CodeJobNotFound, "no job with sequence number %d", seq)
	}
	v := e.view(q, slot)
	v.Receipt = ""
	return v, nil
}

// kickImage makes a dead or delayed job ready now, counting the kick and
// keeping its attempt count (beanstalkd's reserves survive kicks).
func (e *Engine) kickImage(q *queue, slot uint32) {
	img := e.image(q, slot)
	img.Phase = phasePending
	img.Flags &^= fBuried
	img.At = min(img.At, e.now)
	img.Kicks++
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
}

// Kick moves up to n jobs of a queue to ready: its dead jobs if it has any
// (oldest first), else its delayed ones (soonest first). It answers how
// many moved.
func (e *Engine) Kick(now time.Time, ns, qn string, n int) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, nil
	}
	var slots []uint32
	if len(q.dead.s) > 0 {
		slots = e.hbest(&q.dead, n, nil)
	} else {
		e.forEachJob(func(slot uint32, j *job) {
			if j.queue == q.idx && j.state == StateDelayed {
				slots = append(slots, slot)
			}
		})
		slices.SortFunc(slots, func(a, b uint32) int {
			switch {
			case e.less(&e.delayed, a, b):
				return -1
			case e.less(&e.delayed, b, a):
				return 1
			}
			return 0
		})
		slots = slots[:min(n, len(slots))]
	}
	for _, s := range slots {
		e.kickImage(q, s)
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	return len(slots), nil
}

// KickJob moves one dead or delayed job to ready.
func (e *Engine) KickJob(now time.Time, ns, qn, id string) error {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return err
	}
	if s := e.jobs.get(slot).state; s != StateDead && s != StateDelayed {
		return errf(CodeConflict, "job %q is %s: only dead or delayed jobs can be kicked", id, s)
	}
	e.kickImage(q, slot)
	return e.commit()
}

// ReserveJob reserves one particular job, whatever its state but reserved
// (beanstalkd reserve-job), bypassing order and pauses.
func (e *Engine) ReserveJob(now time.Time, ns, qn, id string, ttr *time.Duration) (Job, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	switch e.jobs.get(slot).state {
	case StateReserved:
		return Job{}, errf(CodeConflict, "job %q is already reserved", id)
	case StateCompleted:
		return Job{}, errf(CodeConflict, "job %q is completed", id)
	}
	img := e.image(q, slot)
	img.Phase = phaseReserved
	img.Flags &^= fBuried
	img.Attempt++
	nonces, err := e.receiptNonces(1)
	if err != nil {
		return Job{}, err
	}
	img.Nonce = nonces[0]
	img.ResvTTR = img.TTR
	if ttr != nil {
		if *ttr < time.Millisecond || *ttr > MaxTTR {
			return Job{}, badf("ttr", "must be between 1ms and %s, got %s", MaxTTR, *ttr)
		}
		img.ResvTTR = uint32(ttr.Milliseconds())
	}
	img.Until = e.resvBase + int64(img.ResvTTR)
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	e.stampCounters(0, 1)
	if err := e.commit(); err != nil {
		return Job{}, err
	}
	e.stats.Taken++
	q.stats.Taken++
	return e.view(q, slot), nil
}

// UrgentReady counts the ready jobs of a queue with priority below
// threshold (beanstalkd's current-jobs-urgent, threshold 1024).
func (e *Engine) UrgentReady(now time.Time, ns, qn string, threshold uint32) (int, error) {
	e.Advance(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range q.ready.s {
		if e.jobs.get(s).prio < threshold {
			n++
		}
	}
	return n, nil
}
