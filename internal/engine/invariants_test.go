package engine

import "fmt"

// checkInvariants walks the engine's structures and reports the first
// inconsistency: every live job findable by id, in exactly the structure
// its state names, chains ordered, counts matching.
func (e *Engine) checkInvariants() error {
	counts := map[uint32]*Counts{}
	var err error
	e.forEachJob(func(slot uint32, j *job) {
		if err != nil {
			return
		}
		q := e.queues[e.jq(j)]
		if q == nil {
			err = fmt.Errorf("slot %d: queue %d gone", slot, e.jq(j))
			return
		}
		if got := e.seqLookup(j.seqNo()); got != slot {
			err = fmt.Errorf("slot %d: seq %d lookup gives %d", slot, j.seqNo(), got)
			return
		}
		k := e.slotKey(slot)
		if got := e.idLookup(e.jq(j), &k); got != slot {
			err = fmt.Errorf("slot %d (%s): id lookup gives %d", slot, e.jobID(slot), got)
			return
		}
		if counts[e.jq(j)] == nil {
			counts[e.jq(j)] = &Counts{}
		}
		*(&queue{counts: *counts[e.jq(j)]}).countOf(j.state)++
		c := counts[e.jq(j)]
		switch j.state {
		case StateDelayed:
			c.Delayed++
			if int(j.hidx) >= len(e.delayed.s) || e.delayed.s[j.hidx] != slot {
				err = fmt.Errorf("slot %d delayed but not in delayed heap", slot)
			}
		case StateReady:
			c.Ready++
			if h := q.ready.byPrio[e.jprio(j)]; h == nil || int(j.hidx) >= len(h.s) || h.s[j.hidx] != slot {
				err = fmt.Errorf("slot %d ready but not in ready heap", slot)
			}
		case StateBlocked:
			c.Blocked++
		case StateReserved:
			c.Reserved++
			if _, ok := e.resv[slot]; !ok {
				err = fmt.Errorf("slot %d reserved without reservation", slot)
			}
		case StateDead:
			c.Dead++
		case StateCompleted:
			c.Completed++
		}
	})
	if err != nil {
		return err
	}
	for _, q := range e.queues {
		if q == nil {
			continue
		}
		want := Counts{}
		if c := counts[q.idx]; c != nil {
			want = *c
		}
		if q.counts != want {
			return fmt.Errorf("queue %s counts %+v, jobs say %+v", q.name, q.counts, want)
		}
		for key, c := range q.chains {
			live := c.live()
			res := 0
			for i, s := range live {
				j := e.jobs.get(s)
				if j.state == StateNone || j.key != key || e.jq(j) != q.idx {
					return fmt.Errorf("chain %s/%s holds slot %d in state %s key %d", q.name, e.keys.keys[key], s, j.state, j.key)
				}
				if i > 0 && e.jobs.get(live[i-1]).seqNo() >= j.seqNo() {
					return fmt.Errorf("chain %s/%s out of order", q.name, e.keys.keys[key])
				}
				if j.state == StateReserved {
					res++
				}
				if j.state == StateDead || j.state == StateCompleted {
					return fmt.Errorf("chain holds %s job", j.state)
				}
			}
			if res != c.reserved {
				return fmt.Errorf("chain %s/%s reserved=%d, holds %d reserved", q.name, e.keys.keys[key], c.reserved, res)
			}
		}
	}
	scan, scanN := map[uint32]int64{}, map[uint32]int64{}
	e.forEachJob(func(slot uint32, j *job) {
		if j.payload.Len > 0 {
			scan[j.payload.Segment] += int64(j.payload.Len)
			scanN[j.payload.Segment]++
		}
		if x, ok := e.ext(slot); ok && x.result.Len > 0 {
			scan[x.result.Segment] += int64(x.result.Len)
			scanN[x.result.Segment]++
		}
	})
	if fmt.Sprint(scan) != fmt.Sprint(e.live) || fmt.Sprint(scanN) != fmt.Sprint(e.liveN) {
		return fmt.Errorf("live bytes %v in %v blobs, scan says %v in %v", e.live, e.liveN, scan, scanN)
	}
	// the id table holds exactly the jobs the sequence table cannot find
	// by id, and the attempt side table exactly the flagged jobs
	inIDs, flagged := 0, 0
	var bad error
	e.forEachJob(func(slot uint32, j *job) {
		if !j.bySeq() {
			inIDs++
		}
		if j.flags&fAttempt != 0 {
			flagged++
			if e.attempts[slot] == 0 || j.state == StateReserved {
				bad = fmt.Errorf("slot %d: attempt %d flagged in state %d", slot, e.attempts[slot], j.state)
			}
		}
	})
	if bad != nil {
		return bad
	}
	if e.ids.n != inIDs {
		return fmt.Errorf("id table holds %d, want the %d jobs not found by sequence", e.ids.n, inIDs)
	}
	if n := e.seqs.len(); n != e.jobs.live {
		return fmt.Errorf("sequence index holds %d, slab %d", n, e.jobs.live)
	}
	for pi, p := range e.seqs.pages {
		n := 0
		for off, s := range p.slots {
			if s != noSlot {
				n++
				if seq := pi<<seqPageBits | uint64(off); e.jobs.get(s).seqNo() != seq {
					return fmt.Errorf("page %d holds slot %d for seq %d, its seq is %d", pi, s, seq, e.jobs.get(s).seqNo())
				}
			}
		}
		if n != p.n {
			return fmt.Errorf("page %d counts %d jobs, holds %d", pi, p.n, n)
		}
	}
	if len(e.attempts) != flagged {
		return fmt.Errorf("attempt table holds %d, %d jobs flagged", len(e.attempts), flagged)
	}
	// the rare-field arena: an entry exactly for the jobs flagged with
	// one, and its byte accounting right
	withExt, live := 0, 0
	e.forEachJob(func(slot uint32, j *job) {
		b := e.exts.entry(slot)
		if (j.flags&fHasExt != 0) != (b != nil) && err == nil {
			err = fmt.Errorf("slot %d: ext flag %v, entry %v", slot, j.flags&fHasExt != 0, b != nil)
		}
		if b != nil {
			withExt++
			live += entrySize(len(b))
			if !validExt(b) && err == nil {
				err = fmt.Errorf("slot %d: malformed ext entry", slot)
			}
			// Relocate looks for result blobs only in jobs flagged so
			if x, _ := e.exts.get(slot); x.result.Len > 0 && j.flags&fHasResult == 0 && err == nil {
				err = fmt.Errorf("slot %d: a result blob without the result flag", slot)
			}
		}
	})
	if err != nil {
		return err
	}
	// each ready set: one non-empty heap per priority, of that priority's
	// jobs only, its priority heap in order, and its count right
	for _, q := range e.queues {
		if q == nil {
			continue
		}
		r, n := &q.ready, 0
		if len(r.heaps) != len(r.byPrio) {
			return fmt.Errorf("queue %s: %d priority heaps, %d in the map", q.name, len(r.heaps), len(r.byPrio))
		}
		for i, h := range r.heaps {
			if h.pos != i || r.byPrio[h.prio] != h || len(h.s) == 0 {
				return fmt.Errorf("queue %s: priority heap %d (prio %d) misplaced or empty", q.name, i, h.prio)
			}
			if i > 0 && r.heaps[(i-1)/2].prio > h.prio {
				return fmt.Errorf("queue %s: priority heap out of order at %d", q.name, i)
			}
			for _, s := range h.s {
				if e.jprio(e.jobs.get(s)) != h.prio {
					return fmt.Errorf("queue %s: slot %d of priority %d in the heap of %d", q.name, s, e.jprio(e.jobs.get(s)), h.prio)
				}
			}
			n += len(h.s)
		}
		if n != r.n {
			return fmt.Errorf("queue %s: ready count %d, heaps hold %d", q.name, r.n, n)
		}
	}
	// (queue, ttr) classes: referenced exactly by the jobs holding them
	refs := map[uint32]uint32{}
	e.forEachJob(func(slot uint32, j *job) { refs[j.cls]++ })
	for id := range e.cls.keys {
		if id > 0 && e.cls.refs[id] != refs[uint32(id)] {
			return fmt.Errorf("class %d %+v: %d references, %d jobs", id, e.cls.keys[id], e.cls.refs[id], refs[uint32(id)])
		}
	}
	if refs[0] != 0 || len(e.cls.ids) != len(e.cls.keys)-1-len(e.cls.free) {
		return fmt.Errorf("class table: %d jobs of class 0, %d interned, %d slots, %d free", refs[0], len(e.cls.ids), len(e.cls.keys), len(e.cls.free))
	}
	if withExt != e.exts.len() || live != e.exts.live {
		return fmt.Errorf("ext arena holds %d entries (%d live bytes), jobs have %d (%d bytes)", e.exts.len(), e.exts.live, withExt, live)
	}
	if err := e.checkSlots(); err != nil {
		return err
	}
	return e.checkListIndexes()
}

