package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestTake covers both take routes: serving order, the take answer,
// ttr overrides (docs/api.md, take), multi-queue order, missing queues, limits and
// long-poll wake-ups.
func TestTake(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("order_priority_activation_enqueue", func(t *testing.T) {
		s := srv.as(t)
		q := "t-order"
		type put struct {
			body map[string]any
			id   string
			prio int64
			act  time.Time
			seq  int
		}
		past := time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
		puts := []*put{
			{body: map[string]any{"payload": "a", "priority": 10}},
			{body: map[string]any{"payload": "b", "priority": 5, "delay": "300ms"}},
			{body: map[string]any{"payload": "c", "priority": 5}},
			{body: map[string]any{"payload": "d", "priority": 5}},
			{body: map[string]any{"payload": "e", "priority": 5, "at": past}},
			{body: map[string]any{"payload": "f", "priority": 0, "delay": "300ms"}},
			{body: map[string]any{"payload": "g"}}, // default priority 1024
			{body: map[string]any{"payload": "h", "priority": 5}},
		}
		for i, p := range puts {
			m := s.put(q, p.body)
			p.id, p.seq = jstr(m, "id"), i
			p.act = mustTime(t, jstr(m, "activate_at"))
			p.prio = 1024
			if v, ok := p.body["priority"]; ok {
				p.prio = int64(v.(int))
			}
		}
		// Before the delayed ones are due, they are not handed out and
		// their state is delayed.
		if st := s.state(q, puts[1].id); st != "delayed" && time.Now().Before(puts[1].act.Add(-20*time.Millisecond)) {
			t.Errorf("job with delay 300ms: state %q right after put, want delayed", st)
		}
		// Wait (bounded) until the derived state of both turns ready.
		if !eventually(5*time.Second, func() bool {
			return s.state(q, puts[1].id) == "ready" && s.state(q, puts[5].id) == "ready"
		}) {
			t.Fatal("jobs with delay 300ms did not turn ready within 5s")
		}
		want := append([]*put(nil), puts...)
		sort.SliceStable(want, func(i, j int) bool {
			if want[i].prio != want[j].prio {
				return want[i].prio < want[j].prio
			}
			if !want[i].act.Equal(want[j].act) {
				return want[i].act.Before(want[j].act)
			}
			return want[i].seq < want[j].seq
		})
		var wantIDs []string
		for _, p := range want {
			wantIDs = append(wantIDs, p.id)
		}
		// list state=ready is in serving order too (docs/api.md, list).
		if got := idsOf(s.listAll(q, "state=ready", 100)); !equalStrings(got, wantIDs) {
			t.Errorf("list state=ready order\n got %v\nwant %v", got, wantIDs)
		}
		got := ids(s.take(q, map[string]any{"max": 10}))
		if !equalStrings(got, wantIDs) {
			t.Errorf("take order\n got %v\nwant %v (by priority, activation time, enqueue order)", got, wantIDs)
		}
	})

	t.Run("answer_fields_and_ttr_override", func(t *testing.T) {
		s := srv.as(t)
		q := "t-fields"
		id := s.putID(q, map[string]any{"payload": 1, "ttr": "45s"})
		before := time.Now()
		jobs := s.take(q, map[string]any{"max": 1, "ttr": "7s"})
		after := time.Now()
		if len(jobs) != 1 {
			t.Fatalf("take: %d jobs", len(jobs))
		}
		j := jobs[0].(map[string]any)
		if jstr(j, "id") != id || jstr(j, "state") != "reserved" || jstr(j, "receipt") == "" || jint(j, "attempt") != 1 || jstr(j, "ttr") != "7s" {
			t.Errorf("take answer %v: want id, state reserved, a receipt, attempt 1, ttr 7s", j)
		}
		within(t, "reserved_until", mustTime(t, jstr(j, "reserved_until")), before.Add(7*time.Second), after.Add(7*time.Second), 5*time.Millisecond)
		p := s.peek(q, id)
		if has(p, "receipt") {
			t.Errorf("peek shows the receipt; it belongs to take answers only")
		}
		if jstr(p, "state") != "reserved" || jstr(p, "reserved_until") != jstr(j, "reserved_until") || jint(p, "attempt") != 1 {
			t.Errorf("peek of reserved job: %v", p)
		}
		// The override was for that reservation only: after a nack the
		// next take (no override) gets the job's own 45s, attempt 2.
		m, _ := s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "0s"})
		if st := jstr(m, "state"); st != "ready" && st != "delayed" {
			t.Errorf("nack delay 0s answered state %q", st)
		}
		before = time.Now()
		j2 := s.takeOne(q)
		after = time.Now()
		if jint(j2, "attempt") != 2 || jstr(j2, "ttr") != "45s" || jstr(j2, "receipt") == jstr(j, "receipt") {
			t.Errorf("second take: %v, want attempt 2, ttr 45s, a new receipt", j2)
		}
		within(t, "reserved_until", mustTime(t, jstr(j2, "reserved_until")), before.Add(45*time.Second), after.Add(45*time.Second), 5*time.Millisecond)
		// Queue default ttr 30s applies with neither override nor job ttr.
		s.put(q+"-d", map[string]any{"payload": 1})
		if j3 := s.takeOne(q + "-d"); jstr(j3, "ttr") != "30s" {
			t.Errorf("default take ttr %q, want 30s", jstr(j3, "ttr"))
		}
	})

	t.Run("max_and_default_max", func(t *testing.T) {
		s := srv.as(t)
		q := "t-max"
		for i := 0; i < 5; i++ {
			s.put(q, map[string]any{"payload": i})
		}
		if n := len(s.take(q, map[string]any{})); n != 1 {
			t.Errorf("take with no max: %d jobs, want 1", n)
		}
		if n := len(s.take(q, map[string]any{"max": 3})); n != 3 {
			t.Errorf("take max 3: %d jobs, want 3", n)
		}
		if n := len(s.take(q, map[string]any{"max": 1000})); n != 1 {
			t.Errorf("take max 1000 with 1 left: %d jobs", n)
		}
		s.badRequest("POST", qp(q)+"/take", map[string]any{"max": 1001}, "max")
		s.badRequest("POST", "/v1/ns/default/take", map[string]any{"queues": []string{q}, "max": 1001}, "max")
		s.badRequest("POST", qp(q)+"/take", map[string]any{"wait": "61s"}, "wait")
		s.badRequest("POST", qp(q)+"/take", map[string]any{"wait": 61}, "wait")
		s.badRequest("POST", "/v1/ns/default/take", map[string]any{"queues": []string{q}, "wait": "61s"}, "wait")
		s.badRequest("POST", qp(q)+"/take", map[string]any{"ttr": "x"}, "ttr")
		s.badRequest("POST", qp(q)+"/take", map[string]any{"bogus": 1}, "bogus")
		// wait 60s is allowed and answers at once when a job is there.
		s.put(q, map[string]any{"payload": 1})
		start := time.Now()
		if n := len(s.take(q, map[string]any{"wait": "60s"})); n != 1 || time.Since(start) > 5*time.Second {
			t.Errorf("take wait 60s with a ready job: %d jobs after %v", n, time.Since(start))
		}
	})

	t.Run("missing_queue_answers_empty", func(t *testing.T) {
		s := srv.as(t)
		m, raw := s.expect(200, "POST", qp("t-never-created")+"/take", map[string]any{"max": 5})
		if a, ok := m["jobs"].([]any); !ok || len(a) != 0 {
			t.Errorf("take on a missing queue: %s, want {\"jobs\":[]}", raw)
		}
		m, raw = s.expect(200, "POST", "/v1/ns/default/take", map[string]any{"queues": []string{"t-never-1", "t-never-2"}, "max": 5})
		if a, ok := m["jobs"].([]any); !ok || len(a) != 0 {
			t.Errorf("multi take on missing queues: %s, want {\"jobs\":[]}", raw)
		}
	})

	t.Run("multi_queue_in_listed_order", func(t *testing.T) {
		s := srv.as(t)
		lo1 := s.putID("t-low", map[string]any{"payload": 1, "priority": 0})
		lo2 := s.putID("t-low", map[string]any{"payload": 2, "priority": 0})
		hi1 := s.putID("t-high", map[string]any{"payload": 3, "priority": 2000})
		hi2 := s.putID("t-high", map[string]any{"payload": 4, "priority": 1})
		m, _ := s.expect(200, "POST", "/v1/ns/default/take", map[string]any{"queues": []string{"t-high", "t-low"}, "max": 3})
		jobs := jarr(m, "jobs")
		if got, want := ids(jobs), []string{hi2, hi1, lo1}; !equalStrings(got, want) {
			t.Errorf("multi take order %v, want %v (earlier-listed queue first, serving order inside)", got, want)
		}
		if len(jobs) == 3 && (jstr(jobs[0], "queue") != "t-high" || jstr(jobs[2], "queue") != "t-low") {
			t.Errorf("queue fields wrong: %v", jobs)
		}
		m, _ = s.expect(200, "POST", "/v1/ns/default/take", map[string]any{"queues": []string{"t-high", "t-low"}, "max": 10})
		if got := ids(jarr(m, "jobs")); !equalStrings(got, []string{lo2}) {
			t.Errorf("second multi take %v, want [%s]", got, lo2)
		}
		s.badRequest("POST", "/v1/ns/default/take", map[string]any{"queues": "t-high"}, "queues")
	})

	t.Run("long_poll_woken_by_put", func(t *testing.T) {
		s := srv.as(t)
		q := "t-wake"
		type res struct {
			jobs []any
			at   time.Time
			st   int
		}
		done := make(chan res, 1)
		go func() {
			st, m, _ := s.quiet().do("POST", qp(q)+"/take", map[string]any{"max": 1, "wait": "5s"})
			done <- res{jarr(m, "jobs"), time.Now(), st}
		}()
		time.Sleep(200 * time.Millisecond)
		putAt := time.Now()
		id := s.putID(q, map[string]any{"payload": "wake"})
		select {
		case r := <-done:
			if r.st != 200 || len(r.jobs) != 1 || jstr(r.jobs[0], "id") != id {
				t.Errorf("woken take: status %d jobs %v, want the put job %s", r.st, r.jobs, id)
			}
			if d := r.at.Sub(putAt); d > 2*time.Second {
				t.Errorf("take returned %v after the put; a waiting take must wake on put", d)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("long-poll take never returned")
		}
		// Multi-queue long poll wakes on a put to any listed queue.
		go func() {
			st, m, _ := s.quiet().do("POST", "/v1/ns/default/take", map[string]any{"queues": []string{q + "-a", q + "-b"}, "wait": "5s"})
			done <- res{jarr(m, "jobs"), time.Now(), st}
		}()
		time.Sleep(200 * time.Millisecond)
		putAt = time.Now()
		id = s.putID(q+"-b", map[string]any{"payload": "wake"})
		select {
		case r := <-done:
			if r.st != 200 || len(r.jobs) != 1 || jstr(r.jobs[0], "id") != id || r.at.Sub(putAt) > 2*time.Second {
				t.Errorf("multi-queue woken take: status %d jobs %v after %v", r.st, r.jobs, r.at.Sub(putAt))
			}
		case <-time.After(25 * time.Second):
			t.Fatal("long-poll multi take never returned")
		}
	})

	t.Run("long_poll_times_out_empty", func(t *testing.T) {
		s := srv.as(t)
		start := time.Now()
		m, raw := s.expect(200, "POST", qp("t-empty")+"/take", map[string]any{"wait": "300ms"})
		el := time.Since(start)
		if a, ok := m["jobs"].([]any); !ok || len(a) != 0 {
			t.Errorf("empty wait: %s, want {\"jobs\":[]}", raw)
		}
		if el < 250*time.Millisecond || el > 5*time.Second {
			t.Errorf("take wait 300ms answered after %v", el)
		}
		start = time.Now()
		s.take("t-empty", map[string]any{"wait": 0.3})
		if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
			t.Errorf("take wait 0.3 (seconds) answered after %v", el)
		}
	})

	t.Run("delayed_not_before_its_time", func(t *testing.T) {
		s := srv.as(t)
		q := "t-delay"
		m := s.put(q, map[string]any{"payload": 1, "delay": "300ms"})
		act := mustTime(t, jstr(m, "activate_at"))
		if jstr(m, "state") != "delayed" {
			t.Errorf("state %q, want delayed", jstr(m, "state"))
		}
		if jobs := s.take(q, map[string]any{"max": 1}); len(jobs) != 0 && time.Now().Before(act) {
			t.Errorf("delayed job handed out before activate_at")
		}
		jobs := s.take(q, map[string]any{"max": 1, "wait": "5s"})
		got := time.Now()
		if len(jobs) != 1 || jstr(jobs[0], "id") != jstr(m, "id") {
			t.Fatalf("take wait 5s: %v, want the delayed job", jobs)
		}
		if got.Before(act.Add(-5 * time.Millisecond)) {
			t.Errorf("delayed job handed out at %s, before activate_at %s", got.Format(time.RFC3339Nano), act.Format(time.RFC3339Nano))
		}
		if got.Sub(act) > 2*time.Second {
			t.Errorf("waiting take got the delayed job %v after activate_at", got.Sub(act))
		}
	})

	t.Run("many_delays_in_time_order", func(t *testing.T) {
		s := srv.as(t)
		q := "t-delays"
		var want []string
		for i := 5; i >= 1; i-- {
			id := s.putID(q, map[string]any{"payload": i, "delay": fmt.Sprintf("%dms", 100*i)})
			want = append([]string{id}, want...)
		}
		var got []string
		for len(got) < 5 {
			jobs := s.take(q, map[string]any{"max": 10, "wait": "3s"})
			if len(jobs) == 0 {
				break
			}
			got = append(got, ids(jobs)...)
		}
		if !equalStrings(got, want) {
			t.Errorf("delayed jobs handed out in order %v, want %v (by activation time)", got, want)
		}
	})
}

