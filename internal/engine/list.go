package engine

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Listing orders (docs/api.md, list): ready by serving order, delayed by activation
// time, any other single state by id, mixed states by enqueue order.
type listOrder uint8

const (
	listBySeq listOrder = iota
	listByServing
	listByActivation
	listByID
)

type listKey struct {
	prio uint32
	at   int64
	seq  uint64
	id   string
}

func (k listKey) less(o listKey, ord listOrder) bool {
	switch ord {
	case listByServing:
		if k.prio != o.prio {
			return k.prio < o.prio
		}
		fallthrough
	case listByActivation:
		if k.at != o.at {
			return k.at < o.at
		}
	case listByID:
		if k.id != o.id {
			return k.id < o.id
		}
	}
	return k.seq < o.seq
}

func (k listKey) cursor(ord listOrder) string {
	s := fmt.Sprintf("%d|%d|%d|%d|%s", ord, k.prio, k.at, k.seq, k.id)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseCursor(c string, ord listOrder) (listKey, error) {
	bad := badf("cursor", "not a cursor from a previous page of this listing")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return listKey{}, bad
	}
	parts := strings.SplitN(string(b), "|", 5)
	if len(parts) != 5 || parts[0] != strconv.Itoa(int(ord)) {
		return listKey{}, bad
	}
	prio, err1 := strconv.ParseUint(parts[1], 10, 32)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	seq, err3 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return listKey{}, bad
	}
	return listKey{prio: uint32(prio), at: at, seq: seq, id: parts[4]}, nil
}

// listOrderOf is the order of a listing of the given states.
func listOrderOf(states []State) listOrder {
	if len(states) != 1 {
		return listBySeq
	}
	switch states[0] {
	case StateReady:
		return listByServing
	case StateDelayed:
		return listByActivation
	}
	return listByID
}

// List pages through a queue's jobs matching a filter.
func (e *Engine) List(now time.Time, ns, qn string, req ListRequest) (ListResult, error) {
	e.Advance(now)
	limit := req.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 0 || limit > MaxListLimit {
		return ListResult{}, badf("limit", "must be between 1 and %d, got %d", MaxListLimit, req.Limit)
	}
	f := req.Filter
	if err := checkFilter(&f); err != nil {
		return ListResult{}, err
	}
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return ListResult{}, err
	}
	ord := listOrderOf(f.States)
	var after *listKey
	if req.Cursor != "" {
		k, err := parseCursor(req.Cursor, ord)
		if err != nil {
			return ListResult{}, err
		}
		after = &k
	}
	mask := stateMask(f.States, allStates)
	return e.listResult(q, e.listPage(q, &f, mask, after, limit, ord), limit, ord), nil
}

// listPage answers the first limit+1 jobs of q matching f after the
// cursor, in the listing's order.
//
// A filter may name a candidate set smaller than what the walk of the
// listing's order would read: the smallest of its tags' sets (the tag
// index), or for a key its chain (the key's pending and reserved jobs,
// place.go) with the queue's dead and completed jobs if those states are
// listed. The walk then runs within a budget of that set's size plus a
// page, and when the matching jobs are too rare in it to fill the page in
// time the set is read and sorted instead. Either way a page costs at
// most about twice the smaller of the two.
func (e *Engine) listPage(q *queue, f *Filter, mask uint8, after *listKey, limit int, ord listOrder) []listItem {
	cands, byKey := -1, false
	if len(f.Tags) > 0 {
		cands = e.tagSetLen(f)
	}
	// (an empty key selects the jobs without one: no chain holds those)
	if f.HasKey && f.Key != "" {
		n := 0
		if c := e.keyChain(q, f.Key); c != nil {
			n = len(c.live())
		}
		if mask&(1<<StateDead) != 0 {
			n += int(q.counts.Dead)
		}
		if mask&(1<<StateCompleted) != 0 {
			n += int(q.counts.Completed)
		}
		if cands < 0 || n < cands {
			cands, byKey = n, true
		}
	}
	if cands < 0 {
		items, _ := e.listWalk(q, f, mask, after, limit, ord, 0)
		return items
	}
	if items, ok := e.listWalk(q, f, mask, after, limit, ord, cands+limit+1); ok {
		return items
	}
	var items []listItem
	if byKey {
		items = e.listKeyed(q, f, mask, after, ord)
	} else {
		items = e.listScan(q, f, mask, after, ord)
	}
	return items[:min(len(items), limit+1)]
}

