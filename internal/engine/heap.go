package engine

// Heaps hold slots, not jobs: the order is read from the slab, and each job
// records its position (job.hidx) so any member can be removed in O(log n).
// A job is in at most one heap at a time — the one its state names.

type order uint8

const (
	byServing    order = iota // ready: (priority, activate_at, seq)
	byActivation              // delayed: (activate_at, seq)
	bySeq                     // dead: enqueue order
)

type slotHeap struct {
	s   []uint32
	ord order
}

func (e *Engine) less(h *slotHeap, a, b uint32) bool { return e.lessBy(h.ord, a, b) }

func (e *Engine) lessBy(ord order, a, b uint32) bool {
	ja, jb := e.jobs.get(a), e.jobs.get(b)
	switch ord {
	case byServing:
		if pa, pb := e.jprio(ja), e.jprio(jb); pa != pb {
			return pa < pb
		}
		fallthrough
	case byActivation:
		if ja.atMS() != jb.atMS() {
			return ja.atMS() < jb.atMS()
		}
	}
	return ja.seqNo() < jb.seqNo()
}

func (e *Engine) hpush(h *slotHeap, slot uint32) {
	h.s = append(h.s, slot)
	i := len(h.s) - 1
	e.jobs.get(slot).hidx = uint32(i)
	e.hup(h, i)
}

func (e *Engine) hremove(h *slotHeap, slot uint32) {
	i := int(e.jobs.get(slot).hidx)
	last := len(h.s) - 1
	if i != last {
		h.s[i] = h.s[last]
		e.jobs.get(h.s[i]).hidx = uint32(i)
	}
	h.s = h.s[:last]
	if i != last {
		e.hfix(h, i)
	}
}

func (e *Engine) hfix(h *slotHeap, i int) {
	if !e.hdown(h, i) {
		e.hup(h, i)
	}
}

func (e *Engine) hup(h *slotHeap, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(h, h.s[i], h.s[p]) {
			break
		}
		e.hswap(h, i, p)
		i = p
	}
}

func (e *Engine) hdown(h *slotHeap, i0 int) bool {
	i, n := i0, len(h.s)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && e.less(h, h.s[r], h.s[l]) {
			m = r
		}
		if !e.less(h, h.s[m], h.s[i]) {
			break
		}
		e.hswap(h, i, m)
		i = m
	}
	return i > i0
}

func (e *Engine) hswap(h *slotHeap, i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	e.jobs.get(h.s[i]).hidx = uint32(i)
	e.jobs.get(h.s[j]).hidx = uint32(j)
}

// hbest appends to dst up to k slots of h in heap order without changing h:
// a best-first walk of the heap tree whose frontier is itself a small heap
// of positions, O(k log k).
func (e *Engine) hbest(h *slotHeap, k int, dst []uint32) []uint32 {
	if k <= 0 || len(h.s) == 0 {
		return dst
	}
	if k == 1 {
		return append(dst, h.s[0])
	}
	k = min(k, len(h.s)) // k comes from clients (respawn, kick limits)
	lessPos := func(a, b int) bool { return e.less(h, h.s[a], h.s[b]) }
	front := make([]int, 1, 2*k+1)
	for len(front) > 0 && k > 0 {
		p := front[0]
		last := len(front) - 1
		front[0] = front[last]
		front = front[:last]
		siftDown(front, 0, lessPos)
		dst = append(dst, h.s[p])
		k--
		for _, c := range [2]int{2*p + 1, 2*p + 2} {
			if c < len(h.s) {
				front = append(front, c)
				siftUp(front, len(front)-1, lessPos)
			}
		}
	}
	return dst
}

func siftUp(a []int, i int, less func(x, y int) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !less(a[i], a[p]) {
			return
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func siftDown(a []int, i int, less func(x, y int) bool) {
	for {
		l := 2*i + 1
		if l >= len(a) {
			return
		}
		m := l
		if r := l + 1; r < len(a) && less(a[r], a[l]) {
			m = r
		}
		if !less(a[m], a[i]) {
			return
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
}

// timeHeap orders slots by an explicit deadline carried in the entry; used
// for the few jobs that have one (reserved, completed).
type timeEnt struct {
	t    int64
	slot uint32
}

type timeHeap struct{ s []timeEnt }

func (e *Engine) tless(h *timeHeap, i, j int) bool {
	if h.s[i].t != h.s[j].t {
		return h.s[i].t < h.s[j].t
	}
	return e.jobs.get(h.s[i].slot).seqNo() < e.jobs.get(h.s[j].slot).seqNo()
}

func (e *Engine) tswap(h *timeHeap, i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	e.jobs.get(h.s[i].slot).hidx = uint32(i)
	e.jobs.get(h.s[j].slot).hidx = uint32(j)
}

func (e *Engine) tpush(h *timeHeap, t int64, slot uint32) {
	h.s = append(h.s, timeEnt{t, slot})
	i := len(h.s) - 1
	e.jobs.get(slot).hidx = uint32(i)
	e.tup(h, i)
}

func (e *Engine) tup(h *timeHeap, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.tless(h, i, p) {
			break
		}
		e.tswap(h, i, p)
		i = p
	}
}

func (e *Engine) tdown(h *timeHeap, i0 int) bool {
	i, n := i0, len(h.s)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && e.tless(h, r, l) {
			m = r
		}
		if !e.tless(h, m, i) {
			break
		}
		e.tswap(h, i, m)
		i = m
	}
	return i > i0
}

func (e *Engine) tremove(h *timeHeap, slot uint32) {
	i := int(e.jobs.get(slot).hidx)
	last := len(h.s) - 1
	if i != last {
		h.s[i] = h.s[last]
		e.jobs.get(h.s[i].slot).hidx = uint32(i)
	}
	h.s = h.s[:last]
	if i != last && !e.tdown(h, i) {
		e.tup(h, i)
	}
}

func (e *Engine) tupdate(h *timeHeap, slot uint32, t int64) {
	i := int(e.jobs.get(slot).hidx)
	h.s[i].t = t
	if !e.tdown(h, i) {
		e.tup(h, i)
	}
}
