package engine

import (
	"time"
)

// Reads of one job, or of the head of one state, that change nothing.

// Peek returns a job without changing it.
func (e *Engine) Peek(now time.Time, ns, qn, id string) (Job, error) {
	e.Advance(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	v := e.view(q, slot)
	v.Receipt = "" // receipts only travel in take answers
	return v, nil
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
			if e.jq(e.jobs.get(s)) == q.idx && (slot == noSlot || e.less(&e.delayed, s, slot)) {
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

// Result looks up a job's result state.
func (e *Engine) Result(now time.Time, ns, qn, id string) (ResultInfo, error) {
	e.Advance(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return ResultInfo{}, err
	}
	v := e.view(q, slot)
	return ResultInfo{ID: v.ID, State: v.State, HasResult: v.HasResult, Result: v.Result, ResultJSON: v.ResultJSON}, nil
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
		if e.jprio(e.jobs.get(s)) < threshold {
			n++
		}
	}
	return n, nil
}
