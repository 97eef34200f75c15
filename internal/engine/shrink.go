package engine

import "sort"

// Shrinking the job table. The slab grows to the most jobs the engine ever
// held at once and reuses freed slots, so after a peak — a fill of
// far-future jobs that then went to the far store, a backlog drained — it
// keeps the peak's memory, and the jobs left are spread over all of it.
// Shrinking moves the jobs above a new top into free slots below it, a
// bounded number per call so the broker can do it between batches, and
// then drops the chunks above the top; the tables sized by the peak (free
// list, heaps, hash tables) are rebuilt to fit.
//
// A move rewrites every reference to the slot: the sequence index and id
// table, the rare-field arena, the reservation and attempt tables, the tag
// index, the heap of the job's state (at hidx), its key chain and the
// listing indexes. Two references are not rewritten but resolved by
// sequence number when used (slotOf): TTL deadlines and far-store
// candidates, which are many and only read once. Nothing outside the
// engine holds a slot across calls, with one exception, the snapshot walk,
// which visits jobs by slot: while one is under way nothing moves.

const (
	// shrinkMinChunks is how many chunks shrinking must at least free to
	// start (4 chunks: ~14 MB)
	shrinkMinChunks = 4
	// shrinkScanPerMove bounds the empty slots one call may step over per
	// move of its budget
	shrinkScanPerMove = 16
)

// slotOf returns where the job with sequence number seq is now, given the
// slot it was in (a hint), or noSlot if it is gone.
func (e *Engine) slotOf(hint uint32, seq uint64) uint32 {
	if hint < e.jobs.next {
		if j := e.jobs.get(hint); j.state != StateNone && j.seqNo() == seq {
			return hint
		}
	}
	return e.seqLookup(seq)
}

// Shrinking reports whether the job table is shrinking: the caller should
// call Shrink again soon.
func (e *Engine) Shrinking() bool { return e.jobs.limit != 0 || e.refits != 0 }

// SlabBytes is the memory the job table's records take, in bytes.
func (e *Engine) SlabBytes() int64 { return int64(len(e.jobs.chunks)) * chunkSize * int64(jobSize) }

// Shrink moves up to budget jobs towards a smaller job table, starting a
// shrink if at least half of the table and shrinkMinChunks chunks are
// free, and reports how many it moved. Once nothing is left above the new
// top, the chunks above it are freed. It does nothing while a snapshot walk
// is under way or a snapshot is being loaded.
func (e *Engine) Shrink(budget int) int {
	s := &e.jobs
	if e.walks > 0 || e.bulk.on || budget <= 0 {
		return 0
	}
	if e.refits != 0 {
		e.refit()
		return 0
	}
	if s.limit == 0 {
		limit := e.shrinkLimit()
		if limit == 0 {
			return 0
		}
		e.beginShrink(limit)
	}
	return e.shrinkSteps(budget)
}

// shrinkLimit is the slot count a shrink would go to now, or 0 if the table
// is not worth shrinking: fewer than half of it, or fewer than
// shrinkMinChunks chunks, free.
func (e *Engine) shrinkLimit() uint32 {
	s := &e.jobs
	// the chunks the jobs need, with a quarter to grow into
	need := (s.live + s.live/4 + chunkSize - 1) / chunkSize
	have := len(s.chunks)
	if have-need < shrinkMinChunks || have < 2*need {
		return 0
	}
	return uint32(max(need, 1)) * chunkSize
}

// ShrinkDue reports whether the table is shrinking or would start to at
// the next chance (a snapshot walk may hold it back).
func (e *Engine) ShrinkDue() bool { return e.Shrinking() || e.shrinkLimit() != 0 }

// beginShrink starts shrinking the table to limit slots.
func (e *Engine) beginShrink(limit uint32) {
	s := &e.jobs
	if limit == 0 || limit >= s.next {
		return // (a limit of 0 would read as no shrink under way)
	}
	s.limit = limit
	keep := s.free[:0]
	for _, slot := range s.free {
		if slot < limit {
			keep = append(keep, slot)
		}
	}
	s.free = keep
}

// shrinkSteps does up to budget moves of a shrink under way.
func (e *Engine) shrinkSteps(budget int) int {
	s := &e.jobs
	moved, scan := 0, budget*shrinkScanPerMove
	for moved < budget && scan > 0 {
		if s.next <= s.limit {
			e.finishShrink()
			return moved
		}
		from := s.next - 1
		if s.get(from).state == StateNone {
			s.next--
			scan--
			continue
		}
		if len(s.free) == 0 {
			// the jobs grew back into the room below the limit
			e.abandonShrink()
			return moved
		}
		to := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		e.moveJob(from, to)
		s.next--
		moved++
	}
	return moved
}

// abandonShrink stops a shrink that has no room left to move into: the
// empty slots above the limit, left out of the free list, go back into it.
func (e *Engine) abandonShrink() {
	s := &e.jobs
	for slot := s.limit; slot < s.next; slot++ {
		if s.get(slot).state == StateNone {
			s.free = append(s.free, slot)
		}
	}
	s.limit = 0
}

