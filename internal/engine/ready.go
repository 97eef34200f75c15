package engine

import "slices"

// readySet holds a queue's ready jobs as one heap per priority, each in
// (activation, seq) order, and a small heap of those heaps by priority.
// Serving order is the lowest priority's root; the oldest ready job is the
// oldest of the roots, so oldest_ready_age costs O(priorities) rather than
// a walk of every ready job (queues.go, docs/architecture.md "Memory per
// job"). A job still costs one 4-byte heap slot; a priority costs one
// prioHeap while it has ready jobs. A member's priority never changes
// while it is in the set (every priority change unplaces the job first).
type readySet struct {
	n      int
	heaps  []*prioHeap // non-empty heaps, a min-heap by priority
	byPrio map[uint32]*prioHeap
	spare  *prioHeap // the last emptied heap, kept for a queue that drains and refills
}

type prioHeap struct {
	slotHeap
	prio uint32
	pos  int // index in readySet.heaps
}

func newReadySet() readySet { return readySet{byPrio: map[uint32]*prioHeap{}} }

// head is the next ready job in serving order, or noSlot.
func (r *readySet) head() uint32 {
	if r.n == 0 {
		return noSlot
	}
	return r.heaps[0].s[0]
}

func (e *Engine) rpush(r *readySet, slot uint32) {
	p := e.jprio(e.jobs.get(slot))
	h := r.byPrio[p]
	if h == nil {
		h = r.spare
		r.spare = nil
		if h == nil {
			h = &prioHeap{slotHeap: slotHeap{ord: byServing}}
		}
		h.prio, h.pos = p, len(r.heaps)
		r.byPrio[p] = h
		r.heaps = append(r.heaps, h)
		r.up(h.pos)
	}
	e.hpush(&h.slotHeap, slot)
	r.n++
}

func (e *Engine) rremove(r *readySet, slot uint32) {
	h := r.byPrio[e.jprio(e.jobs.get(slot))]
	e.hremove(&h.slotHeap, slot)
	r.n--
	if len(h.s) > 0 {
		return
	}
	delete(r.byPrio, h.prio)
	i, last := h.pos, len(r.heaps)-1
	if i != last {
		r.swap(i, last)
	}
	r.heaps[last] = nil
	r.heaps = r.heaps[:last]
	if i != last && !r.down(i) {
		r.up(i)
	}
	r.spare = h
}

// oldestAt is the earliest activation time among the ready jobs (the
// caller checks r.n > 0).
func (e *Engine) oldestAt(r *readySet) int64 {
	oldest := e.jobs.get(r.heaps[0].s[0]).atMS()
	e.visited += uint64(len(r.heaps))
	for _, h := range r.heaps[1:] {
		oldest = min(oldest, e.jobs.get(h.s[0]).atMS())
	}
	return oldest
}

// rbest appends to dst up to k ready jobs in serving order without
// changing the set.
func (e *Engine) rbest(r *readySet, k int, dst []uint32) []uint32 {
	if k <= 0 || r.n == 0 {
		return dst
	}
	n0 := len(dst)
	dst = e.hbest(&r.heaps[0].slotHeap, k, dst)
	if len(dst)-n0 == k || len(r.heaps) == 1 {
		return dst
	}
	rest := slices.Clone(r.heaps[1:])
	slices.SortFunc(rest, func(a, b *prioHeap) int {
		switch {
		case a.prio < b.prio:
			return -1
		case a.prio > b.prio:
			return 1
		}
		return 0
	})
	for _, h := range rest {
		if len(dst)-n0 >= k {
			break
		}
		dst = e.hbest(&h.slotHeap, k-(len(dst)-n0), dst)
	}
	return dst
}

// countBelow counts the ready jobs with priority below threshold.
func (r *readySet) countBelow(threshold uint32) int {
	n := 0
	for _, h := range r.heaps {
		if h.prio < threshold {
			n += len(h.s)
		}
	}
	return n
}

// each visits every ready job, in no particular order.
func (r *readySet) each(fn func(slot uint32)) {
	for _, h := range r.heaps {
		for _, s := range h.s {
			fn(s)
		}
	}
}

func (r *readySet) swap(i, j int) {
	r.heaps[i], r.heaps[j] = r.heaps[j], r.heaps[i]
	r.heaps[i].pos, r.heaps[j].pos = i, j
}

func (r *readySet) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if r.heaps[i].prio >= r.heaps[p].prio {
			return
		}
		r.swap(i, p)
		i = p
	}
}

func (r *readySet) down(i0 int) bool {
	i, n := i0, len(r.heaps)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if rr := l + 1; rr < n && r.heaps[rr].prio < r.heaps[l].prio {
			m = rr
		}
		if r.heaps[m].prio >= r.heaps[i].prio {
			break
		}
		r.swap(i, m)
		i = m
	}
	return i > i0
}
