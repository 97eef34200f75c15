package e2e

import (
	"fmt"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// TestPeekListPatchDelete covers peek (never changes state), list filters,
// ordering and pagination, PATCH and DELETE of a job (docs/api.md, Jobs).
func TestPeekListPatchDelete(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("peek_never_changes_state", func(t *testing.T) {
		s := srv.as(t)
		q := "p-peek"
		d := s.putID(q, map[string]any{"payload": 1, "delay": "1h"})
		r := s.putID(q, map[string]any{"payload": 2})
		res := s.putID(q, map[string]any{"payload": 3, "priority": 0})
		s.takeOne(q) // reserves res (priority 0)
		for _, id := range []string{d, r, res} {
			a := s.peek(q, id)
			for i := 0; i < 3; i++ {
				if b := s.peek(q, id); !reflect.DeepEqual(a, b) {
					t.Errorf("peek of %s changed between calls:\n%v\n%v", id, a, b)
				}
			}
		}
		if st := s.state(q, r); st != "ready" {
			t.Errorf("peeked ready job is %q", st)
		}
		if p := s.peek(q, r); jint(p, "attempt") != 0 {
			t.Errorf("peek counted as a delivery: attempt %v", p["attempt"])
		}
		if c := s.counts(q); c["delayed"] != 1 || c["ready"] != 1 || c["reserved"] != 1 {
			t.Errorf("counts %v", c)
		}
		// The peeked ready job is still handed out.
		if jobs := s.take(q, map[string]any{"max": 10}); len(jobs) != 1 || jstr(jobs[0], "id") != r {
			t.Errorf("take after peeks: %v, want %s", jobs, r)
		}
		s.wantGone(q, "NO-SUCH-JOB")
		st, m, raw := s.do("GET", jobp("p-no-such-queue", "x"), nil)
		if st != 404 || (jstr(m, "error", "code") != "queue_not_found" && jstr(m, "error", "code") != "job_not_found") {
			t.Errorf("peek in a missing queue: %d %s", st, raw)
		}
	})

	t.Run("list_filters", func(t *testing.T) {
		s := srv.as(t)
		q := "p-filter"
		r1 := s.putID(q, map[string]any{"payload": 1, "tags": map[string]string{"user_id": "42", "kind": "a"}})
		r2 := s.putID(q, map[string]any{"payload": 2, "tags": map[string]string{"user_id": "43"}, "key": "user:43"})
		d1 := s.putID(q, map[string]any{"payload": 3, "delay": "1h", "tags": map[string]string{"user_id": "42"}})
		k1 := s.putID(q, map[string]any{"payload": 4, "key": "user:42"})
		k2 := s.putID(q, map[string]any{"payload": 5, "key": "user:42"}) // blocked behind k1
		x := s.putID(q, map[string]any{"payload": 6, "priority": 0, "tags": map[string]string{"kind": "b"}})
		s.takeOne(q) // reserves x
		check := func(query string, want ...string) {
			t.Helper()
			got := idsOf(s.listAll(q, query, 100))
			if !equalStrings(sortedCopy(got), sortedCopy(want)) {
				t.Errorf("list ?%s = %v, want %v", query, got, want)
			}
		}
		check("", r1, r2, d1, k1, k2, x)
		check("state=ready", r1, r2, k1)
		check("state=delayed", d1)
		check("state=blocked", k2)
		check("state=reserved", x)
		check("state=dead")
		check("key="+url.QueryEscape("user:42"), k1, k2)
		check("tag.user_id=42", r1, d1)
		check("tag.user_id=42&tag.kind=a", r1)
		check("tag.user_id=42&state=delayed", d1)
		check("tag.kind=b&state=reserved", x)
		check("tag.user_id=44")
		// Mixed-state listing is in enqueue order.
		if got := idsOf(s.listAll(q, "", 100)); !equalStrings(got, []string{r1, r2, d1, k1, k2, x}) {
			t.Errorf("mixed listing order %v, want enqueue order", got)
		}
		s.badRequest("GET", jobsp(q)+"?state=bogus", nil, "state")
		s.badRequest("GET", jobsp(q)+"?limit=1001", nil, "limit")
		s.badRequest("GET", jobsp(q)+"?limit=abc", nil, "limit")
		// A listed job is the full job object, payload included.
		for _, j := range s.listAll(q, "state=blocked", 10) {
			if jstr(j, "state") != "blocked" || jint(j, "payload") != 5 || jstr(j, "key") != "user:42" {
				t.Errorf("listed job %v", j)
			}
		}
	})

	t.Run("list_order_per_state", func(t *testing.T) {
		s := srv.as(t)
		q := "p-order"
		// ready: serving order.
		r5 := s.putID(q, map[string]any{"payload": 1, "priority": 5})
		r1 := s.putID(q, map[string]any{"payload": 1, "priority": 1})
		r3 := s.putID(q, map[string]any{"payload": 1, "priority": 3})
		r3b := s.putID(q, map[string]any{"payload": 1, "priority": 3})
		if got := idsOf(s.listAll(q, "state=ready", 100)); !equalStrings(got, []string{r1, r3, r3b, r5}) {
			t.Errorf("ready listing %v, want serving order %v", got, []string{r1, r3, r3b, r5})
		}
		// delayed: by activation time.
		d3 := s.putID(q, map[string]any{"payload": 1, "delay": "3h"})
		d1 := s.putID(q, map[string]any{"payload": 1, "delay": "1h", "priority": 9})
		d2 := s.putID(q, map[string]any{"payload": 1, "delay": "2h", "priority": 0})
		if got := idsOf(s.listAll(q, "state=delayed", 100)); !equalStrings(got, []string{d1, d2, d3}) {
			t.Errorf("delayed listing %v, want by activation time %v", got, []string{d1, d2, d3})
		}
		// others (dead): by id.
		q2 := "p-order-dead"
		var dead []string
		for i := 0; i < 5; i++ {
			s.putID(q2, map[string]any{"payload": i, "priority": 10 - i})
		}
		for i := 0; i < 5; i++ {
			j := s.takeOne(q2)
			s.expect(200, "POST", jobActp(q2, jstr(j, "id"), "bury"), map[string]any{"receipt": jstr(j, "receipt")})
			dead = append(dead, jstr(j, "id"))
		}
		if got := idsOf(s.listAll(q2, "state=dead", 100)); !equalStrings(got, sortedCopy(dead)) {
			t.Errorf("dead listing %v, want by id %v", got, sortedCopy(dead))
		}
	})

	t.Run("pagination_complete", func(t *testing.T) {
		s := srv.as(t)
		q := "p-pages"
		var jobs []any
		for i := 0; i < 250; i++ {
			jobs = append(jobs, map[string]any{"payload": i})
		}
		m, _ := s.expect(201, "POST", jobsp(q)+"/batch", map[string]any{"jobs": jobs})
		var want []string
		for _, j := range jarr(m, "jobs") {
			want = append(want, jstr(j, "id"))
		}
		for _, query := range []string{"", "state=ready"} {
			var got []string
			var sizes []int
			cursor := ""
			for page := 0; page < 10; page++ {
				path := jobsp(q) + "?limit=100"
				if query != "" {
					path += "&" + query
				}
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				pm, raw := s.expect(200, "GET", path, nil)
				sizes = append(sizes, len(jarr(pm, "jobs")))
				got = append(got, ids(jarr(pm, "jobs"))...)
				nc, has := pm["next_cursor"]
				if !has {
					break
				}
				if cursor, _ = nc.(string); cursor == "" {
					t.Fatalf("next_cursor present but empty: %s", trunc(raw))
				}
			}
			if !reflect.DeepEqual(sizes, []int{100, 100, 50}) {
				t.Errorf("?%s: page sizes %v, want [100 100 50] with no next_cursor on the last", query, sizes)
			}
			if !equalStrings(got, want) {
				t.Errorf("?%s: pages are not the 250 jobs in order, once each (got %d)", query, len(got))
			}
		}
		// Default limit is 100.
		pm, _ := s.expect(200, "GET", jobsp(q), nil)
		if n := len(jarr(pm, "jobs")); n != 100 || jstr(pm, "next_cursor") == "" {
			t.Errorf("default page: %d jobs, next_cursor %q; want 100 and a cursor", n, jstr(pm, "next_cursor"))
		}
		// limit 1000 is allowed and returns everything at once.
		pm, _ = s.expect(200, "GET", jobsp(q)+"?limit=1000", nil)
		if n := len(jarr(pm, "jobs")); n != 250 || has(pm, "next_cursor") {
			t.Errorf("limit 1000: %d jobs, next_cursor %v", n, pm["next_cursor"])
		}
		// Pagination stays complete while jobs are taken between pages.
		p1, _ := s.expect(200, "GET", jobsp(q)+"?limit=100&state=ready", nil)
		first := ids(jarr(p1, "jobs"))
		s.take(q, map[string]any{"max": 10}) // takes 10 from page 1
		seen := map[string]bool{}
		for _, id := range first {
			seen[id] = true
		}
		rest := s.listAllFrom(q, "state=ready", 100, jstr(p1, "next_cursor"))
		for _, id := range rest {
			if seen[id] {
				t.Errorf("job %s on two pages", id)
			}
			seen[id] = true
		}
		if len(rest) != 150 {
			t.Errorf("pages after the first hold %d jobs, want 150", len(rest))
		}
	})

	t.Run("patch", func(t *testing.T) {
		s := srv.as(t)
		q := "p-patch"
		id := s.putID(q, map[string]any{"payload": 1, "tags": map[string]string{"a": "1", "b": "2"}})
		m, raw := s.expect(200, "PATCH", jobp(q, id), `{"payload": {"new" : 1}}`)
		if jstr(m, "id") != id || string(rawObject(t, raw)["payload"]) != `{"new":1}` {
			t.Errorf("patch payload answer: %s", raw)
		}
		if got := string(rawObject(t, s.peekRaw(q, id))["payload"]); got != `{"new":1}` {
			t.Errorf("payload after patch %s", got)
		}
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"payload_base64": "AQID"})
		if jstr(s.peek(q, id), "payload_base64") != "AQID" {
			t.Errorf("patch payload_base64: %v", m)
		}
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"priority": 7})
		if jint(m, "priority") != 7 || jint(s.peek(q, id), "priority") != 7 {
			t.Errorf("patch priority: %v", m)
		}
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"tags": map[string]string{"c": "3"}})
		if tags := jmap(s.peek(q, id), "tags"); !reflect.DeepEqual(tags, map[string]any{"c": "3"}) {
			t.Errorf("tags after patch %v, want exactly {c:3} (replace)", tags)
		}
		before := time.Now()
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"delay": "1h"})
		after := time.Now()
		if jstr(m, "state") != "delayed" {
			t.Errorf("patch delay 1h: state %q", jstr(m, "state"))
		}
		within(t, "activate_at after patch delay", mustTime(t, jstr(m, "activate_at")), before.Add(time.Hour), after.Add(time.Hour), 5*time.Millisecond)
		at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"at": at.Format(time.RFC3339Nano)})
		if !mustTime(t, jstr(m, "activate_at")).Equal(at) {
			t.Errorf("patch at: activate_at %s, want %s", jstr(m, "activate_at"), at.Format(time.RFC3339Nano))
		}
		// Back to now: ready again.
		m, _ = s.expect(200, "PATCH", jobp(q, id), map[string]any{"delay": "0s"})
		if jstr(m, "state") != "ready" {
			t.Errorf("patch delay 0s: state %q, want ready", jstr(m, "state"))
		}
		s.badRequest("PATCH", jobp(q, id), map[string]any{"delay": "1s", "at": at.Format(time.RFC3339Nano)}, "at")
		s.badRequest("PATCH", jobp(q, id), map[string]any{"delay": "87601h"}, "delay")
		s.badRequest("PATCH", jobp(q, id), map[string]any{"priority": "x"}, "priority")
		s.badRequest("PATCH", jobp(q, id), map[string]any{"bogus": 1}, "bogus")
		st, em, eraw := s.do("PATCH", jobp(q, "NO-SUCH"), map[string]any{"priority": 1})
		wantError(t, "patch unknown job", st, em, eraw, 404, "job_not_found", "")

		// Reserved: 409 without receipt (and with a wrong one), 200 with it.
		rid := s.putID(q+"-r", map[string]any{"payload": 1})
		j := s.takeOne(q + "-r")
		st, em, eraw = s.do("PATCH", jobp(q+"-r", rid), map[string]any{"priority": 3})
		wantError(t, "patch reserved without receipt", st, em, eraw, 409, "conflict", "")
		st, em, eraw = s.do("PATCH", jobp(q+"-r", rid), map[string]any{"priority": 3, "receipt": "wrong"})
		wantError(t, "patch reserved with wrong receipt", st, em, eraw, 409, "conflict", "")
		m, _ = s.expect(200, "PATCH", jobp(q+"-r", rid), map[string]any{"priority": 3, "receipt": jstr(j, "receipt")})
		if jint(m, "priority") != 3 || jstr(m, "state") != "reserved" {
			t.Errorf("patch reserved with receipt: %v", m)
		}

		// Dead: allowed, stays dead; the new priority applies after respawn.
		did := s.putID(q+"-d", map[string]any{"payload": 1})
		j = s.takeOne(q + "-d")
		s.expect(200, "POST", jobActp(q+"-d", did, "bury"), map[string]any{"receipt": jstr(j, "receipt")})
		m, _ = s.expect(200, "PATCH", jobp(q+"-d", did), map[string]any{"priority": 4})
		if jstr(m, "state") != "dead" || jint(m, "priority") != 4 {
			t.Errorf("patch dead: %v", m)
		}
		s.expect(200, "POST", qp(q+"-d")+"/dead/respawn", map[string]any{"ids": []string{did}})
		if p := s.peek(q+"-d", did); jstr(p, "state") != "ready" || jint(p, "priority") != 4 {
			t.Errorf("respawned patched job %v", p)
		}

		// Completed: 409.
		cq := q + "-c"
		s.expect(201, "PUT", qp(cq), map[string]any{"retain_results": "1m"})
		cid := s.putID(cq, map[string]any{"payload": 1})
		s.ack(cq, s.takeOne(cq), map[string]any{"result": 1})
		st, em, eraw = s.do("PATCH", jobp(cq, cid), map[string]any{"priority": 1})
		wantError(t, "patch completed", st, em, eraw, 409, "conflict", "")
	})

	t.Run("delete_job", func(t *testing.T) {
		s := srv.as(t)
		q := "p-delete"
		id := s.putID(q, map[string]any{"payload": 1, "delay": "1h"})
		st, _, raw := s.do("DELETE", jobp(q, id), nil)
		if st != 204 || len(raw) != 0 {
			t.Errorf("delete: %d %q, want 204 with no body", st, raw)
		}
		s.wantGone(q, id)
		st, m, raw := s.do("DELETE", jobp(q, id), nil)
		wantError(t, "delete twice", st, m, raw, 404, "job_not_found", "")

		rid := s.putID(q, map[string]any{"payload": 2})
		j := s.takeOne(q)
		st, m, raw = s.do("DELETE", jobp(q, rid), nil)
		wantError(t, "delete reserved without receipt", st, m, raw, 409, "conflict", "")
		st, m, raw = s.do("DELETE", jobp(q, rid)+"?receipt=wrong", nil)
		wantError(t, "delete reserved with wrong receipt", st, m, raw, 409, "conflict", "")
		if s.state(q, rid) != "reserved" {
			t.Errorf("rejected delete changed the job")
		}
		s.expect(204, "DELETE", jobp(q, rid)+"?receipt="+url.QueryEscape(jstr(j, "receipt")), nil)
		s.wantGone(q, rid)
		st, m, raw = s.do("POST", jobActp(q, rid, "ack"), map[string]any{"receipt": jstr(j, "receipt")})
		wantError(t, "ack of a deleted job", st, m, raw, 404, "job_not_found", "")
	})
}

