package engine

import (
	"time"
)

// Release is beanstalkd's give-back; it shares its rule with Nack
// (giveBack, ack.go).

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
	return e.giveBack(q, slot, ns, qn, id, giveBackRule{
		verb: "released", priority: req.Priority, count: !req.Silent,
		at: func(img *JobImage) int64 {
			if req.Delay > 0 {
				return e.now + req.Delay.Milliseconds()
			}
			// Creation times grow with sequence numbers, so activating at
			// the creation time sorts the job by id among its priority.
			return min(img.At, img.Created)
		},
	})
}
