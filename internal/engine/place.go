package engine

import "sort"

// Where a job lives follows from its state:
//
//	delayed    Engine.delayed (global, by activation time)
//	ready      queue.ready (by priority, activation, seq)
//	blocked    strict mode: nowhere but its key chain; exclusive mode: chain.sub
//	reserved   Engine.reserved (global, by deadline) + Engine.resv
//	dead       queue.dead (by seq, respawn order)
//	completed  Engine.completed (global, by retention end)
//
// Jobs with a key are also in their key's chain while pending or reserved.
// place and unplace are the only functions that move jobs between these.

// chain is the pending and reserved jobs of one key in one queue, oldest
// first (docs/api.md, key_mode).
type chain struct {
	slots    []uint32 // live part is slots[h:], ordered by seq
	h        int
	reserved int
	rep      uint32   // the key's job currently in queue.ready, or noSlot
	sub      slotHeap // exclusive mode: ripe, unreserved jobs other than rep
}

func (c *chain) live() []uint32 { return c.slots[c.h:] }

// setState moves the job in slot to state s and counts it. The slot is
// passed, not looked up by the job's sequence number, which spares the
// listing indexes a lookup (listindex.go) and lets a bulk load leave the
// sequence index's overflow table unfilled until it ends (seqtable.go).
func (e *Engine) setState(q *queue, slot uint32, j *job, s State) {
	e.noteState(q, slot, j, s)
	if j.state != StateNone {
		*q.countOf(j.state)--
	}
	j.state = s
	if s != StateNone {
		*q.countOf(s)++
	}
}

func (q *queue) countOf(s State) *uint64 {
	switch s {
	case StateDelayed:
		return &q.counts.Delayed
	case StateReady:
		return &q.counts.Ready
	case StateBlocked:
		return &q.counts.Blocked
	case StateReserved:
		return &q.counts.Reserved
	case StateDead:
		return &q.counts.Dead
	default:
		return &q.counts.Completed
	}
}

func (e *Engine) chainOf(q *queue, key uint32, create bool) *chain {
	c := q.chains[key]
	if c == nil && create {
		c = &chain{rep: noSlot, sub: slotHeap{ord: byServing}}
		if q.chains == nil {
			q.chains = make(map[uint32]*chain)
		}
		q.chains[key] = c
	}
	return c
}

// unplace takes a job out of the structure of its state (not its chain).
func (e *Engine) unplace(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	switch j.state {
	case StateNone:
		return
	case StateDelayed:
		e.hremove(&e.delayed, slot)
	case StateReady:
		e.rremove(&q.ready, slot)
		if j.key != 0 {
			if c := q.chains[j.key]; c != nil && c.rep == slot {
				c.rep = noSlot
			}
		}
	case StateBlocked:
		if q.cfg.KeyMode == KeyExclusive {
			if c := q.chains[j.key]; c != nil {
				e.hremove(&c.sub, slot)
			}
		}
	case StateReserved:
		e.tremove(&e.reserved, slot)
		delete(e.resv, slot)
		if j.key != 0 {
			if c := q.chains[j.key]; c != nil {
				c.reserved--
			}
		}
	case StateDead:
		e.hremove(&q.dead, slot)
	case StateCompleted:
		e.tremove(&e.completed, slot)
	}
	e.setState(q, slot, j, StateNone)
}

// placePending puts a pending job where its activation time says; the
// caller refreshes its chain afterwards.
func (e *Engine) placePending(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	if j.atMS() > e.now {
		e.setState(q, slot, j, StateDelayed)
		e.hpush(&e.delayed, slot)
		e.noteFar(slot)
		return
	}
	e.ripen(q, slot, nil)
}

// ripen handles a pending job whose activation time has come. c is the
// chain of a keyed job when the caller has it at hand, or nil.
func (e *Engine) ripen(q *queue, slot uint32, c *chain) {
	j := e.jobs.get(slot)
	if j.key == 0 {
		e.setState(q, slot, j, StateReady)
		e.rpush(&q.ready, slot)
		e.dirty[q.idx] = struct{}{}
		return
	}
	e.setState(q, slot, j, StateBlocked)
	if c == nil {
		c = e.chainOf(q, j.key, true)
	}
	if q.cfg.KeyMode == KeyExclusive {
		e.hpush(&c.sub, slot)
	}
	e.refreshChain(q, j.key, c)
}

func (e *Engine) placeReserved(q *queue, slot uint32, r resvInfo) {
	j := e.jobs.get(slot)
	e.setAttempt(slot, 0) // r carries it while the job is reserved
	e.resv[slot] = r
	e.setState(q, slot, j, StateReserved)
	e.tpush(&e.reserved, r.until, slot)
	if j.key != 0 {
		e.chainOf(q, j.key, true).reserved++
	}
}

// refresh makes the chain's ready member the one the key mode allows:
// strict, the head when nothing of the key is reserved; exclusive, the best
// ripe job when nothing of the key is reserved.
func (e *Engine) refresh(q *queue, key uint32) {
	if c := q.chains[key]; c != nil {
		e.refreshChain(q, key, c)
	}
}

