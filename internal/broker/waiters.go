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
	ns   string
	take *engine.TakeRequest
	// result
	q, id string
}

type waiters struct {
	byQueue map[string][]*waiter // "ns\x00queue" → takes, oldest first
	results []*waiter
	dl      deadlineHeap
}

func qkey(ns, q string) string { return ns + "\x00" + q }

func (ws *waiters) park(w *waiter) {
	if ws.byQueue == nil {
		ws.byQueue = map[string][]*waiter{}
	}
	w.req.park = true
	if w.take != nil {
		for _, q := range w.take.Queues {
			ws.byQueue[qkey(w.ns, q)] = append(ws.byQueue[qkey(w.ns, q)], w)
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
		for _, q := range w.take.Queues {
			k := qkey(w.ns, q)
			list := ws.byQueue[k]
			for i, o := range list {
				if o == w {
					list = append(list[:i], list[i+1:]...)
					break
				}
			}
			if len(list) == 0 {
				delete(ws.byQueue, k)
			} else {
				ws.byQueue[k] = list
			}
		}
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
		for {
			list := ws.byQueue[qkey(ns, q)]
			if len(list) == 0 {
				return
			}
			w := list[0]
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