// checkSlots checks what refers to slots: the slab's free list, every
// heap and chain by position, the tag index and the TTL deadlines.
func (e *Engine) checkSlots() error {
	s := &e.jobs
	top := s.next
	if s.limit != 0 {
		top = min(top, s.limit)
	}
	free := map[uint32]bool{}
	for _, slot := range s.free {
		if slot >= top || free[slot] || s.get(slot).state != StateNone {
			return fmt.Errorf("free list holds slot %d (top %d, twice %v, state %s)", slot, top, free[slot], s.get(slot).state)
		}
		free[slot] = true
	}
	live := 0
	for slot := uint32(0); slot < s.next; slot++ {
		j := s.get(slot)
		if j.state != StateNone {
			live++
		} else if slot < top && !free[slot] {
			return fmt.Errorf("slot %d empty but not free", slot)
		} else if *j != (job{}) {
			return fmt.Errorf("empty slot %d not zeroed", slot)
		}
	}
	if live != s.live {
		return fmt.Errorf("slab counts %d live, holds %d", s.live, live)
	}
	tags := map[string]map[uint32]struct{}{}
	ttl := map[uint64]int64{}
	heaps := map[State]int{}
	var err error
	e.forEachJob(func(slot uint32, j *job) {
		if err != nil {
			return
		}
		q := e.queues[e.jq(j)]
		at := func(ok bool, where string) {
			if !ok && err == nil {
				err = fmt.Errorf("slot %d (%s) not at %d of its %s", slot, j.state, j.hidx, where)
			}
		}
		i := int(j.hidx)
		switch j.state {
		case StateDelayed, StateReady, StateDead:
			heaps[j.state]++
		case StateBlocked:
			if q.cfg.KeyMode == KeyExclusive {
				c := q.chains[j.key]
				at(c != nil && i < len(c.sub.s) && c.sub.s[i] == slot, "chain's heap")
			}
		case StateReserved:
			heaps[j.state]++
			at(i < len(e.reserved.s) && e.reserved.s[i].slot == slot, "reservation heap")
		case StateCompleted:
			heaps[j.state]++
			at(i < len(e.completed.s) && e.completed.s[i].slot == slot, "retention heap")
		}
		if j.state == StateDead {
			at(i < len(q.dead.s) && q.dead.s[i] == slot, "dead heap")
		}
		if j.key != 0 && inChain(e.phaseOf(slot)) {
			c := q.chains[j.key]
			found := false
			if c != nil {
				for _, s := range c.live() {
					found = found || s == slot
				}
			}
			at(found, "key chain")
			if j.state == StateReady {
				at(c != nil && c.rep == slot, "chain's ready member")
			}
		}
		if x, ok := e.ext(slot); ok {
			for k := 0; k+1 < len(x.tags); k += 2 {
				key := tagKey(x.tags[k], x.tags[k+1])
				if tags[key] == nil {
					tags[key] = map[uint32]struct{}{}
				}
				tags[key][slot] = struct{}{}
			}
			if x.expire != 0 {
				ttl[j.seqNo()] = x.expire
			}
		}
	})
	if err != nil {
		return err
	}
	if fmt.Sprint(tags) != fmt.Sprint(e.tagIndex) {
		return fmt.Errorf("tag index %v, jobs say %v", e.tagIndex, tags)
	}
	for _, ent := range e.ttl {
		if want, ok := ttl[ent.seq]; ok && want == ent.expire {
			delete(ttl, ent.seq)
		}
	}
	for seq, exp := range ttl {
		if j := e.jobs.get(e.seqLookup(seq)); j.state == StateDelayed || j.state == StateReady || j.state == StateBlocked {
			return fmt.Errorf("job %d expires at %d without a deadline", seq, exp)
		}
	}
	dead, ready := 0, 0
	for _, q := range e.queues {
		if q != nil {
			dead += len(q.dead.s)
			ready += q.ready.n
		}
	}
	if heaps[StateDelayed] != len(e.delayed.s) || heaps[StateReady] != ready || heaps[StateDead] != dead ||
		heaps[StateReserved] != len(e.reserved.s) || heaps[StateCompleted] != len(e.completed.s) {
		return fmt.Errorf("heaps hold delayed %d ready %d dead %d reserved %d completed %d, jobs %v",
			len(e.delayed.s), ready, dead, len(e.reserved.s), len(e.completed.s), heaps)
	}
	return nil
}