// finishShrink drops the chunks above the new top; the tables the peak
// sized are rebuilt by the next calls, one kind per call (refit), as a
// rebuild of millions of entries takes tens of milliseconds.
func (e *Engine) finishShrink() {
	s := &e.jobs
	keep := int((s.limit + chunkSize - 1) / chunkSize)
	for i := keep; i < len(s.chunks); i++ {
		s.chunks[i] = nil
	}
	s.chunks = append([][]job(nil), s.chunks[:keep]...)
	s.next, s.limit = min(s.next, uint32(keep)*chunkSize), 0
	s.free = fit(s.free)
	e.refits = 1
}

// refit rebuilds the next kind of table a shrink left sized by the peak.
func (e *Engine) refit() {
	switch e.refits {
	case 1:
		e.delayed.s = fit(e.delayed.s)
		e.reserved.s = fit(e.reserved.s)
		e.completed.s = fit(e.completed.s)
		e.ttl = fit(e.ttl)
		e.far.cand = fit(e.far.cand)
		for _, q := range e.queues {
			if q == nil {
				continue
			}
			q.dead.s = fit(q.dead.s)
			for _, h := range q.ready.heaps {
				h.s = fit(h.s)
			}
		}
	case 2:
		e.seqs.over.fitTable(e)
	case 3:
		// The rare fields' slot table (extrefs.go) and the Go maps
		// (reservations, tag sets) keep their largest size too, but
		// rebuilding one walks all of it in one turn: ~50 ms for the
		// rare-field map after 10 M far jobs went out, for ~1.5 bytes per
		// job put. They stay.
		e.ids.fitTable(e)
		e.refits = 0
		return
	}
	e.refits++
}

// fit returns s in a backing array of about its length if more than half
// of the array is unused.
func fit[T any](s []T) []T {
	if cap(s) <= 64 || len(s) >= cap(s)/2 {
		return s
	}
	return append(make([]T, 0, len(s)+len(s)/8), s...)
}

// moveJob moves the job in slot from to the free slot to.
func (e *Engine) moveJob(from, to uint32) {
	j := e.jobs.get(from)
	q := e.queues[e.jq(j)]
	// the listing index compares ids through the slot: out before the
	// record moves, in after
	ii := idIndexOf(j.state)
	if ii >= 0 {
		q.lists.byID[ii].Delete(e.idItemOf(from))
	}
	*e.jobs.get(to) = *j
	j = e.jobs.get(to)
	if j.flags&fHasExt != 0 {
		// first: the id table hashes a client id read from here
		ref, _ := e.exts.refs.get(from)
		e.exts.refs.del(from)
		e.exts.refs.set(to, ref)
		if x, _ := e.exts.get(to); len(x.tags) > 0 {
			for i := 0; i+1 < len(x.tags); i += 2 {
				set := e.tagIndex[tagKey(x.tags[i], x.tags[i+1])]
				delete(set, from)
				set[to] = struct{}{}
			}
		}
	}
	e.seqs.retarget(e, from, to)
	if !j.bySeq() {
		e.ids.retarget(e, from, to)
	}
	if j.flags&fAttempt != 0 {
		e.attempts[to] = e.attempts[from]
		delete(e.attempts, from)
	}
	switch j.state {
	case StateDelayed:
		e.delayed.s[j.hidx] = to
	case StateReady:
		q.ready.byPrio[e.jprio(j)].s[j.hidx] = to
	case StateBlocked:
		if q.cfg.KeyMode == KeyExclusive {
			q.chains[j.key].sub.s[j.hidx] = to
		}
	case StateReserved:
		e.resv[to] = e.resv[from]
		delete(e.resv, from)
		e.reserved.s[j.hidx].slot = to
	case StateDead:
		q.dead.s[j.hidx] = to
	case StateCompleted:
		e.completed.s[j.hidx].slot = to
	}
	if j.key != 0 && inChain(e.phaseOf(to)) {
		c := q.chains[j.key]
		live := c.live()
		seq := j.seqNo()
		i := sort.Search(len(live), func(i int) bool { return e.jobs.get(live[i]).seqNo() >= seq })
		live[i] = to
		if c.rep == from {
			c.rep = to
		}
	}
	if ii >= 0 {
		q.lists.byID[ii].Set(e.idItemOf(to))
	}
	*e.jobs.get(from) = job{}
}

// retarget makes the index entry of the job in slot from point at slot
// to, which holds the same job now.
func (x *seqIndex) retarget(e *Engine, from, to uint32) {
	seq := e.jobs.get(to).seqNo()
	if p := x.page(seq >> seqPageBits); p != nil {
		p.slots[seq&(seqPageLen-1)] = to
		return
	}
	x.over.retarget(e, from, to)
}

// retarget replaces slot from by slot to, whose key is the same.
func (t *slotTable[H]) retarget(e *Engine, from, to uint32) {
	mask := uint64(len(t.slots) - 1)
	for i := t.h.hash(e, to) & mask; t.slots[i] != noSlot; i = (i + 1) & mask {
		if t.slots[i] == from {
			t.slots[i] = to
			return
		}
	}
}

// fitTable rebuilds the table at about twice its members if it is more
// than eight times as large.
func (t *slotTable[H]) fitTable(e *Engine) {
	size := 1024
	for size < t.n*2 {
		size *= 2
	}
	if len(t.slots) <= size*4 {
		return
	}
	t.resize(e, size)
}
