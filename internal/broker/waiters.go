package broker

import (
	"container/heap"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Waiters are parked requests: long-poll takes waiting for a job, result
// waits waiting for a job to complete. They live on the loop; the loop
// serves them after every batch from what the batch changed, and a single
// timer covers their deadlines, so a take returns as soon as a job is
// available — no polling.
type waiter struct {
	req      *request
	deadline time.Time
	gone     atomic.Bool // the client went away
	idx      int         // position in the deadline heap

	// take
	ns    string
	take  *engine.TakeRequest
	links []waitLink  // one per queue of take, in byQueue's lists
	link1 [1]waitLink // links' storage for a take of one queue
	// result
	q, id string
}

// A waitLink is a take's place in one queue's list of waiting takes. The
// lists are linked so a take leaves them in O(1) whatever its position:
// with a thousand consumers parked on one queue, every job answered the
// oldest and used to shift the whole list.
type waitLink struct {
	w          *waiter
	key        string
	prev, next *waitLink
}

// waitList is one queue's waiting takes, oldest first.
type waitList struct {
	head, tail *waitLink
}

type waiters struct {
	byQueue map[string]*waitList // "ns\x00queue" → takes, oldest first
	results []*waiter
	dl      deadlineHeap
}

func qkey(ns, q string) string { return ns + "\x00" + q }

func (ws *waiters) park(w *waiter) {
	if ws.byQueue == nil {
		ws.byQueue = map[string]*waitList{}
	}
	w.req.park = true
	if w.take != nil {
		if len(w.take.Queues) == 1 {
			w.links = w.link1[:]
		} else {
			w.links = make([]waitLink, len(w.take.Queues))
		}
		for i, q := range w.take.Queues {
			l := &w.links[i]
			l.w, l.key = w, qkey(w.ns, q)
			list := ws.byQueue[l.key]
			if list == nil {
				list = &waitList{}
				ws.byQueue[l.key] = list
			}
			if l.prev = list.tail; l.prev != nil {
				l.prev.next = l
			} else {
				list.head = l
			}
			list.tail = l
		}
	} else {
		ws.results = append(ws.results, w)
	}
	heap.Push(&ws.dl, w)
}

// answer completes a parked request.
func (ws *waiters) answer(w *waiter, res any, err error, out []*request) []*request {
	if w.idx >= 0 {
		heap.Remove(&ws.dl, w.idx)
	}
	if w.take != nil {
		for i := range w.links {
			ws.unlink(&w.links[i])
		}
		w.links = nil
	} else {
		for i, o := range ws.results {
			if o == w {
				ws.results = append(ws.results[:i], ws.results[i+1:]...)
				break
			}
		}
	}
	w.req.park = false
	w.req.res, w.req.err = res, err
	return append(out, w.req)
}

// unlink takes l out of its queue's list, and drops the list once empty.
func (ws *waiters) unlink(l *waitLink) {
	list := ws.byQueue[l.key]
	if list == nil {
		return
	}
	if l.prev != nil {
		l.prev.next = l.next
	} else if list.head == l {
		list.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else if list.tail == l {
		list.tail = l.prev
	}
	l.prev, l.next = nil, nil
	if list.head == nil {
		delete(ws.byQueue, l.key)
	}
}

// serve runs on the loop after a batch: expired and abandoned waiters get
// their empty answers, takes on queues that gained jobs are retried in
// arrival order, result waits whose job finished are answered. It returns
// the requests to answer once the batch is durable.
func (ws *waiters) serve(b *Broker, now time.Time) []*request {
	var out []*request
	for len(ws.dl) > 0 && (!ws.dl[0].deadline.After(now) || ws.dl[0].gone.Load()) {
		w := ws.dl[0]
		if w.take != nil {
			out = ws.answer(w, []engine.Job(nil), nil, out)
		} else {
			info, err := b.eng.Result(now, w.ns, w.q, w.id)
			out = ws.answer(w, resultWait{info: info}, err, out)
		}
	}
	b.eng.TakeDirty(func(ns, q string) {
		k := qkey(ns, q)
		for {
			list := ws.byQueue[k]
			if list == nil {
				return
			}
			w := list.head.w
			if w.gone.Load() {
				out = ws.answer(w, []engine.Job(nil), nil, out)
				continue
			}
			jobs, err := b.eng.Take(now, w.ns, *w.take)
			if err == nil && len(jobs) == 0 {
				return // nothing left for anyone waiting here
			}
			for i := range jobs {
				b.opts.Observer.Lateness(now.Sub(jobs[i].ActivateAt))
			}
			out = ws.answer(w, jobs, err, out)
		}
	})
	for i := 0; i < len(ws.results); i++ {
		w := ws.results[i]
		info, err := b.eng.Result(now, w.ns, w.q, w.id)
		if err != nil || info.State == engine.StateCompleted {
			out = ws.answer(w, resultWait{info: info, done: err == nil}, err, out)
			i--
		}
	}
	return out
}

func (ws *waiters) nextDeadline() (time.Time, bool) {
	if len(ws.dl) == 0 {
		return time.Time{}, false
	}
	return ws.dl[0].deadline, true
}

// releaseAll answers every waiter with nothing (shutdown).
func (ws *waiters) releaseAll() {
	for len(ws.dl) > 0 {
		w := ws.dl[0]
		var res any = []engine.Job(nil)
		if w.take == nil {
			res = resultWait{}
		}
		ws.answer(w, res, nil, nil)
		w.req.finish()
	}
}

type resultWait struct {
	info engine.ResultInfo
	done bool
}

type deadlineHeap []*waiter

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *deadlineHeap) Push(x any) {
	w := x.(*waiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	w.idx = -1
	*h = old[:len(old)-1]
	return w
}