// keyChain is the chain of q's jobs with key k, if any.
func (e *Engine) keyChain(q *queue, k string) *chain {
	id, ok := e.keys.ids[k]
	if !ok {
		return nil
	}
	return q.chains[id]
}

// listKeyed is listScan over the candidates of a key filter: the key's
// chain, and the queue's dead and completed jobs if listed.
func (e *Engine) listKeyed(q *queue, f *Filter, mask uint8, after *listKey, ord listOrder) []listItem {
	var items []listItem
	visit := func(slot uint32) {
		e.visited++
		if !e.matches(slot, f, mask) {
			return
		}
		k := e.listKeyOf(slot, ord)
		if after != nil && !after.less(k, ord) {
			return
		}
		items = append(items, listItem{k, slot})
	}
	if c := e.keyChain(q, f.Key); c != nil {
		for _, slot := range c.live() {
			visit(slot)
		}
	}
	for _, s := range []State{StateDead, StateCompleted} {
		if t := q.lists.byID[idIndexOf(s)]; t != nil && mask&(1<<s) != 0 {
			t.Scan(func(it idItem) bool {
				visit(it.slot)
				return true
			})
		}
	}
	sortItems(items, ord)
	return items
}

// listWalk answers the first limit+1 jobs of q matching f after the
// cursor, in the listing's order, through the index of that order:
// ready jobs from the queue's priority heaps, delayed ones from the
// delayed heap, one other state from its id index, mixed states from the
// sequence index over the queue's blocks (listindex.go). With a budget
// (> 0) it gives up (ok false) once it has read that many jobs.
func (e *Engine) listWalk(q *queue, f *Filter, mask uint8, after *listKey, limit int, ord listOrder, budget int) (items []listItem, ok bool) {
	w := walk{budget: budget}
	switch ord {
	case listByServing:
		items = e.listReady(q, f, mask, after, limit, &w)
	case listByActivation:
		items, ok = e.listDelayed(q, f, mask, after, limit)
		if !ok {
			items = e.listQueueDelayed(q, f, mask, after, limit, &w)
		}
	case listByID:
		items = e.listByID(q, f, f.States[0], after, limit, &w)
	default:
		items = e.listSeq(q, f, mask, after, limit, &w)
	}
	return items, !w.over
}

// walk counts the jobs a listing's walk reads against its budget.
type walk struct {
	budget, read int
	over         bool
}

// step counts one job read; false once the budget is spent.
func (w *walk) step(e *Engine) bool {
	e.visited++
	w.read++
	if w.budget > 0 && w.read > w.budget {
		w.over = true
		return false
	}
	return true
}

// tagSetLen is the size of the smallest tag set f names.
func (e *Engine) tagSetLen(f *Filter) int {
	n := -1
	for k, v := range f.Tags {
		if l := len(e.tagIndex[tagKey(k, v)]); n < 0 || l < n {
			n = l
		}
	}
	return max(n, 0)
}

// listKeyOf is a job's place in the listing's order.
func (e *Engine) listKeyOf(slot uint32, ord listOrder) listKey {
	j := e.jobs.get(slot)
	k := listKey{prio: e.jprio(j), at: e.activateAt(slot), seq: j.seqNo()}
	if ord == listByID {
		k.id = e.jobID(slot)
	}
	return k
}

// listScan answers every job of q matching f after the cursor, in the
// listing's order: a pass over the candidates (the tag index, else every
// job) and a sort. It serves tag filters whose walk ran out of budget
// (cost: the tag set), and is what tests compare every walk with.
func (e *Engine) listScan(q *queue, f *Filter, mask uint8, after *listKey, ord listOrder) []listItem {
	var items []listItem
	inQueue := func(qi uint32) bool {
		e.visited++ // every candidate read, the queue's or not
		return qi == q.idx
	}
	e.candidates(f, inQueue, func(slot uint32) {
		if !e.matches(slot, f, mask) {
			return
		}
		k := e.listKeyOf(slot, ord)
		if after != nil && !after.less(k, ord) {
			return
		}
		items = append(items, listItem{k, slot})
	})
	sortItems(items, ord)
	return items
}

func sortItems(items []listItem, ord listOrder) {
	slices.SortFunc(items, func(a, b listItem) int {
		if a.k.less(b.k, ord) {
			return -1
		}
		if b.k.less(a.k, ord) {
			return 1
		}
		return 0
	})
}

