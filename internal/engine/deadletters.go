package engine

import (
	"time"
)

// Dead letters: jobs that ran out of tries or were buried wait in their
// queue's dead state until respawned or purged.

// Respawn brings dead jobs back as ready with attempt 0: the oldest Limit
// of them (all when Limit is 0), or exactly the listed ids that are dead.
// A respawned job loses its TTL: it was brought back on purpose.
func (e *Engine) Respawn(now time.Time, ns, qn string, req RespawnRequest) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	if req.Limit < 0 {
		return 0, badf("limit", "must not be negative, got %d", req.Limit)
	}
	if req.Limit > 0 && len(req.IDs) > 0 {
		return 0, badf("ids", "give either limit or ids, not both")
	}
	var slots []uint32
	if len(req.IDs) > 0 {
		if len(req.IDs) > MaxBatch {
			return 0, badf("ids", "at most %d ids, got %d", MaxBatch, len(req.IDs))
		}
		seen := make(map[uint32]struct{}, len(req.IDs))
		for _, id := range req.IDs {
			k := makeIDKey(id)
			s := e.idLookup(q.idx, &k)
			if s == noSlot || e.jobs.get(s).state != StateDead {
				continue
			}
			if _, dup := seen[s]; !dup {
				seen[s] = struct{}{}
				slots = append(slots, s)
			}
		}
	} else {
		n := req.Limit
		if n == 0 {
			n = len(q.dead.s)
		}
		slots = e.hbest(&q.dead, n, nil)
	}
	for _, s := range slots {
		img := e.image(q, s)
		img.Phase, img.Attempt, img.Expire = phasePending, 0, 0
		img.Flags &^= fBuried
		img.At = max(img.At, e.now)
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	return len(slots), nil
}

// PurgeDead deletes every dead job of a queue.
func (e *Engine) PurgeDead(now time.Time, ns, qn string) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	for _, s := range q.dead.s {
		r := e.ent.add()
		r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, e.jobID(s)
	}
	n := len(e.ent.Records)
	if err := e.commit(); err != nil {
		return 0, err
	}
	return n, nil
}
