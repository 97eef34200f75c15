package engine

import (
	"slices"
	"time"
)

// Kick moves dead (else delayed) jobs back to ready: beanstalkd's kick
// and kick-job; the native API's respawn is in deadletters.go.

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
			if e.jq(j) == q.idx && j.state == StateDelayed {
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
