package realtime

import (
	"context"
	"slices"
	"testing"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/engine"
)

// TestConsumePrefetch: never more than prefetch jobs pushed and unacked;
// every ack makes room for exactly one more; all jobs arrive once.
func TestConsumePrefetch(t *testing.T) {
	e := newEnv(t, ws.Options{})
	const total, prefetch = 60, 4
	ids := e.put("default", "work", total)
	c := e.connect("")
	r := c.ok("consume", map[string]any{"queues": []string{"work"}, "prefetch": prefetch, "ttr": "1h"})
	if r.num("prefetch") != prefetch {
		t.Fatalf("consume answer %v", r)
	}
	unacked := map[string]msg{}
	var got []string
	pending := map[uint64]string{} // ack id → job id
	for len(got) < total {
		m := c.read()
		if _, isAnswer := m["id"]; isAnswer {
			jid, ok := pending[uint64(m.num("id"))]
			if !ok || m["error"] != nil {
				t.Fatalf("unexpected answer %v", m)
			}
			delete(pending, uint64(m.num("id")))
			delete(unacked, jid)
			continue
		}
		j := m.obj("job")
		if j == nil {
			t.Fatalf("want a job, got %v", m)
		}
		id := j.str("id")
		unacked[id] = j
		got = append(got, id)
		if len(unacked) > prefetch {
			t.Fatalf("%d jobs pushed and not acked, prefetch is %d", len(unacked), prefetch)
		}
		if n := e.reserved("default", "work"); n > prefetch {
			t.Fatalf("%d reserved by a consumer with prefetch %d", n, prefetch)
		}
		if j.str("receipt") == "" || j.str("queue") != "work" || string(j["payload"]) == "" {
			t.Fatalf("job push %v", j)
		}
		// Ack in bursts: hold the window full sometimes, so the consumer
		// really is at zero credit while we check.
		if len(unacked) == prefetch || len(got) == total {
			for jid, jm := range unacked {
				if slices.Contains(pendingJobs(pending), jid) {
					continue
				}
				aid := c.send("ack", map[string]any{"queue": "work", "id": jid, "receipt": jm.str("receipt"), "result": map[string]bool{"ok": true}})
				pending[aid] = jid
			}
		}
	}
	for len(pending) > 0 {
		m := c.read()
		delete(pending, uint64(m.num("id")))
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("got %d jobs, want each of %d once", len(got), len(ids))
	}
	if n := e.reserved("default", "work"); n != 0 {
		t.Fatalf("%d still reserved after acking everything", n)
	}
	// Queue is empty; a new put is pushed at once (the consumer long-polls).
	e.put("default", "work", 1)
	if j := c.push().obj("job"); j.str("queue") != "work" {
		t.Fatalf("after a new put: %v", j)
	}
}

// TestConsumeCloseGivesJobsBack: a closed socket's pushed, unacked jobs
// are available again at once, long before their one-hour TTR.
func TestConsumeCloseGivesJobsBack(t *testing.T) {
	e := newEnv(t, ws.Options{})
	ids := e.put("default", "jobs", 5)
	c := e.connect("")
	c.ok("consume", map[string]any{"queues": []string{"jobs"}, "prefetch": 3, "ttr": "1h"})
	var pushed, receipts []string
	for len(pushed) < 3 {
		j := c.push().obj("job")
		pushed = append(pushed, j.str("id"))
		receipts = append(receipts, j.str("receipt"))
	}
	// Settle one of them: it must not come back.
	c.ok("ack", map[string]any{"queue": "jobs", "id": pushed[0], "receipt": receipts[0]})
	c.c.Close()

	ctx := context.Background()
	var back []string
	for len(back) < 4 {
		jobs, err := e.b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"jobs"}, Max: 10}, wait)
		if err != nil || len(jobs) == 0 {
			t.Fatalf("take after close: %v %d (got %v so far)", err, len(jobs), back)
		}
		for _, j := range jobs {
			back = append(back, j.ID)
			if slices.Contains(pushed, j.ID) && (j.Attempt != 2 || j.LastError != "worker connection closed") {
				t.Errorf("job %s came back with attempt %d, last error %q", j.ID, j.Attempt, j.LastError)
			}
		}
	}
	want := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == pushed[0] })
	slices.Sort(back)
	slices.Sort(want)
	if !slices.Equal(back, want) {
		t.Fatalf("available after close: %v, want %v", back, want)
	}
}

func pendingJobs(p map[uint64]string) []string {
	var out []string
	for _, j := range p {
		out = append(out, j)
	}
	return out
}

func TestConsumeStopAndOps(t *testing.T) {
	e := newEnv(t, ws.Options{})
	c := e.connect("")
	// put over the socket, in order.
	for i := 0; i < 3; i++ {
		r := c.ok("put", map[string]any{"queue": "ops", "payload": map[string]int{"i": i}, "priority": 10})
		if r.str("id") == "" || r.str("state") != "ready" {
			t.Fatalf("put: %v", r)
		}
	}
	c.ok("consume", map[string]any{"queues": []string{"ops"}, "prefetch": 2})
	j1 := c.push().obj("job")
	j2 := c.push().obj("job")
	if string(j1["payload"]) != `{"i":0}` || string(j2["payload"]) != `{"i":1}` {
		t.Fatalf("order: %s %s", j1["payload"], j2["payload"])
	}
	r := c.ok("touch", map[string]any{"queue": "ops", "id": j1.str("id"), "receipt": j1.str("receipt"), "ttr": "10m"})
	if r.str("reserved_until") == "" {
		t.Fatalf("touch: %v", r)
	}
	if code := c.callErr("ack", map[string]any{"queue": "ops", "id": j1.str("id"), "receipt": "wrong"}); code != "conflict" {
		t.Errorf("ack with a wrong receipt: %q", code)
	}
	r = c.ok("stop", map[string]any{})
	if r.num("unacked") != 2 {
		t.Fatalf("stop: %v", r)
	}
	r = c.ok("nack", map[string]any{"queue": "ops", "id": j1.str("id"), "receipt": j1.str("receipt"), "delay": 0, "error": "boom"})
	if r.str("state") != "ready" {
		t.Fatalf("nack: %v", r)
	}
	c.ok("bury", map[string]any{"queue": "ops", "id": j2.str("id"), "receipt": j2.str("receipt"), "reason": "bad"})
	// Stopped: nothing more is pushed, even though a job is ready. The
	// next message must be this command's answer, not a job.
	if code := c.callErr("consume", map[string]any{"queues": []string{"ops"}}); code != "conflict" {
		t.Errorf("second consume: %q", code)
	}
	if len(c.pushes) != 0 {
		t.Fatalf("pushed after stop: %v", c.pushes)
	}
	j, err := e.b.Peek(context.Background(), "default", "ops", j2.str("id"))
	if err != nil || j.State != engine.StateDead {
		t.Fatalf("buried job: %v %v", j.State, err)
	}
}
