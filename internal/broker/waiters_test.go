package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

func takeWaiter(ns string, deadline time.Time, queues ...string) *waiter {
	return &waiter{req: &request{}, ns: ns, take: &engine.TakeRequest{Queues: queues}, deadline: deadline, idx: -1}
}

// order lists the takes waiting on queue q of namespace ns, oldest first,
// by the index of their first queue's name in names.
func order(ws *waiters, ns, q string, names map[*waiter]string) []string {
	var out []string
	if list := ws.byQueue[qkey(ns, q)]; list != nil {
		for l := list.head; l != nil; l = l.next {
			out = append(out, names[l.w])
		}
	}
	return out
}

func TestWaitersKeepArrivalOrderAcrossRemovals(t *testing.T) {
	var ws waiters
	now := time.Unix(1000, 0)
	w1 := takeWaiter("ns", now.Add(3*time.Second), "a", "b")
	w2 := takeWaiter("ns", now.Add(time.Second), "a")
	w3 := takeWaiter("ns", now.Add(2*time.Second), "b")
	w4 := takeWaiter("other", now.Add(4*time.Second), "a")
	names := map[*waiter]string{w1: "w1", w2: "w2", w3: "w3", w4: "w4"}
	for _, w := range []*waiter{w1, w2, w3, w4} {
		ws.park(w)
	}
	check := func(step, ns, q string, want ...string) {
		t.Helper()
		if got := order(&ws, ns, q, names); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: takes on %s/%s = %v, want %v", step, ns, q, got, want)
		}
	}
	check("parked", "ns", "a", "w1", "w2")
	check("parked", "ns", "b", "w1", "w3")
	check("parked", "other", "a", "w4")

	// the youngest of a (the tail) leaves
	out := ws.answer(w2, []engine.Job(nil), nil, nil)
	if len(out) != 1 || out[0] != w2.req || w2.req.park {
		t.Fatalf("answer(w2) = %v, park %v", out, w2.req.park)
	}
	check("w2 answered", "ns", "a", "w1")
	// the oldest of both a and b (the heads) leaves
	ws.answer(w1, []engine.Job(nil), nil, nil)
	check("w1 answered", "ns", "a")
	check("w1 answered", "ns", "b", "w3")
	if _, ok := ws.byQueue[qkey("ns", "a")]; ok {
		t.Fatal("an empty list stays in byQueue")
	}
	// a new take queues behind the remaining one
	w5 := takeWaiter("ns", now.Add(5*time.Second), "b")
	names[w5] = "w5"
	ws.park(w5)
	check("w5 parked", "ns", "b", "w3", "w5")
	if d, ok := ws.nextDeadline(); !ok || !d.Equal(w3.deadline) {
		t.Fatalf("next deadline %v %v, want w3's %v", d, ok, w3.deadline)
	}
	ws.answer(w3, []engine.Job(nil), nil, nil)
	ws.answer(w5, []engine.Job(nil), nil, nil)
	ws.answer(w4, []engine.Job(nil), nil, nil)
	if len(ws.byQueue) != 0 || len(ws.dl) != 0 {
		t.Fatalf("after every answer: %d lists, %d deadlines left", len(ws.byQueue), len(ws.dl))
	}
}

// BenchmarkWaitersCycle is a consumer's turn with n others parked on the
// same queue: the oldest take is answered and a new one parks. Its cost
// must not grow with n beyond the deadline heap's log n.
func BenchmarkWaitersCycle(b *testing.B) {
	for _, n := range []int{64, 1000, 10000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			var ws waiters
			now := time.Unix(1000, 0)
			for i := range n {
				ws.park(takeWaiter("ns", now.Add(time.Duration(i)), "q"))
			}
			var out []*request
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := ws.byQueue[qkey("ns", "q")].head.w
				out = ws.answer(w, []engine.Job(nil), nil, out[:0])
				ws.park(takeWaiter("ns", now.Add(time.Duration(n+i)), "q"))
			}
		})
	}
}
