package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestQueues covers the queue routes: PUT create/merge, defaults
// (docs/api.md, Queues), GET counts, listing, pause/resume, purge, DELETE, limits
// (queue_full, per-queue max_payload) and namespaces without
// auto-created queues.
func TestQueues(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("defaults_of_auto_created_queue", func(t *testing.T) {
		s := srv.as(t)
		s.put("q-auto", map[string]any{"payload": 1})
		m, _ := s.expect(200, "GET", qp("q-auto"), nil)
		if jstr(m, "namespace") != "default" || jstr(m, "name") != "q-auto" {
			t.Errorf("queue object %v", m)
		}
		if p, ok := jbool(m, "paused"); !ok || p {
			t.Errorf("paused = %v (present %v), want false", p, ok)
		}
		c := jmap(m, "config")
		wantStr := map[string]string{"default_ttr": "30s", "default_ttl": "0s", "dedup_window": "15m0s", "retain_results": "0s"}
		for k, v := range wantStr {
			if jstr(c, k) != v {
				t.Errorf("config.%s = %v, want %q", k, c[k], v)
			}
		}
		wantInt := map[string]int64{"default_tries": 25, "default_priority": 1024, "max_jobs": 0, "max_payload": 1048576}
		for k, v := range wantInt {
			if jint(c, k) != v {
				t.Errorf("config.%s = %v, want %d", k, c[k], v)
			}
		}
		if jstr(c, "backoff", "initial") != "1s" || jstr(c, "backoff", "max") != "10m0s" || jfloat(c, "backoff", "multiplier") != 2 || jfloat(c, "backoff", "jitter") != 0.1 {
			t.Errorf("config.backoff = %v, want initial 1s max 10m0s multiplier 2 jitter 0.1", c["backoff"])
		}
		if km, ok := c["key_mode"]; ok && km != "strict" {
			t.Errorf("config.key_mode = %v, want strict", km)
		}
		if jint(m, "counts", "ready") != 1 {
			t.Errorf("counts %v", m["counts"])
		}
		if !isGoDuration(jstr(m, "oldest_ready_age")) {
			t.Errorf("oldest_ready_age %v", m["oldest_ready_age"])
		}
	})

	t.Run("put_creates_then_merges", func(t *testing.T) {
		s := srv.as(t)
		q := "q-merge"
		m, _ := s.expect(201, "PUT", qp(q), map[string]any{"default_ttr": "10s", "default_priority": 7, "default_tries": 3})
		if jstr(m, "name") != q || jstr(m, "config", "default_ttr") != "10s" || jint(m, "config", "default_priority") != 7 {
			t.Errorf("PUT answer %v", m)
		}
		m, _ = s.expect(200, "PUT", qp(q), map[string]any{"max_jobs": 5, "dedup_window": 60, "backoff": map[string]any{"initial": "2s"}})
		c := jmap(m, "config")
		if jstr(c, "default_ttr") != "10s" || jint(c, "default_priority") != 7 || jint(c, "default_tries") != 3 || jint(c, "max_jobs") != 5 || jstr(c, "dedup_window") != "1m0s" {
			t.Errorf("after merge: %v", c)
		}
		if jstr(c, "backoff", "initial") != "2s" || jstr(c, "backoff", "max") != "10m0s" || jfloat(c, "backoff", "multiplier") != 2 {
			t.Errorf("backoff after merging initial only: %v", c["backoff"])
		}
		m, _ = s.expect(200, "PUT", qp(q), map[string]any{})
		if jint(m, "config", "max_jobs") != 5 {
			t.Errorf("empty PUT changed config: %v", m["config"])
		}
		if g, _ := s.expect(200, "GET", qp(q), nil); jstr(g, "config", "default_ttr") != "10s" || jint(g, "config", "max_jobs") != 5 {
			t.Errorf("GET after PUTs: %v", g["config"])
		}
		// New jobs take the queue's defaults.
		id := s.putID(q, map[string]any{"payload": 1})
		if j := s.peek(q, id); jstr(j, "ttr") != "10s" || jint(j, "priority") != 7 || jint(j, "tries") != 3 {
			t.Errorf("job defaults from queue config: %v", j)
		}
		s.expect(200, "PUT", qp(q), map[string]any{"default_ttl": "1h"})
		id = s.putID(q, map[string]any{"payload": 1})
		j := s.peek(q, id)
		created := mustTime(t, jstr(j, "created_at"))
		within(t, "expire_at from default_ttl", mustTime(t, jstr(j, "expire_at")), created.Add(time.Hour), created.Add(time.Hour), time.Millisecond)
	})

	t.Run("put_validation", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("PUT", qp("q-bad"), map[string]any{"default_ttr": "bogus"}, "default_ttr")
		s.badRequest("PUT", qp("q-bad"), map[string]any{"backoff": map[string]any{"initial": "x"}}, "backoff.initial")
		s.badRequest("PUT", qp("q-bad"), map[string]any{"backoff": map[string]any{"jitter": "x"}}, "backoff.jitter")
		s.badRequest("PUT", qp("q-bad"), map[string]any{"bogus_setting": 1}, "bogus_setting")
		s.badRequest("PUT", qp("q-bad"), map[string]any{"default_priority": "x"}, "default_priority")
		s.badRequest("PUT", qp("q-bad"), map[string]any{"max_payload": 64<<20 + 1}, "max_payload")
		st, m, raw := s.do("GET", qp("q-bad"), nil)
		wantError(t, "GET queue after rejected PUTs", st, m, raw, 404, "queue_not_found", "")
		st, m, raw = s.do("PUT", "/v1/ns/default/queues/bad%20name%21", map[string]any{})
		wantError(t, "PUT queue with an invalid name", st, m, raw, 400, "bad_request", "")
	})

	t.Run("counts_per_state_and_listing", func(t *testing.T) {
		s := srv.as(t)
		q := "q-counts"
		s.expect(201, "PUT", qp(q), map[string]any{"retain_results": "1m"})
		s.put(q, map[string]any{"payload": "reserved", "priority": 0})
		s.takeOne(q)
		s.put(q, map[string]any{"payload": "dead", "priority": 0})
		j := s.takeOne(q)
		s.expect(200, "POST", jobActp(q, jstr(j, "id"), "bury"), map[string]any{"receipt": jstr(j, "receipt")})
		s.put(q, map[string]any{"payload": "completed", "priority": 0})
		s.ack(q, s.takeOne(q), nil)
		s.put(q, map[string]any{"payload": "delayed", "delay": "1h"})
		s.put(q, map[string]any{"payload": "ready1"})
		s.put(q, map[string]any{"payload": "ready2"})
		s.put(q, map[string]any{"payload": "head", "key": "k"})
		s.put(q, map[string]any{"payload": "blocked", "key": "k"})
		want := map[string]int64{"delayed": 1, "ready": 3, "blocked": 1, "reserved": 1, "dead": 1, "completed": 1}
		if c := s.counts(q); !mapsEqual(c, want) {
			t.Errorf("counts %v, want %v", c, want)
		}
		s.expect(201, "PUT", qp("q-counts-2"), map[string]any{})
		m, raw := s.expect(200, "GET", "/v1/ns/default/queues", nil)
		found := map[string]map[string]any{}
		for _, e := range jarr(m, "queues") {
			found[jstr(e, "name")] = e.(map[string]any)
		}
		if found[q] == nil || found["q-counts-2"] == nil {
			t.Fatalf("queue listing lacks q-counts or q-counts-2: %s", trunc(raw))
		}
		for k, v := range want {
			if jint(found[q], "counts", k) != v {
				t.Errorf("listing counts.%s = %v, want %d", k, jget(found[q], "counts", k), v)
			}
		}
		if jstr(found[q], "namespace") != "default" || jstr(found[q], "config", "retain_results") != "1m0s" {
			t.Errorf("listed queue object %v", found[q])
		}
		if has(m, "next_cursor") {
			t.Errorf("queue listing is not paginated")
		}
		st, em, eraw := s.do("GET", qp("q-never"), nil)
		wantError(t, "GET missing queue", st, em, eraw, 404, "queue_not_found", "")
	})

	t.Run("pause_resume", func(t *testing.T) {
		s := srv.as(t)
		q := "q-pause"
		first := s.putID(q, map[string]any{"payload": 1})
		m, _ := s.expect(200, "POST", qp(q)+"/pause", nil)
		if p, _ := jbool(m, "paused"); !p || jstr(m, "name") != q {
			t.Errorf("pause answer %v, want the queue object with paused true", m)
		}
		if jobs := s.take(q, map[string]any{"max": 10}); len(jobs) != 0 {
			t.Errorf("paused queue handed out %v", ids(jobs))
		}
		s.put(q, map[string]any{"payload": 2}) // puts still accepted
		if jobs := s.take(q, map[string]any{"max": 10, "wait": "300ms"}); len(jobs) != 0 {
			t.Errorf("paused queue handed out %v after a wait", ids(jobs))
		}
		m, _ = s.expect(200, "POST", "/v1/ns/default/take", map[string]any{"queues": []string{q}, "max": 10})
		if n := len(jarr(m, "jobs")); n != 0 {
			t.Errorf("multi-queue take from a paused queue handed out %d", n)
		}
		if g, _ := s.expect(200, "GET", qp(q), nil); jint(g, "counts", "ready") != 2 {
			t.Errorf("paused queue counts %v", g["counts"])
		} else if p, _ := jbool(g, "paused"); !p {
			t.Errorf("GET paused queue: paused false")
		}
		// A take waiting on the paused queue gets a job once it resumes.
		type res struct {
			jobs []any
			at   time.Time
		}
		done := make(chan res, 1)
		go func() {
			_, tm, _ := s.quiet().do("POST", qp(q)+"/take", map[string]any{"max": 1, "wait": "5s"})
			done <- res{jarr(tm, "jobs"), time.Now()}
		}()
		time.Sleep(200 * time.Millisecond)
		resumed := time.Now()
		m, _ = s.expect(200, "POST", qp(q)+"/resume", nil)
		if p, ok := jbool(m, "paused"); !ok || p {
			t.Errorf("resume answer %v, want paused false", m)
		}
		select {
		case r := <-done:
			if len(r.jobs) != 1 || jstr(r.jobs[0], "id") != first {
				t.Errorf("waiting take after resume: %v, want %s", r.jobs, first)
			}
			if d := r.at.Sub(resumed); d > 2*time.Second {
				t.Errorf("waiting take returned %v after resume", d)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("waiting take never returned")
		}
		st, em, eraw := s.do("POST", qp("q-never-paused")+"/pause", nil)
		wantError(t, "pause missing queue", st, em, eraw, 404, "queue_not_found", "")
	})

	t.Run("purge", func(t *testing.T) {
		s := srv.as(t)
		q := "q-purge"
		s.put(q, map[string]any{"payload": 1, "priority": 0})
		j := s.takeOne(q)
		s.put(q, map[string]any{"payload": 2})
		s.put(q, map[string]any{"payload": 3, "delay": "1h"})
		s.put(q, map[string]any{"payload": 4, "key": "a"})
		s.put(q, map[string]any{"payload": 5, "key": "a"})
		m, _ := s.expect(200, "POST", qp(q)+"/purge", nil)
		if jint(m, "deleted") != 5 {
			t.Errorf("purge: %v, want deleted 5", m)
		}
		st, em, eraw := s.do("POST", jobActp(q, jstr(j, "id"), "ack"), map[string]any{"receipt": jstr(j, "receipt")})
		wantError(t, "ack of a purged reserved job", st, em, eraw, 404, "job_not_found", "")
		if c := s.counts(q); !mapsEqual(c, map[string]int64{"delayed": 0, "ready": 0, "blocked": 0, "reserved": 0, "dead": 0, "completed": 0}) {
			t.Errorf("counts after purge %v", c)
		}
		s.wantGone(q, jstr(j, "id"))
	})

	t.Run("delete_queue", func(t *testing.T) {
		s := srv.as(t)
		q := "q-delete"
		s.expect(201, "PUT", qp(q), map[string]any{"default_priority": 9})
		id := s.putID(q, map[string]any{"payload": 1})
		st, _, raw := s.do("DELETE", qp(q), nil)
		if st != 204 || len(raw) != 0 {
			t.Errorf("DELETE queue: %d %q, want 204", st, raw)
		}
		st, em, eraw := s.do("GET", qp(q), nil)
		wantError(t, "GET deleted queue", st, em, eraw, 404, "queue_not_found", "")
		s.wantGoneOrNoQueue(q, id)
		// A put re-creates it fresh with defaults.
		id2 := s.putID(q, map[string]any{"payload": 1})
		if jint(s.peek(q, id2), "priority") != 1024 {
			t.Errorf("re-created queue kept the old config")
		}
		if c := s.counts(q); c["ready"] != 1 {
			t.Errorf("re-created queue counts %v", c)
		}
		st, em, eraw = s.do("DELETE", qp("q-never-deleted"), nil)
		wantError(t, "DELETE missing queue", st, em, eraw, 404, "queue_not_found", "")
	})

	t.Run("queue_full", func(t *testing.T) {
		s := srv.as(t)
		q := "q-full"
		s.expect(201, "PUT", qp(q), map[string]any{"max_jobs": 2})
		s.put(q, map[string]any{"payload": 1})
		s.put(q, map[string]any{"payload": 2})
		st, m, raw := s.do("POST", jobsp(q), map[string]any{"payload": 3})
		wantError(t, "put into a full queue", st, m, raw, 429, "queue_full", "")
		s.ack(q, s.takeOne(q), nil)
		st, m, raw = s.do("POST", jobsp(q)+"/batch", map[string]any{"jobs": []any{map[string]any{"payload": 4}, map[string]any{"payload": 5}}})
		wantError(t, "batch over max_jobs", st, m, raw, 429, "queue_full", "")
		if c := s.counts(q); c["ready"] != 1 {
			t.Errorf("a rejected batch put jobs: %v", c)
		}
		s.put(q, map[string]any{"payload": 6})
	})

	t.Run("queue_max_payload", func(t *testing.T) {
		s := srv.as(t)
		q := "q-small"
		s.expect(201, "PUT", qp(q), map[string]any{"max_payload": 10})
		s.put(q, map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 10))})
		st, m, raw := s.do("POST", jobsp(q), map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 11))})
		wantError(t, "payload over the queue's max_payload", st, m, raw, 413, "payload_too_large", "")
		st, m, raw = s.do("POST", jobsp(q), map[string]any{"payload": strings.Repeat("x", 11)})
		wantError(t, "JSON payload over the queue's max_payload", st, m, raw, 413, "payload_too_large", "")
	})

	t.Run("namespace_without_auto_create", func(t *testing.T) {
		s := srv.as(t)
		s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "strict-ns", "auto_create_queues": false})
		st, m, raw := s.do("POST", nsqp("strict-ns", "orders")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "put into a missing queue of a no-auto-create namespace", st, m, raw, 404, "queue_not_found", "")
		st, m, raw = s.do("POST", nsqp("strict-ns", "orders")+"/jobs/batch", map[string]any{"jobs": []any{map[string]any{"payload": 1}}})
		wantError(t, "batch into a missing queue of a no-auto-create namespace", st, m, raw, 404, "queue_not_found", "")
		s.expect(201, "PUT", nsqp("strict-ns", "orders"), map[string]any{})
		if m, _ := s.expect(201, "POST", nsqp("strict-ns", "orders")+"/jobs", map[string]any{"payload": 1}); jstr(m, "id") == "" {
			t.Errorf("put after PUT queue: %v", m)
		}
		// Take from a missing queue still answers [] there.
		m, _ = s.expect(200, "POST", nsqp("strict-ns", "nothing")+"/take", map[string]any{})
		if a, ok := m["jobs"].([]any); !ok || len(a) != 0 {
			t.Errorf("take on missing queue: %v", m)
		}
		// Namespaces are separate: the default namespace has no such job.
		g, _ := s.expect(200, "GET", "/v1/ns/strict-ns/queues", nil)
		if n := len(jarr(g, "queues")); n != 1 {
			t.Errorf("strict-ns queue listing has %d queues, want 1", n)
		}
	})

	t.Run("unknown_namespace", func(t *testing.T) {
		s := srv.as(t)
		st, m, raw := s.do("POST", nsqp("no-such-ns", "q")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "put into an unknown namespace", st, m, raw, 404, "namespace_not_found", "")
		st, m, raw = s.do("GET", "/v1/ns/no-such-ns/queues", nil)
		wantError(t, "list queues of an unknown namespace", st, m, raw, 404, "namespace_not_found", "")
	})
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