// listAllFrom continues a listing from cursor and returns the ids.
func (s *server) listAllFrom(q, query string, limit int, cursor string) []string {
	s.t.Helper()
	var out []string
	for page := 0; cursor != "" && page < 1000; page++ {
		m, _ := s.expect(200, "GET", fmt.Sprintf("%s?%s&limit=%d&cursor=%s", jobsp(q), query, limit, url.QueryEscape(cursor)), nil)
		out = append(out, ids(jarr(m, "jobs"))...)
		cursor = jstr(m, "next_cursor")
	}
	return out
}

// TestCancelAndKeys covers cancel by filter in a queue and across the
// namespace, and strict per-key FIFO (docs/api.md, key_mode; internal/engine/place.go).
func TestCancelAndKeys(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("cancel_in_queue", func(t *testing.T) {
		s := srv.as(t)
		q := "c-q"
		a := s.putID(q, map[string]any{"payload": 1, "tags": map[string]string{"user_id": "42"}})
		b := s.putID(q, map[string]any{"payload": 2, "tags": map[string]string{"user_id": "42"}})
		d := s.putID(q, map[string]any{"payload": 3, "tags": map[string]string{"user_id": "42"}, "delay": "1h"})
		r := s.putID(q, map[string]any{"payload": 4, "tags": map[string]string{"user_id": "42"}, "priority": 0})
		other := s.putID(q, map[string]any{"payload": 5, "tags": map[string]string{"user_id": "43"}})
		if j := s.takeOne(q); jstr(j, "id") != r {
			t.Fatalf("expected to reserve %s", r)
		}
		s.badRequest("DELETE", jobsp(q), nil, "filter")
		m, _ := s.expect(200, "DELETE", jobsp(q)+"?state=delayed&tag.user_id=42", nil)
		if jint(m, "deleted") != 1 {
			t.Errorf("cancel state=delayed: %v, want deleted 1", m)
		}
		s.wantGone(q, d)
		m, _ = s.expect(200, "DELETE", jobsp(q)+"?tag.user_id=42", nil)
		if jint(m, "deleted") != 2 {
			t.Errorf("cancel tag.user_id=42: %v, want deleted 2 (reserved untouched)", m)
		}
		s.wantGone(q, a)
		s.wantGone(q, b)
		if s.state(q, r) != "reserved" {
			t.Errorf("reserved job touched by a cancel without state=reserved")
		}
		if s.state(q, other) != "ready" {
			t.Errorf("job of another tag cancelled")
		}
		m, _ = s.expect(200, "DELETE", jobsp(q)+"?state=reserved&tag.user_id=42", nil)
		if jint(m, "deleted") != 1 {
			t.Errorf("cancel with state=reserved: %v, want deleted 1", m)
		}
		s.wantGone(q, r)
		// By key.
		k1 := s.putID(q, map[string]any{"payload": 1, "key": "user:9"})
		k2 := s.putID(q, map[string]any{"payload": 2, "key": "user:9"})
		m, _ = s.expect(200, "DELETE", jobsp(q)+"?key="+url.QueryEscape("user:9"), nil)
		if jint(m, "deleted") != 2 {
			t.Errorf("cancel by key: %v", m)
		}
		s.wantGone(q, k1)
		s.wantGone(q, k2)
		m, _ = s.expect(200, "DELETE", jobsp(q)+"?tag.user_id=nobody", nil)
		if jint(m, "deleted") != 0 {
			t.Errorf("cancel matching nothing: %v", m)
		}
	})

	t.Run("cancel_across_namespace", func(t *testing.T) {
		s := srv.as(t)
		ids := []string{
			s.putID("c-ns-1", map[string]any{"payload": 1, "tags": map[string]string{"cx": "1"}}),
			s.putID("c-ns-1", map[string]any{"payload": 1, "tags": map[string]string{"cx": "1"}, "delay": "1h"}),
			s.putID("c-ns-2", map[string]any{"payload": 1, "tags": map[string]string{"cx": "1"}}),
		}
		keep := s.putID("c-ns-2", map[string]any{"payload": 1, "tags": map[string]string{"cx": "2"}})
		res := s.putID("c-ns-3", map[string]any{"payload": 1, "tags": map[string]string{"cx": "1"}})
		s.takeOne("c-ns-3")
		s.badRequest("DELETE", "/v1/ns/default/jobs", nil, "filter")
		m, _ := s.expect(200, "DELETE", "/v1/ns/default/jobs?tag.cx=1", nil)
		if jint(m, "deleted") != 3 {
			t.Errorf("namespace cancel: %v, want deleted 3", m)
		}
		s.wantGone("c-ns-1", ids[0])
		s.wantGone("c-ns-1", ids[1])
		s.wantGone("c-ns-2", ids[2])
		s.peek("c-ns-2", keep)
		if s.state("c-ns-3", res) != "reserved" {
			t.Errorf("namespace cancel touched a reserved job")
		}
		m, _ = s.expect(200, "DELETE", "/v1/ns/default/jobs?state=delayed&tag.cx=2", nil)
		if jint(m, "deleted") != 0 {
			t.Errorf("state=delayed&tag.cx=2: %v, want 0", m)
		}
	})

	t.Run("key_fifo_strict", func(t *testing.T) {
		s := srv.as(t)
		q := "k-fifo"
		a := s.putID(q, map[string]any{"payload": "a", "key": "user:42", "priority": 100})
		b := s.putID(q, map[string]any{"payload": "b", "key": "user:42", "priority": 0})
		other := s.putID(q, map[string]any{"payload": "o", "key": "user:7", "priority": 50})
		if st := s.state(q, b); st != "blocked" {
			t.Errorf("second job of a key: %q, want blocked", st)
		}
		if st := s.state(q, a); st != "ready" {
			t.Errorf("head of a key: %q, want ready", st)
		}
		if c := s.counts(q); c["blocked"] != 1 || c["ready"] != 2 {
			t.Errorf("counts %v, want ready 2 blocked 1", c)
		}
		jobs := s.take(q, map[string]any{"max": 10})
		if got := ids(jobs); !equalStrings(got, []string{other, a}) {
			t.Fatalf("take max 10: %v, want [%s %s] (priority across keys; b blocked)", got, other, a)
		}
		if st := s.state(q, b); st != "blocked" {
			t.Errorf("while the head is reserved: %q, want blocked", st)
		}
		if more := s.take(q, map[string]any{"max": 10}); len(more) != 0 {
			t.Errorf("blocked job handed out: %v", more)
		}
		s.ack(q, jobs[1].(map[string]any), nil)
		if st := s.state(q, b); st != "ready" {
			t.Errorf("after the head's ack: %q, want ready", st)
		}
		if j := s.takeOne(q); jstr(j, "id") != b {
			t.Errorf("took %s, want %s", jstr(j, "id"), b)
		}
	})

	t.Run("nacked_head_holds_key", func(t *testing.T) {
		s := srv.as(t)
		q := "k-nack"
		c := s.putID(q, map[string]any{"payload": "c", "key": "k2"})
		d := s.putID(q, map[string]any{"payload": "d", "key": "k2"})
		j := s.takeOne(q)
		if jstr(j, "id") != c {
			t.Fatalf("took %s, want head %s", jstr(j, "id"), c)
		}
		s.expect(200, "POST", jobActp(q, c, "nack"), map[string]any{"receipt": jstr(j, "receipt"), "delay": "300ms"})
		if st := s.state(q, c); st != "delayed" {
			t.Errorf("nacked head %q, want delayed", st)
		}
		if st := s.state(q, d); st != "blocked" {
			t.Errorf("job behind a nacked head: %q, want blocked", st)
		}
		if jobs := s.take(q, map[string]any{"max": 10}); len(jobs) != 0 {
			t.Errorf("take while the head waits: %v, want nothing", ids(jobs))
		}
		jobs := s.take(q, map[string]any{"max": 10, "wait": "3s"})
		if got := ids(jobs); !equalStrings(got, []string{c}) {
			t.Fatalf("take after the retry delay: %v, want only the head %s", got, c)
		}
		s.ack(q, jobs[0].(map[string]any), nil)
		if j := s.takeOne(q); jstr(j, "id") != d {
			t.Errorf("after acking the head took %s, want %s", jstr(j, "id"), d)
		}
	})

	t.Run("delayed_head_holds_key_dead_head_does_not", func(t *testing.T) {
		s := srv.as(t)
		q := "k-dead"
		h := s.putID(q, map[string]any{"payload": "h", "key": "k3", "delay": "1h"})
		n := s.putID(q, map[string]any{"payload": "n", "key": "k3"})
		if st := s.state(q, n); st != "blocked" {
			t.Errorf("ready job behind a delayed head: %q, want blocked", st)
		}
		s.expect(200, "PATCH", jobp(q, h), map[string]any{"delay": "0s"})
		j := s.takeOne(q)
		if jstr(j, "id") != h {
			t.Fatalf("took %s, want head %s", jstr(j, "id"), h)
		}
		s.expect(200, "POST", jobActp(q, h, "bury"), map[string]any{"receipt": jstr(j, "receipt")})
		if st := s.state(q, n); st != "ready" {
			t.Errorf("job behind a dead head: %q, want ready", st)
		}
		// Deleting a head frees the key as well.
		h2 := s.putID(q, map[string]any{"payload": "h2", "key": "k4"})
		n2 := s.putID(q, map[string]any{"payload": "n2", "key": "k4"})
		s.expect(204, "DELETE", jobp(q, h2), nil)
		if st := s.state(q, n2); st != "ready" {
			t.Errorf("job behind a deleted head: %q, want ready", st)
		}
	})
}