// refreshChain is refresh of c, the chain of key in q.
func (e *Engine) refreshChain(q *queue, key uint32, c *chain) {
	if len(c.live()) == 0 && c.reserved == 0 {
		delete(q.chains, key)
		if int(key) < len(e.bulk.chains) && e.bulk.chains[key].c == c {
			e.bulk.chains[key] = chainTail{} // loadChainAdd must not add to it
		}
		return
	}
	desired := noSlot
	if c.reserved == 0 {
		if q.cfg.KeyMode == KeyExclusive {
			desired = c.rep
			if len(c.sub.s) > 0 && (desired == noSlot || e.less(&c.sub, c.sub.s[0], desired)) {
				desired = c.sub.s[0]
			}
		} else {
			head := c.live()[0]
			if s := e.jobs.get(head).state; s == StateReady || s == StateBlocked {
				desired = head
			}
		}
	}
	if c.rep == desired {
		return
	}
	if old := c.rep; old != noSlot {
		j := e.jobs.get(old)
		e.rremove(&q.ready, old)
		c.rep = noSlot
		e.setState(q, old, j, StateBlocked)
		if q.cfg.KeyMode == KeyExclusive {
			e.hpush(&c.sub, old)
		}
	}
	if desired != noSlot {
		j := e.jobs.get(desired)
		if q.cfg.KeyMode == KeyExclusive {
			e.hremove(&c.sub, desired)
		}
		e.setState(q, desired, j, StateReady)
		e.rpush(&q.ready, desired)
		c.rep = desired
		e.dirty[q.idx] = struct{}{}
	}
}

// chainAdd inserts a job into its key's chain in seq order. The usual cases
// — a new job at the tail, a head going back to the front after a
// reservation — cost O(1).
func (e *Engine) chainAdd(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	c := e.chainOf(q, j.key, true)
	live := c.live()
	n := len(live)
	switch {
	case n == 0 || e.jobs.get(live[n-1]).seqNo() < j.seqNo():
		c.slots = append(c.slots, slot)
	case c.h > 0 && e.jobs.get(live[0]).seqNo() > j.seqNo():
		c.h--
		c.slots[c.h] = slot
	default:
		// a record read per probe: a binary search (a chain loaded from a
		// snapshot taken after a shrink comes out of seq order)
		seq := j.seqNo()
		i := sort.Search(n, func(i int) bool { return e.jobs.get(live[i]).seqNo() >= seq })
		c.slots = append(c.slots, 0)
		copy(c.slots[c.h+i+1:], c.slots[c.h+i:])
		c.slots[c.h+i] = slot
	}
}

func (e *Engine) chainRemove(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	c := q.chains[j.key]
	if c == nil {
		return
	}
	live := c.live()
	for i, s := range live {
		if s != slot {
			continue
		}
		if i == 0 {
			c.h++
		} else {
			copy(live[i:], live[i+1:])
			c.slots = c.slots[:len(c.slots)-1]
		}
		break
	}
	if c.h > 32 && c.h*2 > len(c.slots) {
		n := copy(c.slots, c.slots[c.h:])
		c.slots = c.slots[:n]
		c.h = 0
	}
}

func inChain(p phase) bool { return p == phasePending || p == phaseReserved }

func (e *Engine) phaseOf(slot uint32) phase {
	switch e.jobs.get(slot).state {
	case StateReserved:
		return phaseReserved
	case StateDead:
		return phaseDead
	case StateCompleted:
		return phaseCompleted
	case StateNone:
		return 0
	}
	return phasePending
}

func tagKey(k, v string) string { return k + "\x00" + v }

func (e *Engine) indexTags(slot uint32, tags []string, add bool) {
	for i := 0; i+1 < len(tags); i += 2 {
		k := tagKey(tags[i], tags[i+1])
		set := e.tagIndex[k]
		if add {
			if set == nil {
				set = make(map[uint32]struct{})
				e.tagIndex[k] = set
			}
			set[slot] = struct{}{}
		} else if set != nil {
			delete(set, slot)
			if len(set) == 0 {
				delete(e.tagIndex, k)
			}
		}
	}
}

// deleteJob removes a job entirely.
func (e *Engine) deleteJob(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	key := j.key
	wasChain := inChain(e.phaseOf(slot))
	e.unplace(q, slot)
	if key != 0 && wasChain {
		e.chainRemove(q, slot)
	}
	e.trackBlob(j.payload, -1)
	if x, ok := e.ext(slot); ok {
		e.indexTags(slot, x.tags, false)
		e.trackBlob(x.result, -1)
	}
	e.idRemove(slot)
	e.seqs.remove(e, slot)
	e.delExt(slot)
	e.setAttempt(slot, 0)
	e.cls.unref(j.cls)
	e.jobs.release(slot)
	if key != 0 {
		e.refresh(q, key)
		e.keys.unref(key)
	}
}