// TestAckNackTouchBury covers the reservation verbs, tries exhaustion,
// backoff, dead letters and results of acks (docs/api.md, Workers and Results).
func TestAckNackTouchBury(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("ack_deletes", func(t *testing.T) {
		s := srv.as(t)
		q := "a-del"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		st, m, raw := s.do("POST", jobActp(q, id, "ack"), map[string]any{"receipt": "not-the-receipt"})
		wantError(t, "ack with wrong receipt", st, m, raw, 409, "conflict", "")
		s.badRequest("POST", jobActp(q, id, "ack"), map[string]any{"receipt": jstr(j, "receipt"), "bogus": 1}, "bogus")
		if s.state(q, id) != "reserved" {
			t.Errorf("a rejected ack changed the job")
		}
		m = s.ack(q, j, nil)
		if jstr(m, "id") != id || jstr(m, "state") != "deleted" || (has(m, "next_id") && jstr(m, "next_id") != "") {
			t.Errorf("ack answer %v, want {id, state deleted}", m)
		}
		s.wantGone(q, id)
		st, m, raw = s.do("POST", jobActp(q, "NOSUCHJOB", "ack"), map[string]any{"receipt": "x"})
		wantError(t, "ack unknown job", st, m, raw, 404, "job_not_found", "")
	})

	t.Run("ack_completed_with_result", func(t *testing.T) {
		s := srv.as(t)
		q := "a-retain"
		s.expect(201, "PUT", qp(q), map[string]any{"retain_results": "1m"})
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		m := s.ack(q, j, map[string]any{"result": map[string]any{"ok": true, "n": []int{1, 2}}})
		if jstr(m, "state") != "completed" || jstr(m, "id") != id {
			t.Errorf("ack answer %v, want state completed", m)
		}
		p := s.peek(q, id)
		raw := rawObject(t, s.peekRaw(q, id))
		if jstr(p, "state") != "completed" || !jsonEqual(raw["result"], []byte(`{"ok":true,"n":[1,2]}`)) {
			t.Errorf("completed job: %v", p)
		}
		if has(p, "reserved_until") || has(p, "receipt") {
			t.Errorf("completed job still shows reservation fields: %v", p)
		}
		// No result: completed with result null.
		id2 := s.putID(q, map[string]any{"payload": 2})
		j2 := s.takeOne(q)
		if m := s.ack(q, j2, nil); jstr(m, "state") != "completed" {
			t.Errorf("ack without result in a retaining queue: %v", m)
		}
		rm, rraw := s.expect(200, "GET", jobp(q, id2)+"/result?wait=0s", nil)
		if r, ok := rawObject(t, rraw)["result"]; jstr(rm, "state") != "completed" || !ok || string(r) != "null" {
			t.Errorf("result of a job acked without result: %s, want {state completed, result null}", rraw)
		}
		if c := s.counts(q); c["completed"] != 2 {
			t.Errorf("completed count %d, want 2", c["completed"])
		}
	})

	t.Run("ack_result_to_reply_to", func(t *testing.T) {
		s := srv.as(t)
		q := "a-rpc"
		id := s.putID(q, map[string]any{"payload": 1, "reply_to": "a-replies"})
		j := s.takeOne(q)
		if m := s.ack(q, j, map[string]any{"result": map[string]any{"r": 1}}); jstr(m, "state") != "deleted" {
			t.Errorf("ack in non-retaining queue: %v, want deleted", m)
		}
		s.wantGone(q, id)
		_, raw := s.expect(200, "POST", qp("a-replies")+"/take", map[string]any{"max": 10, "wait": "2s"})
		jobs := rawJobs(t, raw)
		if len(jobs) != 1 || string(jobs[0]["payload"]) != `{"r":1}` {
			t.Errorf("reply_to queue holds %s, want one job with payload {\"r\":1}", raw)
		}
	})

	t.Run("ack_with_next", func(t *testing.T) {
		s := srv.as(t)
		q := "a-next"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		// An invalid next rejects the whole ack.
		s.badRequest("POST", jobActp(q, id, "ack"), map[string]any{"receipt": jstr(j, "receipt"), "next": map[string]any{"queue": "a-stage2", "payload": 2, "delay": "bogus"}}, "next.delay")
		if s.state(q, id) != "reserved" {
			t.Errorf("a rejected ack with next changed the job")
		}
		s.wantGoneOrNoQueue("a-stage2", "n1")
		m := s.ack(q, j, map[string]any{"next": map[string]any{"queue": "a-stage2", "payload": map[string]int{"s": 2}, "id": "n1", "priority": 3}})
		if jstr(m, "next_id") != "n1" || jstr(m, "state") != "deleted" {
			t.Errorf("ack with next: %v, want next_id n1", m)
		}
		s.wantGone(q, id)
		n := s.peek("a-stage2", "n1")
		if jstr(n, "state") != "ready" || jint(n, "priority") != 3 || string(rawObject(t, s.peekRaw("a-stage2", "n1"))["payload"]) != `{"s":2}` {
			t.Errorf("next job: %v", n)
		}
		// Server-assigned id for next.
		s.putID(q, map[string]any{"payload": 1})
		j = s.takeOne(q)
		m = s.ack(q, j, map[string]any{"next": map[string]any{"queue": "a-stage2", "payload": 3}})
		if !ulidRe.MatchString(jstr(m, "next_id")) {
			t.Errorf("next_id %q is not a ULID", jstr(m, "next_id"))
		}
		s.peek("a-stage2", jstr(m, "next_id"))
	})

	t.Run("ack_reschedule", func(t *testing.T) {
		s := srv.as(t)
		q := "a-resched"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		before := time.Now()
		m := s.ack(q, j, map[string]any{"reschedule": map[string]any{"delay": "1h"}})
		after := time.Now()
		if jstr(m, "id") != id || jstr(m, "state") != "delayed" {
			t.Errorf("reschedule answer %v, want same id, state delayed", m)
		}
		p := s.peek(q, id)
		if jstr(p, "state") != "delayed" || jint(p, "attempt") != 0 {
			t.Errorf("rescheduled job: %v, want delayed with attempt 0", p)
		}
		within(t, "activate_at", mustTime(t, jstr(p, "activate_at")), before.Add(time.Hour), after.Add(time.Hour), 5*time.Millisecond)
		// An over-limit reschedule is rejected and changes nothing.
		id2 := s.putID(q, map[string]any{"payload": 2})
		j2 := s.takeOne(q)
		s.badRequest("POST", jobActp(q, id2, "ack"), map[string]any{"receipt": jstr(j2, "receipt"), "reschedule": map[string]any{"delay": "87601h"}}, "reschedule.delay")
		if st := s.state(q, id2); st != "reserved" {
			t.Errorf("rejected reschedule left the job %q, want reserved", st)
		}
	})

	t.Run("nack_with_delay", func(t *testing.T) {
		s := srv.as(t)
		q := "a-nack"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		st, m, raw := s.do("POST", jobActp(q, id, "nack"), map[string]any{"receipt": "wrong", "delay": "1s"})
		wantError(t, "nack wrong receipt", st, m, raw, 409, "conflict", "")
		before := time.Now()
		m, _ = s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "2s", "error": "smtp timeout"})
		after := time.Now()
		if jstr(m, "state") != "delayed" {
			t.Errorf("nack with delay: %v, want state delayed", m)
		}
		p := s.peek(q, id)
		if jstr(p, "state") != "delayed" || jstr(p, "last_error") != "smtp timeout" || jint(p, "attempt") != 1 || has(p, "reserved_until") {
			t.Errorf("nacked job: %v", p)
		}
		within(t, "activate_at", mustTime(t, jstr(p, "activate_at")), before.Add(2*time.Second), after.Add(2*time.Second), 5*time.Millisecond)
		// The old receipt is stale now.
		st, m, raw = s.do("POST", jobActp(q, id, "ack"), map[string]any{"receipt": jstr(j, "receipt")})
		wantError(t, "ack with the receipt of a nacked reservation", st, m, raw, 409, "conflict", "")
	})

	t.Run("nack_zero_delay", func(t *testing.T) {
		s := srv.as(t)
		q := "a-nack0"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		m, _ := s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "0s"})
		if st := jstr(m, "state"); st != "ready" && st != "delayed" {
			t.Errorf("nack delay 0s: state %q", st)
		}
		if st := s.state(q, id); st != "ready" {
			t.Errorf("after nack delay 0s the job is %q, want ready", st)
		}
		jobs := s.take(q, map[string]any{"max": 1})
		if len(jobs) != 1 || jint(jobs[0], "attempt") != 2 {
			t.Errorf("take right after nack 0s: %v, want the job with attempt 2", jobs)
		}
	})

	t.Run("nack_default_backoff", func(t *testing.T) {
		s := srv.as(t)
		q := "a-backoff"
		id := s.putID(q, map[string]any{"payload": 1})
		j := s.takeOne(q)
		before := time.Now()
		m, _ := s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt")})
		after := time.Now()
		if jstr(m, "state") != "delayed" {
			t.Errorf("nack without delay: %v, want delayed (backoff 1s)", m)
		}
		// attempt 1: initial 1s × 2^0, jitter 0.1 → [0.9s, 1.1s].
		act := mustTime(t, jstr(s.peek(q, id), "activate_at"))
		within(t, "activate_at after backoff", act, before.Add(900*time.Millisecond), after.Add(1100*time.Millisecond), 3*time.Millisecond)
	})

	t.Run("nack_configured_backoff", func(t *testing.T) {
		s := srv.as(t)
		q := "a-backoff2"
		s.expect(201, "PUT", qp(q), map[string]any{"backoff": map[string]any{"initial": "200ms", "multiplier": 3, "max": "1s", "jitter": 0}})
		id := s.putID(q, map[string]any{"payload": 1})
		for attempt, want := range []time.Duration{200 * time.Millisecond, 600 * time.Millisecond, time.Second} {
			j := s.takeOne(q)
			if jint(j, "attempt") != int64(attempt+1) {
				t.Errorf("attempt %v, want %d", j["attempt"], attempt+1)
			}
			before := time.Now()
			s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt")})
			after := time.Now()
			act := mustTime(t, jstr(s.peek(q, id), "activate_at"))
			within(t, fmt.Sprintf("activate_at after nack %d", attempt+1), act, before.Add(want), after.Add(want), 3*time.Millisecond)
		}
	})

	t.Run("tries_exhausted_by_expiry", func(t *testing.T) {
		s := srv.as(t)
		q := "a-tries"
		id := s.putID(q, map[string]any{"payload": 1, "tries": 1, "ttr": "1s"})
		j := s.takeOne(q)
		if jint(j, "attempt") != 1 {
			t.Errorf("attempt %v", j["attempt"])
		}
		// A waiting take outlives the reservation: the job must not be
		// handed out again; it becomes dead.
		if jobs := s.take(q, map[string]any{"max": 1, "wait": "2s"}); len(jobs) != 0 {
			t.Errorf("job with tries 1 handed out again: %v", jobs)
		}
		p := s.peek(q, id)
		if jstr(p, "state") != "dead" || jint(p, "attempt") != 1 {
			t.Errorf("after expiry of the last try: %v, want dead with attempt 1", p)
		}
		st, m, raw := s.do("POST", jobActp(q, id, "ack"), map[string]any{"receipt": jstr(j, "receipt")})
		wantError(t, "ack after the reservation expired", st, m, raw, 409, "conflict", "")
		if c := s.counts(q); c["dead"] != 1 || c["reserved"] != 0 {
			t.Errorf("counts %v, want dead 1", c)
		}
	})

	t.Run("tries_exhausted_by_nack", func(t *testing.T) {
		s := srv.as(t)
		q := "a-tries2"
		id := s.putID(q, map[string]any{"payload": 1, "tries": 2})
		j := s.takeOne(q)
		m, _ := s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "0s"})
		if st := jstr(m, "state"); st == "dead" {
			t.Errorf("nack with a try left went dead")
		}
		j = s.takeOne(q)
		m, _ = s.expect(200, "POST", jobActp(q, id, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "0s", "error": "boom"})
		if jstr(m, "state") != "dead" {
			t.Errorf("nack of the last try: %v, want state dead", m)
		}
		if p := s.peek(q, id); jstr(p, "state") != "dead" || jstr(p, "last_error") != "boom" || jint(p, "attempt") != 2 {
			t.Errorf("dead job %v", p)
		}
	})

	t.Run("expired_reservation_redelivered", func(t *testing.T) {
		s := srv.as(t)
		q := "a-expire"
		id := s.putID(q, map[string]any{"payload": 1, "tries": 0})
		j := s.take(q, map[string]any{"max": 1, "ttr": "500ms"})
		if len(j) != 1 {
			t.Fatal("no job")
		}
		j2 := s.take(q, map[string]any{"max": 1, "wait": "3s"})
		if len(j2) != 1 || jstr(j2[0], "id") != id || jint(j2[0], "attempt") != 2 {
			t.Fatalf("after the ttr ran out: %v, want the job again with attempt 2", j2)
		}
		st, m, raw := s.do("POST", jobActp(q, id, "ack"), map[string]any{"receipt": jstr(j[0], "receipt")})
		wantError(t, "ack with the expired reservation's receipt", st, m, raw, 409, "conflict", "")
		s.ack(q, j2[0].(map[string]any), nil)
	})

	t.Run("touch", func(t *testing.T) {
		s := srv.as(t)
		q := "a-touch"
		id := s.putID(q, map[string]any{"payload": 1})
		jobs := s.take(q, map[string]any{"max": 1, "ttr": "2s"})
		if len(jobs) != 1 {
			t.Fatal("no job")
		}
		j := jobs[0].(map[string]any)
		first := mustTime(t, jstr(j, "reserved_until"))
		before := time.Now()
		m, _ := s.expect(200, "POST", jobActp(q, id, "touch"), map[string]any{"receipt": jstr(j, "receipt"), "ttr": "10s"})
		after := time.Now()
		ru := mustTime(t, jstr(m, "reserved_until"))
		within(t, "reserved_until after touch 10s", ru, before.Add(10*time.Second), after.Add(10*time.Second), 5*time.Millisecond)
		if !ru.After(first) {
			t.Errorf("touch did not move reserved_until")
		}
		if got := jstr(s.peek(q, id), "reserved_until"); got != jstr(m, "reserved_until") {
			t.Errorf("peek reserved_until %s, touch answered %s", got, jstr(m, "reserved_until"))
		}
		// Without ttr: extended by the reservation's effective TTR (2s).
		before = time.Now()
		m, _ = s.expect(200, "POST", jobActp(q, id, "touch"), map[string]any{"receipt": jstr(j, "receipt")})
		after = time.Now()
		within(t, "reserved_until after touch without ttr", mustTime(t, jstr(m, "reserved_until")), before.Add(2*time.Second), after.Add(2*time.Second), 5*time.Millisecond)
		st, em, raw := s.do("POST", jobActp(q, id, "touch"), map[string]any{"receipt": "wrong"})
		wantError(t, "touch wrong receipt", st, em, raw, 409, "conflict", "")
		s.badRequest("POST", jobActp(q, id, "touch"), map[string]any{"receipt": jstr(j, "receipt"), "ttr": "nope"}, "ttr")
	})

	t.Run("bury_respawn_purge", func(t *testing.T) {
		s := srv.as(t)
		q := "a-bury"
		var buried []string
		for i := 0; i < 4; i++ {
			id := s.putID(q, map[string]any{"payload": i})
			j := s.takeOne(q)
			if i == 0 {
				st, m, raw := s.do("POST", jobActp(q, id, "bury"), map[string]any{"receipt": "wrong"})
				wantError(t, "bury wrong receipt", st, m, raw, 409, "conflict", "")
			}
			m, _ := s.expect(200, "POST", jobActp(q, jstr(j, "id"), "bury"), map[string]any{"receipt": jstr(j, "receipt"), "reason": fmt.Sprintf("bad input %d", i)})
			if jstr(m, "state") != "dead" {
				t.Errorf("bury answer %v, want state dead", m)
			}
			buried = append(buried, jstr(j, "id"))
		}
		if p := s.peek(q, buried[0]); jstr(p, "state") != "dead" || jstr(p, "last_error") != "bad input 0" {
			t.Errorf("buried job: %v, want dead with last_error", p)
		}
		if c := s.counts(q); c["dead"] != 4 {
			t.Errorf("dead count %d, want 4", c["dead"])
		}
		// Dead jobs are never handed out.
		if jobs := s.take(q, map[string]any{"max": 10}); len(jobs) != 0 {
			t.Errorf("take handed out dead jobs: %v", jobs)
		}
		m, _ := s.expect(200, "POST", qp(q)+"/dead/respawn", map[string]any{"limit": 2})
		if jint(m, "respawned") != 2 {
			t.Errorf("respawn limit 2: %v", m)
		}
		if c := s.counts(q); c["dead"] != 2 || c["ready"] != 2 {
			t.Errorf("after respawn: %v, want dead 2 ready 2", c)
		}
		var stillDead []string
		for _, id := range buried {
			p := s.peek(q, id)
			switch jstr(p, "state") {
			case "ready":
				if jint(p, "attempt") != 0 {
					t.Errorf("respawned job attempt %v, want 0", p["attempt"])
				}
			case "dead":
				stillDead = append(stillDead, id)
			default:
				t.Errorf("job %s state %s", id, jstr(p, "state"))
			}
		}
		if len(stillDead) != 2 {
			t.Fatalf("still dead: %v", stillDead)
		}
		m, _ = s.expect(200, "POST", qp(q)+"/dead/respawn", map[string]any{"ids": []string{stillDead[0]}})
		if jint(m, "respawned") != 1 {
			t.Errorf("respawn by ids: %v", m)
		}
		if p := s.peek(q, stillDead[0]); jstr(p, "state") != "ready" || jint(p, "attempt") != 0 {
			t.Errorf("respawned by id: %v", p)
		}
		// Purge the remaining dead job.
		m, _ = s.expect(200, "DELETE", qp(q)+"/dead", nil)
		if jint(m, "deleted") != 1 {
			t.Errorf("purge dead: %v, want deleted 1", m)
		}
		s.wantGone(q, stillDead[1])
		if c := s.counts(q); c["dead"] != 0 || c["ready"] != 3 {
			t.Errorf("after purge: %v", c)
		}
		s.badRequest("POST", qp(q)+"/dead/respawn", map[string]any{"limit": "x"}, "limit")
	})
}

// wantGoneOrNoQueue expects a 404 for a job in a queue that may not exist.
func (s *server) wantGoneOrNoQueue(q, id string) {
	s.t.Helper()
	st, m, raw := s.do("GET", jobp(q, id), nil)
	if st != 404 {
		s.t.Errorf("peek %s/%s: status %d, want 404: %s", q, id, st, trunc(raw))
		return
	}
	if c := jstr(m, "error", "code"); c != "job_not_found" && c != "queue_not_found" {
		s.t.Errorf("peek %s/%s: code %q", q, id, c)
	}
}