// listSeq answers the first limit+1 jobs of q in the states of mask after
// the cursor in enqueue order. It walks the sequence index from the
// cursor's number, visiting only the blocks of 4096 numbers that hold jobs
// of q in those states (listindex.go), and within a block stops once it
// has seen them all. A page costs the page plus at most one block's 4096
// numbers for each block it touches, plus a step over the queue's blocks
// that hold none of the listed states.
func (e *Engine) listSeq(q *queue, f *Filter, mask uint8, after *listKey, limit int, w *walk) []listItem {
	if q.lists.blocks == nil {
		return nil
	}
	var start uint64
	if after != nil {
		start = after.seq + 1
	}
	var out []listItem
	q.lists.probe.idx = start >> seqPageBits
	q.lists.blocks.Ascend(&q.lists.probe, func(b *seqBlock) bool {
		left := b.count(mask)
		if left == 0 {
			return true
		}
		lo := b.idx << seqPageBits
		p := e.seqs.page(b.idx)
		for seq := max(lo, start); seq < lo+seqPageLen && left > 0; seq++ {
			slot := e.blockSlot(p, lo, seq)
			if slot == noSlot {
				continue
			}
			if !w.step(e) {
				return false
			}
			j := e.jobs.get(slot)
			if e.jq(j) != q.idx || mask&(1<<j.state) == 0 {
				continue
			}
			left--
			if e.matches(slot, f, mask) {
				out = append(out, listItem{e.listKeyOf(slot, listBySeq), slot})
				if len(out) > limit {
					return false
				}
			}
		}
		return true
	})
	return out
}

// listByID answers the first limit+1 jobs of q in state s (neither ready
// nor delayed) after the cursor in id order, from the queue's id index of
// that state (listindex.go): a seek to the cursor, then the page.
func (e *Engine) listByID(q *queue, f *Filter, s State, after *listKey, limit int, w *walk) []listItem {
	t := q.lists.byID[idIndexOf(s)]
	if t == nil {
		return nil
	}
	mask := uint8(1) << s
	var out []listItem
	visit := func(it idItem) bool {
		if !w.step(e) {
			return false
		}
		k := e.listKeyOf(it.slot, listByID)
		if (after == nil || after.less(k, listByID)) && e.matches(it.slot, f, mask) {
			out = append(out, listItem{k, it.slot})
		}
		return len(out) <= limit
	}
	if after == nil {
		t.Scan(visit)
		return out
	}
	e.idPivot = after.id
	t.Ascend(pivotItem(after.id), visit)
	e.idPivot = ""
	return out
}

// listQueueDelayed answers the first limit+1 delayed jobs of q after the
// cursor in activation order from the queue's own blocks, when the shared
// delayed heap holds too many other queues' jobs before them: it reads
// every delayed job of the queue (at most 4096 numbers per block holding
// one) and sorts those after the cursor.
func (e *Engine) listQueueDelayed(q *queue, f *Filter, mask uint8, after *listKey, limit int, w *walk) []listItem {
	if q.lists.blocks == nil {
		return nil
	}
	var out []listItem
	q.lists.blocks.Scan(func(b *seqBlock) bool {
		left := b.n[StateDelayed-1]
		lo := b.idx << seqPageBits
		p := e.seqs.page(b.idx)
		for seq := lo; seq < lo+seqPageLen && left > 0; seq++ {
			slot := e.blockSlot(p, lo, seq)
			if slot == noSlot {
				continue
			}
			if !w.step(e) {
				return false
			}
			j := e.jobs.get(slot)
			if e.jq(j) != q.idx || j.state != StateDelayed {
				continue
			}
			left--
			if !e.matches(slot, f, mask) {
				continue
			}
			if k := e.listKeyOf(slot, listByActivation); after == nil || after.less(k, listByActivation) {
				out = append(out, listItem{k, slot})
			}
		}
		return true
	})
	sortItems(out, listByActivation)
	return out[:min(len(out), limit+1)]
}

// listItem is a job of a page with its place in the listing's order.
type listItem struct {
	k    listKey
	slot uint32
}

// listResult turns up to limit+1 items, in order, into a page.
func (e *Engine) listResult(q *queue, items []listItem, limit int, ord listOrder) ListResult {
	var res ListResult
	if len(items) > limit {
		items = items[:limit]
		res.NextCursor = items[limit-1].k.cursor(ord)
	}
	res.Jobs = make([]Job, len(items))
	for i, it := range items {
		res.Jobs[i] = e.view(q, it.slot)
		res.Jobs[i].Receipt = ""
	}
	return res
}

