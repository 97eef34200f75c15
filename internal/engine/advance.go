package engine

import (
	"container/heap"
	"time"
)

// Advance moves the engine's clock to now (never backwards) and carries out
// every time-derived transition that became due, in deadline order:
// activations, reservation expiries, retention ends, TTL expiries and
// idempotency-window ends. Processing in deadline order, each at its own
// time, makes the result independent of how often Advance is called —
// which is what lets replay, calling it only at record times, reach the
// same state as the live server.
func (e *Engine) Advance(now time.Time) { e.advanceTo(ms(now)) }

const (
	evNone = iota
	evActivate
	evReservation
	evRetention
	evTTL
	evIdem
	evUnpause
)

func (e *Engine) nextEvent() (int, int64) {
	kind, at := evNone, int64(0)
	consider := func(k int, t int64) {
		if kind == evNone || t < at {
			kind, at = k, t
		}
	}
	if len(e.delayed.s) > 0 {
		consider(evActivate, e.jobs.get(e.delayed.s[0]).atMS())
	}
	if len(e.reserved.s) > 0 {
		consider(evReservation, e.reserved.s[0].t)
	}
	if len(e.completed.s) > 0 {
		consider(evRetention, e.completed.s[0].t)
	}
	if len(e.ttl) > 0 {
		consider(evTTL, e.ttl[0].expire)
	}
	if len(e.idemQ) > 0 {
		consider(evIdem, e.idemQ[0].expire)
	}
	for _, qi := range e.pauses {
		if q := e.queueAt(qi); q != nil && q.paused && q.pausedUntil != 0 {
			consider(evUnpause, q.pausedUntil)
		}
	}
	return kind, at
}

// NextDeadline is when the next time-derived transition is due; ok is false
// when nothing is scheduled. The broker sleeps until then to wake waiters.
func (e *Engine) NextDeadline() (t time.Time, ok bool) {
	kind, at := e.nextEvent()
	if kind == evNone {
		return time.Time{}, false
	}
	return fromMS(at), true
}

func (e *Engine) advanceTo(t int64) {
	// Events already overdue (possible right after replay on top of a
	// snapshot) are processed at the current time.
	t = max(t, e.now)
	for {
		kind, at := e.nextEvent()
		if kind == evNone || at > t {
			break
		}
		if at > e.now {
			e.now = at
		}
		switch kind {
		case evActivate:
			slot := e.delayed.s[0]
			q := e.queues[e.jq(e.jobs.get(slot))]
			e.unplace(q, slot)
			e.ripen(q, slot, nil)
		case evReservation:
			e.expireReservation(e.reserved.s[0].slot)
		case evRetention:
			slot := e.completed.s[0].slot
			e.deleteJob(e.queues[e.jq(e.jobs.get(slot))], slot)
		case evTTL:
			ent := heap.Pop(&e.ttl).(ttlEnt)
			slot := e.slotOf(ent.slot, ent.seq)
			if slot == noSlot {
				continue
			}
			j := e.jobs.get(slot)
			x, ok := e.ext(slot)
			if !ok || x.expire != ent.expire {
				continue
			}
			switch j.state {
			case StateDelayed, StateReady, StateBlocked:
				q := e.queues[e.jq(j)]
				e.noteNow(q, slot, EventExpired, "", StateGone)
				e.deleteJob(q, slot)
				e.stats.Expired++
				q.stats.Expired++
			}
		case evUnpause:
			keep := e.pauses[:0]
			for _, qi := range e.pauses {
				q := e.queueAt(qi)
				switch {
				case q == nil || !q.paused || q.pausedUntil == 0:
				case q.pausedUntil <= e.now:
					q.paused, q.pausedUntil = false, 0
					e.dirty[q.idx] = struct{}{}
				default:
					keep = append(keep, qi)
				}
			}
			e.pauses = keep
		case evIdem:
			ie := heap.Pop(&e.idemQ).(idemExp)
			if cur, ok := e.idem[ie.key]; ok && cur.expire == ie.expire {
				delete(e.idem, ie.key)
			}
		}
	}
	e.now = t
}

// expireReservation ends a reservation whose TTR ran out: the attempt is
// used; the job goes back to pending at its old activation time, or dead if
// its tries are used up, or away if its TTL passed meanwhile.
func (e *Engine) expireReservation(slot uint32) {
	j := e.jobs.get(slot)
	q := e.queues[e.jq(j)]
	r := e.resv[slot]
	if x, _ := e.ext(slot); x.expire != 0 && x.expire <= r.until {
		e.noteNow(q, slot, EventExpired, "", StateGone)
		e.deleteJob(q, slot)
		e.stats.Expired++
		q.stats.Expired++
		return
	}
	e.unplace(q, slot)
	j.setAt(r.origAt)
	e.setAttempt(slot, r.attempt)
	x, _ := e.ext(slot)
	x.timeouts++
	e.setExt(slot, &x)
	if j.tries > 0 && r.attempt >= uint32(j.tries) {
		e.toDead(q, slot, "reservation timed out on the last try", false)
		e.noteNow(q, slot, EventDead, "reservation timed out on the last try", StateDead)
		return
	}
	e.placePending(q, slot)
	if j.key != 0 {
		e.refresh(q, j.key)
	}
	e.noteNow(q, slot, EventNacked, "reservation timed out (ttr)", j.state)
}

// toDead moves an unplaced job to the dead state, releasing its key.
func (e *Engine) toDead(q *queue, slot uint32, reason string, buried bool) {
	j := e.jobs.get(slot)
	if j.key != 0 {
		e.chainRemove(q, slot)
	}
	if reason != "" {
		x, _ := e.ext(slot)
		x.lastError = reason
		e.setExt(slot, &x)
	}
	if buried {
		j.flags |= fBuried
	} else {
		j.flags &^= fBuried
	}
	e.setState(q, slot, j, StateDead)
	e.hpush(&q.dead, slot)
	e.stats.Dead++
	q.stats.Dead++
	if j.key != 0 {
		e.refresh(q, j.key)
	}
}

// ttlHeap holds TTL deadlines lazily: an entry is checked against the job
// when it comes due, so jobs that left earlier cost nothing to remove.
type ttlEnt struct {
	expire int64
	slot   uint32 // where the job was; seq finds it if it moved (slotOf)
	seq    uint64
}

type ttlHeap []ttlEnt

func (h ttlHeap) Len() int           { return len(h) }
func (h ttlHeap) Less(i, j int) bool { return h[i].expire < h[j].expire }
func (h ttlHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ttlHeap) Push(x any)        { *h = append(*h, x.(ttlEnt)) }
func (h *ttlHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h *ttlHeap) push(x ttlEnt) { heap.Push(h, x) }

// Idempotency keys are remembered per queue for its dedup window.
type idemEnt struct {
	id     string
	expire int64
	at     int64
}

type idemExp struct {
	expire int64
	key    string
}

type idemHeap []idemExp

func (h idemHeap) Len() int           { return len(h) }
func (h idemHeap) Less(i, j int) bool { return h[i].expire < h[j].expire }
func (h idemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idemHeap) Push(x any)        { *h = append(*h, x.(idemExp)) }
func (h *idemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h *idemHeap) push(x idemExp) { heap.Push(h, x) }

func idemMapKey(ns, q, key string) string { return ns + "\x00" + q + "\x00" + key }
