package engine

import (
	"time"
)

// Cancel deletes one job. A reserved job needs its receipt.
func (e *Engine) Cancel(now time.Time, ns, qn, id, receipt string) error {
	e.begin(now)
	_, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return err
	}
	if e.jobs.get(slot).state == StateReserved {
		if receipt == "" {
			return errf(CodeConflict, "job %q is reserved: pass its receipt to cancel it", id)
		}
		if err := e.checkReceipt(slot, id, receipt, false); err != nil {
			return err
		}
	}
	r := e.ent.add()
	r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, id
	e.events.hint = EventCancelled
	if err := e.commit(); err != nil {
		return err
	}
	e.stats.Cancelled++
	if q := e.lookupQueue(ns, qn); q != nil {
		q.stats.Cancelled++
	}
	return nil
}

// CancelByFilter deletes the matching jobs of one queue, or of every queue
// of the namespace when qn is "". At least one filter is required; without
// states it spares reserved jobs.
func (e *Engine) CancelByFilter(now time.Time, ns, qn string, f Filter) (int, error) {
	e.begin(now)
	if len(f.States) == 0 && !f.HasKey && len(f.Tags) == 0 {
		return 0, badf("filter", "give at least one of state, key or tag.K=V")
	}
	if err := checkFilter(&f); err != nil {
		return 0, err
	}
	nsObj, err := e.findNS(ns)
	if err != nil {
		return 0, err
	}
	inQueue := func(qi uint32) bool { return e.queues[qi] != nil && e.queues[qi].ns == nsObj }
	if qn != "" {
		q, err := e.findQueue(ns, qn)
		if err != nil {
			return 0, err
		}
		inQueue = func(qi uint32) bool { return qi == q.idx }
	}
	mask := stateMask(f.States, allStates&^(1<<StateReserved))
	e.candidates(&f, inQueue, func(slot uint32) {
		if e.matches(slot, &f, mask) {
			q := e.queues[e.jq(e.jobs.get(slot))]
			r := e.ent.add()
			r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, q.name, e.jobID(slot)
		}
	})
	n := len(e.ent.Records)
	e.events.hint = EventCancelled
	if err := e.commit(); err != nil {
		return 0, err
	}
	e.stats.Cancelled += uint64(n)
	return n, nil
}