// listReady answers the first limit+1 ready jobs of q after the cursor in
// serving order without looking at the rest of the engine: it walks the
// queue's priority heaps (ready.go) in priority order, each best-first
// from its root with a frontier of heap positions, since a heap's
// children never come before their parent. A page costs the jobs before
// the cursor in its priority plus the page, times a logarithm — the first
// page of a queue of 100 M jobs reads about a page of jobs, where a scan
// read all of them.
func (e *Engine) listReady(q *queue, f *Filter, mask uint8, after *listKey, limit int, w *walk) []listItem {
	prios := make([]uint32, 0, len(q.ready.byPrio))
	for p := range q.ready.byPrio {
		if after == nil || p >= after.prio {
			prios = append(prios, p)
		}
	}
	slices.Sort(prios)
	var out []listItem
	for _, p := range prios {
		e.walkInOrder(&q.ready.byPrio[p].slotHeap, func(slot uint32) bool {
			if !w.step(e) {
				return false
			}
			j := e.jobs.get(slot)
			k := listKey{prio: p, at: j.atMS(), seq: j.seqNo()}
			if (after == nil || after.less(k, listByServing)) && e.matches(slot, f, mask) {
				out = append(out, listItem{k, slot})
			}
			return len(out) <= limit
		})
		if len(out) > limit || w.over {
			break
		}
	}
	return out
}

// listDelayed answers the first limit+1 delayed jobs of q after the cursor
// in activation order by walking the engine's delayed heap (shared by every
// queue) best-first. When the queue's jobs are a small share of what comes
// first, the walk gives up after a budget and the caller scans instead
// (ok false), so it never costs much more than the scan it replaces.
func (e *Engine) listDelayed(q *queue, f *Filter, mask uint8, after *listKey, limit int) (out []listItem, ok bool) {
	budget := 16*(limit+1) + 1024
	done := true
	e.walkInOrder(&e.delayed, func(slot uint32) bool {
		e.visited++
		if budget--; budget < 0 {
			done = false
			return false
		}
		j := e.jobs.get(slot)
		if e.jq(j) != q.idx {
			return true
		}
		k := listKey{prio: e.jprio(j), at: j.atMS(), seq: j.seqNo()}
		if (after == nil || after.less(k, listByActivation)) && e.matches(slot, f, mask) {
			out = append(out, listItem{k, slot})
		}
		return len(out) <= limit
	})
	return out, done || len(out) > limit
}

// walkInOrder calls fn with the members of h in h's order until fn answers
// false, reading only as far as it goes: best-first from the root with a
// frontier of heap positions, since a member never comes before its
// parent. Visiting the first m members costs O(m log m).
func (e *Engine) walkInOrder(h *slotHeap, fn func(slot uint32) bool) {
	if len(h.s) == 0 {
		return
	}
	fr := frontier{e: e, h: h}
	fr.push(0)
	for len(fr.pos) > 0 {
		i := fr.pop()
		if !fn(h.s[i]) {
			return
		}
		for c := 2*i + 1; c <= 2*i+2 && c < len(h.s); c++ {
			fr.push(c)
		}
	}
}

// frontier is a min-heap of positions in a slot heap, by that heap's order.
type frontier struct {
	e   *Engine
	h   *slotHeap
	pos []int
}

func (f *frontier) less(a, b int) bool { return f.e.less(f.h, f.h.s[f.pos[a]], f.h.s[f.pos[b]]) }

func (f *frontier) push(i int) {
	f.pos = append(f.pos, i)
	for c := len(f.pos) - 1; c > 0; {
		p := (c - 1) / 2
		if !f.less(c, p) {
			break
		}
		f.pos[c], f.pos[p] = f.pos[p], f.pos[c]
		c = p
	}
}

func (f *frontier) pop() int {
	top := f.pos[0]
	last := len(f.pos) - 1
	f.pos[0] = f.pos[last]
	f.pos = f.pos[:last]
	for c := 0; ; {
		l, r, m := 2*c+1, 2*c+2, c
		if l < len(f.pos) && f.less(l, m) {
			m = l
		}
		if r < len(f.pos) && f.less(r, m) {
			m = r
		}
		if m == c {
			return top
		}
		f.pos[c], f.pos[m] = f.pos[m], f.pos[c]
		c = m
	}
}

// blockSlot is the slot of sequence number seq in the block starting at
// lo, whose page p is nil once it dissolved into the overflow table.
func (e *Engine) blockSlot(p *seqPage, lo, seq uint64) uint32 {
	if p != nil {
		return p.slots[seq-lo]
	}
	return e.seqOverLookup(seq)
}
