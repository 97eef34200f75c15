package engine

import (
	"time"
)

// Jobs addressed by their 64-bit sequence number (beanstalkd's job ids).

// JobBySeq returns the job of namespace ns with the given sequence number.
func (e *Engine) JobBySeq(now time.Time, ns string, seq uint64) (Job, error) {
	e.Advance(now)
	slot := e.seqLookup(seq)
	if slot == noSlot {
		return Job{}, errf(CodeJobNotFound, "no job with sequence number %d", seq)
	}
	q := e.queues[e.jq(e.jobs.get(slot))]
	if q.ns.name != ns {
		return Job{}, errf(CodeJobNotFound, "no job with sequence number %d", seq)
	}
	v := e.view(q, slot)
	v.Receipt = ""
	return v, nil
}
