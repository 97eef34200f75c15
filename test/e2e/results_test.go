package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// TestResultsAndCall covers GET .../result (202 while pending, 200 once
// completed, 404 unknown) and POST .../call (200 with the worker's result,
// 504 when nobody answers in time), as docs/api.md's "Results and RPC" describes.
func TestResultsAndCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("result_pending_then_completed", func(t *testing.T) {
		s := srv.as(t)
		q := "r-res"
		s.expect(201, "PUT", qp(q), map[string]any{"retain_results": "1m"})
		id := s.putID(q, map[string]any{"payload": 1})
		start := time.Now()
		m, _ := s.expect(202, "GET", jobp(q, id)+"/result?wait=200ms", nil)
		if jstr(m, "state") != "ready" {
			t.Errorf("pending result: %v, want {state: ready}", m)
		}
		if el := time.Since(start); el < 150*time.Millisecond || el > 5*time.Second {
			t.Errorf("result?wait=200ms answered after %v", el)
		}
		j := s.takeOne(q)
		m, _ = s.expect(202, "GET", jobp(q, id)+"/result?wait=0s", nil)
		if jstr(m, "state") != "reserved" {
			t.Errorf("pending result while reserved: %v", m)
		}
		// A waiting result call wakes up on the ack.
		type res struct {
			st  int
			raw []byte
			at  time.Time
		}
		done := make(chan res, 1)
		go func() {
			st, _, raw := s.quiet().do("GET", jobp(q, id)+"/result?wait=5s", nil)
			done <- res{st, raw, time.Now()}
		}()
		time.Sleep(200 * time.Millisecond)
		acked := time.Now()
		s.ack(q, j, map[string]any{"result": json.RawMessage(`{"sent": true, "n": 2}`)})
		select {
		case r := <-done:
			if r.st != 200 {
				t.Errorf("waiting result after ack: %d %s", r.st, r.raw)
			}
			if d := r.at.Sub(acked); d > 2*time.Second {
				t.Errorf("waiting result returned %v after the ack", d)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("waiting result never returned")
		}
		m, raw := s.expect(200, "GET", jobp(q, id)+"/result?wait=1s", nil)
		if jstr(m, "state") != "completed" || string(rawObject(t, raw)["result"]) != `{"sent":true,"n":2}` {
			t.Errorf("result: %s, want {state completed, result {\"sent\":true,\"n\":2}}", raw)
		}
		st, em, eraw := s.do("GET", jobp(q, "NO-SUCH-JOB")+"/result?wait=0s", nil)
		wantError(t, "result of an unknown job", st, em, eraw, 404, "job_not_found", "")
		s.badRequest("GET", jobp(q, id)+"/result?wait=61s", nil, "wait")
	})

	t.Run("result_gone_in_non_retaining_queue", func(t *testing.T) {
		s := srv.as(t)
		q := "r-gone"
		id := s.putID(q, map[string]any{"payload": 1})
		s.ack(q, s.takeOne(q), map[string]any{"result": 1})
		st, m, raw := s.do("GET", jobp(q, id)+"/result?wait=0s", nil)
		wantError(t, "result of a deleted job", st, m, raw, 404, "job_not_found", "")
	})

	t.Run("call_answered_by_worker", func(t *testing.T) {
		s := srv.as(t)
		q := "r-call"
		stop := make(chan struct{})
		workerDone := make(chan string, 1)
		w := s.quiet()
		go func() {
			// Worker: take, echo the payload back as the result.
			defer close(workerDone)
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				select {
				case <-stop:
					return
				default:
				}
				st, _, raw := w.do("POST", qp(q)+"/take", map[string]any{"max": 1, "wait": "500ms"})
				if st != 200 {
					workerDone <- "take status " + string(raw)
					return
				}
				var a struct {
					Jobs []struct {
						ID      string          `json:"id"`
						Receipt string          `json:"receipt"`
						Payload json.RawMessage `json:"payload"`
					} `json:"jobs"`
				}
				if err := json.Unmarshal(raw, &a); err != nil {
					workerDone <- err.Error()
					return
				}
				for _, j := range a.Jobs {
					res := json.RawMessage(`{"echo":` + string(j.Payload) + `}`)
					if st, _, raw := w.do("POST", jobActp(q, j.ID, "ack"), map[string]any{"receipt": j.Receipt, "result": res}); st != 200 {
						workerDone <- "ack: " + string(raw)
						return
					}
				}
			}
		}()
		defer func() {
			close(stop)
			if msg, ok := <-workerDone; ok && msg != "" {
				t.Errorf("worker: %s", msg)
			}
		}()
		start := time.Now()
		m, raw := s.expect(200, "POST", qp(q)+"/call", map[string]any{"payload": map[string]int{"x": 1}, "wait": "5s"})
		if el := time.Since(start); el > 4*time.Second {
			t.Errorf("call took %v", el)
		}
		id := jstr(m, "id")
		if id == "" || string(rawObject(t, raw)["result"]) != `{"echo":{"x":1}}` {
			t.Errorf("call answer %s, want {id, result {\"echo\":{\"x\":1}}}", raw)
		}
		// call keeps its job's result for a minute even here.
		rm, rraw := s.expect(200, "GET", jobp(q, id)+"/result?wait=0s", nil)
		if jstr(rm, "state") != "completed" || string(rawObject(t, rraw)["result"]) != `{"echo":{"x":1}}` {
			t.Errorf("result after call: %s", rraw)
		}
		// With a client id, the answer carries it.
		m, _ = s.expect(200, "POST", qp(q)+"/call", map[string]any{"payload": 2, "id": "call-2", "wait": "5s"})
		if jstr(m, "id") != "call-2" || jint(m, "result", "echo") != 2 {
			t.Errorf("call with id: %v", m)
		}
	})

	t.Run("call_times_out", func(t *testing.T) {
		s := srv.as(t)
		q := "r-nobody"
		start := time.Now()
		st, m, raw := s.do("POST", qp(q)+"/call", map[string]any{"payload": 1, "wait": "300ms"})
		el := time.Since(start)
		if st != 504 || jstr(m, "id") == "" || jstr(m, "state") != "ready" {
			t.Errorf("call with no worker: %d %s, want 504 {id, state ready}", st, raw)
		}
		if el < 250*time.Millisecond || el > 5*time.Second {
			t.Errorf("call wait 300ms answered after %v", el)
		}
		if id := jstr(m, "id"); id != "" {
			if p := s.peek(q, id); jstr(p, "state") != "ready" {
				t.Errorf("the called job: %v", p)
			}
			rm, _ := s.expect(202, "GET", jobp(q, id)+"/result?wait=0s", nil)
			if jstr(rm, "state") != "ready" {
				t.Errorf("result of the unanswered call: %v", rm)
			}
		}
		s.badRequest("POST", qp(q)+"/call", map[string]any{"wait": "1s"}, "payload")
		s.badRequest("POST", qp(q)+"/call", map[string]any{"payload": 1, "wait": "61s"}, "wait")
	})
}
