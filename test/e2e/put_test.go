package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPut covers POST .../jobs as docs/api.md describes it: payload encodings, the put answer,
// the job object defaults, validation and limits (Conventions),
// duration numbers, cron first activation and dedup.
func TestPut(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("answer_and_job_object", func(t *testing.T) {
		s := srv.as(t)
		before := time.Now()
		m := s.put("put-obj", map[string]any{"payload": map[string]any{"to": "a@b.c"}})
		after := time.Now()
		id := jstr(m, "id")
		if !ulidRe.MatchString(id) {
			t.Errorf("server id %q is not a 26-char uppercase Crockford ULID", id)
		}
		if jstr(m, "state") != "ready" {
			t.Errorf("put answer state %q, want ready", jstr(m, "state"))
		}
		if d, ok := jbool(m, "duplicate"); !ok || d {
			t.Errorf("put answer duplicate = %v (present %v), want false", d, ok)
		}
		within(t, "activate_at", mustTime(t, jstr(m, "activate_at")), before, after, 5*time.Millisecond)

		j := s.peek("put-obj", id)
		want := map[string]any{"id": id, "namespace": "default", "queue": "put-obj", "state": "ready", "ttr": "30s"}
		for k, v := range want {
			if j[k] != v {
				t.Errorf("job %s = %v, want %v", k, j[k], v)
			}
		}
		if jint(j, "priority") != 1024 || jint(j, "tries") != 25 || jint(j, "attempt") != 0 {
			t.Errorf("defaults: priority %v tries %v attempt %v, want 1024 25 0", j["priority"], j["tries"], j["attempt"])
		}
		within(t, "created_at", mustTime(t, jstr(j, "created_at")), before, after, 5*time.Millisecond)
		if jstr(j, "activate_at") != jstr(m, "activate_at") {
			t.Errorf("peek activate_at %s != put answer %s", jstr(j, "activate_at"), jstr(m, "activate_at"))
		}
		for _, k := range []string{"key", "tags", "expire_at", "receipt", "reserved_until", "last_error", "reply_to", "cron", "result", "payload_base64"} {
			if has(j, k) {
				t.Errorf("job object has %q = %v; it must be omitted here", k, j[k])
			}
		}
	})

	t.Run("all_fields_stored", func(t *testing.T) {
		s := srv.as(t)
		before := time.Now()
		m := s.put("put-fields", map[string]any{
			"payload": 1, "id": "order-42", "delay": "10s", "priority": 10, "ttl": "1h",
			"ttr": "45s", "tries": 5, "key": "user:42", "tags": map[string]string{"user_id": "42", "k": "v"},
			"reply_to": "results",
		})
		after := time.Now()
		if jstr(m, "id") != "order-42" || jstr(m, "state") != "delayed" {
			t.Errorf("put answer %v, want id order-42 state delayed", m)
		}
		j := s.peek("put-fields", "order-42")
		within(t, "activate_at", mustTime(t, jstr(j, "activate_at")), before.Add(10*time.Second), after.Add(10*time.Second), 5*time.Millisecond)
		created := mustTime(t, jstr(j, "created_at"))
		within(t, "expire_at", mustTime(t, jstr(j, "expire_at")), created.Add(time.Hour), created.Add(time.Hour), time.Millisecond)
		if jint(j, "priority") != 10 || jstr(j, "ttr") != "45s" || jint(j, "tries") != 5 || jstr(j, "key") != "user:42" || jstr(j, "reply_to") != "results" {
			t.Errorf("stored fields wrong: %v", j)
		}
		if tags := jmap(j, "tags"); len(tags) != 2 || tags["user_id"] != "42" || tags["k"] != "v" {
			t.Errorf("tags = %v", j["tags"])
		}
	})

	t.Run("durations_as_numbers", func(t *testing.T) {
		s := srv.as(t)
		before := time.Now()
		m := s.put("put-num", map[string]any{"payload": 1, "delay": 1.5, "ttr": 2.5})
		after := time.Now()
		if jstr(m, "state") != "delayed" {
			t.Errorf("state %q, want delayed", jstr(m, "state"))
		}
		within(t, "activate_at", mustTime(t, jstr(m, "activate_at")), before.Add(1500*time.Millisecond), after.Add(1500*time.Millisecond), 5*time.Millisecond)
		if got := jstr(s.peek("put-num", jstr(m, "id")), "ttr"); got != "2.5s" {
			t.Errorf("ttr %q, want 2.5s", got)
		}
	})

	t.Run("json_payload_compacted_order_kept", func(t *testing.T) {
		s := srv.as(t)
		body := `{"payload": {"z": 1,  "a" : [1, 2.50, -0.0, 1e3, "x\u00e9\n s p"], "m":{"b":true,"a":null}, "big": 12345678901234567890123} }`
		want := `{"z":1,"a":[1,2.50,-0.0,1e3,"x\u00e9\n s p"],"m":{"b":true,"a":null},"big":12345678901234567890123}`
		id := s.putID("put-json", body)
		if got := string(rawObject(t, s.peekRaw("put-json", id))["payload"]); got != want {
			t.Errorf("peek payload text\n got %s\nwant %s", got, want)
		}
		_, raw := s.expect(200, "POST", qp("put-json")+"/take", map[string]any{"max": 1})
		jobs := rawJobs(t, raw)
		if len(jobs) != 1 || string(jobs[0]["payload"]) != want {
			t.Errorf("take payload text\n got %s\nwant %s", raw, want)
		}
		if len(jobs) == 1 && jobs[0]["payload_base64"] != nil {
			t.Errorf("job put with payload answered with payload_base64")
		}
	})

	t.Run("json_payload_html_chars_kept", func(t *testing.T) {
		s := srv.as(t)
		want := `{"h":"<a&b>","e":"\u003c"}`
		id := s.putID("put-html", `{"payload":`+want+`}`)
		if got := string(rawObject(t, s.peekRaw("put-html", id))["payload"]); got != want {
			t.Errorf("payload text\n got %s\nwant %s", got, want)
		}
	})

	t.Run("json_payload_scalars", func(t *testing.T) {
		s := srv.as(t)
		for _, c := range []struct{ in, want string }{
			{`null`, `null`}, {`"str"`, `"str"`}, {`42`, `42`}, {` [ ] `, `[]`}, {`true`, `true`}, {`{ }`, `{}`},
		} {
			id := s.putID("put-scalar", `{"payload":`+c.in+`}`)
			raw := rawObject(t, s.peekRaw("put-scalar", id))
			got, ok := raw["payload"]
			if !ok || string(got) != c.want {
				t.Errorf("payload %s: peek has payload %q (present %v), want %s", c.in, got, ok, c.want)
			}
			if _, ok := raw["payload_base64"]; ok {
				t.Errorf("payload %s answered with payload_base64", c.in)
			}
		}
	})

	t.Run("payload_base64_roundtrip", func(t *testing.T) {
		s := srv.as(t)
		data := make([]byte, 257)
		for i := range data {
			data[i] = byte(i * 7)
		}
		enc := base64.StdEncoding.EncodeToString(data)
		id := s.putID("put-b64", map[string]any{"payload_base64": enc})
		j := s.peek("put-b64", id)
		if jstr(j, "payload_base64") != enc {
			t.Errorf("payload_base64 = %q, want %q", jstr(j, "payload_base64"), enc)
		}
		if has(j, "payload") {
			t.Errorf("job put with payload_base64 answered with payload")
		}
		jobs := s.take("put-b64", map[string]any{"max": 1})
		if len(jobs) != 1 || jstr(jobs[0], "payload_base64") != enc {
			t.Errorf("take: payload_base64 not returned intact: %v", jobs)
		}
		s.badRequest("POST", jobsp("put-b64"), map[string]any{"payload_base64": "-_-_"}, "payload_base64")
	})

	t.Run("payload_missing_or_both", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("POST", jobsp("put-bad"), map[string]any{}, "payload")
		s.badRequest("POST", jobsp("put-bad"), map[string]any{"priority": 3}, "payload")
		s.badRequest("POST", jobsp("put-bad"), map[string]any{"payload": 1, "payload_base64": "AA=="}, "payload")
	})

	t.Run("delay_and_at", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("POST", jobsp("put-bad"), map[string]any{"payload": 1, "delay": "1s", "at": "2030-01-01T00:00:00Z"}, "at")
	})

	t.Run("at_absolute", func(t *testing.T) {
		s := srv.as(t)
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		m := s.put("put-at", map[string]any{"payload": 1, "at": at.Format(time.RFC3339Nano)})
		if jstr(m, "state") != "delayed" || !mustTime(t, jstr(m, "activate_at")).Equal(at) {
			t.Errorf("put at %s: answer %v", at.Format(time.RFC3339Nano), m)
		}
		// A non-UTC offset is converted and answered in UTC.
		loc := time.FixedZone("X", 3*3600)
		m = s.put("put-at", map[string]any{"payload": 1, "at": at.In(loc).Format("2006-01-02T15:04:05.000-07:00")})
		if jstr(m, "activate_at") != at.Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("at with +03:00 offset: activate_at %q, want %q", jstr(m, "activate_at"), at.Format("2006-01-02T15:04:05.000Z"))
		}
		s.badRequest("POST", jobsp("put-at"), map[string]any{"payload": 1, "at": "tomorrow"}, "at")
	})

	t.Run("delay_limit", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("POST", jobsp("put-lim"), map[string]any{"payload": 1, "delay": "87601h"}, "delay")
		s.badRequest("POST", jobsp("put-lim"), map[string]any{"payload": 1, "delay": "soon"}, "delay")
		before := time.Now()
		m := s.put("put-lim", map[string]any{"payload": 1, "delay": "87600h"})
		after := time.Now()
		if jstr(m, "state") != "delayed" {
			t.Errorf("delay 87600h: state %q, want delayed", jstr(m, "state"))
		}
		within(t, "activate_at", mustTime(t, jstr(m, "activate_at")), before.Add(87600*time.Hour), after.Add(87600*time.Hour), 5*time.Millisecond)
	})

	t.Run("tags_limits", func(t *testing.T) {
		s := srv.as(t)
		tags := map[string]string{}
		for i := 0; i < 16; i++ {
			tags[fmt.Sprintf("%03d%s", i, strings.Repeat("k", 253))] = strings.Repeat("v", 256)
		}
		s.put("put-tags", map[string]any{"payload": 1, "tags": tags})
		tags["extra"] = "x"
		s.badRequest("POST", jobsp("put-tags"), map[string]any{"payload": 1, "tags": tags}, "tags")
		s.badRequest("POST", jobsp("put-tags"), map[string]any{"payload": 1, "tags": map[string]string{"k": strings.Repeat("v", 257)}}, "tags")
		s.badRequest("POST", jobsp("put-tags"), map[string]any{"payload": 1, "tags": map[string]string{strings.Repeat("k", 257): "v"}}, "tags")
	})

	t.Run("key_limit", func(t *testing.T) {
		s := srv.as(t)
		s.put("put-key", map[string]any{"payload": 1, "key": strings.Repeat("k", 256)})
		s.badRequest("POST", jobsp("put-key"), map[string]any{"payload": 1, "key": strings.Repeat("k", 257)}, "key")
	})

	t.Run("client_id_syntax", func(t *testing.T) {
		s := srv.as(t)
		s.put("put-id", map[string]any{"payload": 1, "id": "Ab_.:-9"})
		s.badRequest("POST", jobsp("put-id"), map[string]any{"payload": 1, "id": "has space"}, "id")
		s.badRequest("POST", jobsp("put-id"), map[string]any{"payload": 1, "id": strings.Repeat("x", 129)}, "id")
	})

	t.Run("unknown_field", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("POST", jobsp("put-bad"), map[string]any{"payload": 1, "bogus_field": 2}, "bogus_field")
	})

	t.Run("wrong_types", func(t *testing.T) {
		s := srv.as(t)
		for field, val := range map[string]any{
			"priority": "high", "tries": "x", "tags": []string{"a"}, "key": 5, "delay": true, "id": 7, "ttr": []int{1},
		} {
			s.badRequest("POST", jobsp("put-bad"), map[string]any{"payload": 1, field: val}, field)
		}
		s.badRequest("POST", jobsp("put-bad"), `{"payload":1,"priority":-1}`, "priority")
		s.badRequest("POST", jobsp("put-bad"), `{"payload":1,`, "")
	})

	t.Run("payload_too_large", func(t *testing.T) {
		s := srv.as(t)
		s.put("put-big", map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 1<<20))})
		st, m, raw := s.do("POST", jobsp("put-big"), map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 1<<20+1))})
		wantError(t, "put 1 MiB + 1", st, m, raw, 413, "payload_too_large", "")
		big := `{"payload":"` + strings.Repeat("x", 1<<20) + `"}`
		st, m, raw = s.do("POST", jobsp("put-big"), big)
		wantError(t, "put JSON payload over 1 MiB", st, m, raw, 413, "payload_too_large", "")
	})

	t.Run("cron_first_activation", func(t *testing.T) {
		s := srv.as(t)
		m := s.put("put-cron", map[string]any{"payload": 1, "cron": "0 8 * * *"})
		at := mustTime(t, jstr(m, "activate_at")).UTC()
		now := time.Now().UTC()
		if jstr(m, "state") != "delayed" || at.Hour() != 8 || at.Minute() != 0 || at.Second() != 0 || at.Nanosecond() != 0 || !at.After(now) || at.Sub(now) > 24*time.Hour {
			t.Errorf("cron 0 8 * * *: answer %v, want the next 08:00:00.000Z", m)
		}
		if got := jstr(s.peek("put-cron", jstr(m, "id")), "cron"); got != "0 8 * * *" {
			t.Errorf("cron stored as %q", got)
		}
		before := time.Now()
		m = s.put("put-cron", map[string]any{"payload": 1, "cron": "@every 5m"})
		after := time.Now()
		within(t, "@every 5m activate_at", mustTime(t, jstr(m, "activate_at")), before.Add(5*time.Minute), after.Add(5*time.Minute), 2*time.Second)
		before = time.Now()
		m = s.put("put-cron", map[string]any{"payload": 1, "cron": "0 8 * * *", "delay": "2s"})
		after = time.Now()
		within(t, "cron+delay activate_at", mustTime(t, jstr(m, "activate_at")), before.Add(2*time.Second), after.Add(2*time.Second), 5*time.Millisecond)
		s.badRequest("POST", jobsp("put-cron"), map[string]any{"payload": 1, "cron": "not a cron"}, "cron")
	})

	t.Run("duplicate_client_id", func(t *testing.T) {
		s := srv.as(t)
		first := s.put("put-dup", map[string]any{"payload": map[string]int{"v": 1}, "id": "order-42", "delay": "1h"})
		m, _ := s.expect(200, "POST", jobsp("put-dup"), map[string]any{"payload": map[string]int{"v": 2}, "id": "order-42"})
		if d, _ := jbool(m, "duplicate"); !d || jstr(m, "id") != "order-42" || jstr(m, "state") != "delayed" || jstr(m, "activate_at") != jstr(first, "activate_at") {
			t.Errorf("duplicate answer %v, want the original's id, state, activate_at and duplicate true (original %v)", m, first)
		}
		j := s.peek("put-dup", "order-42")
		if got := string(rawObject(t, s.peekRaw("put-dup", "order-42"))["payload"]); got != `{"v":1}` || jstr(j, "state") != "delayed" {
			t.Errorf("after a duplicate the job changed: payload %s state %s", got, jstr(j, "state"))
		}
		if c := s.counts("put-dup"); c["delayed"] != 1 || c["ready"] != 0 {
			t.Errorf("counts after duplicate: %v", c)
		}
		// Once deleted, the id is free again.
		s.expect(204, "DELETE", jobp("put-dup", "order-42"), nil)
		m = s.put("put-dup", map[string]any{"payload": 3, "id": "order-42"})
		if d, _ := jbool(m, "duplicate"); d || jstr(m, "state") != "ready" {
			t.Errorf("put after delete: %v, want a new ready job", m)
		}
	})

	t.Run("duplicate_idempotency_key", func(t *testing.T) {
		s := srv.as(t)
		first := s.put("put-idem", map[string]any{"payload": 1, "idempotency_key": "req-7f3a"})
		m, _ := s.expect(200, "POST", jobsp("put-idem"), map[string]any{"payload": 2, "idempotency_key": "req-7f3a"})
		if d, _ := jbool(m, "duplicate"); !d || jstr(m, "id") != jstr(first, "id") || jstr(m, "state") != jstr(first, "state") || jstr(m, "activate_at") != jstr(first, "activate_at") {
			t.Errorf("duplicate answer %v, original %v", m, first)
		}
		other := s.put("put-idem", map[string]any{"payload": 3, "idempotency_key": "req-other"})
		if jstr(other, "id") == jstr(first, "id") {
			t.Errorf("a different idempotency key got the same id")
		}
		if c := s.counts("put-idem"); c["ready"] != 2 {
			t.Errorf("ready count %d, want 2", c["ready"])
		}
		// The key is per queue: another queue takes it as new.
		s.put("put-idem-2", map[string]any{"payload": 2, "idempotency_key": "req-7f3a"})
	})
}

// TestBatch covers POST .../jobs/batch: order of answers, atomicity, the
// 1000-job limit and in-batch duplicates (docs/api.md, batch).
func TestBatch(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	batchp := func(q string) string { return jobsp(q) + "/batch" }

	t.Run("in_order", func(t *testing.T) {
		s := srv.as(t)
		m, _ := s.expect(201, "POST", batchp("b-ok"), map[string]any{"jobs": []any{
			map[string]any{"payload": 1, "id": "b1"},
			map[string]any{"payload": 2, "delay": "1h"},
			map[string]any{"payload_base64": "AAE=", "id": "b3"},
		}})
		jobs := jarr(m, "jobs")
		if len(jobs) != 3 {
			t.Fatalf("batch answer has %d jobs, want 3: %v", len(jobs), m)
		}
		if jstr(jobs[0], "id") != "b1" || jstr(jobs[0], "state") != "ready" || jstr(jobs[1], "state") != "delayed" || jstr(jobs[2], "id") != "b3" {
			t.Errorf("batch answers out of order or wrong: %v", jobs)
		}
		for i, j := range jobs {
			if d, ok := jbool(j, "duplicate"); !ok || d || jstr(j, "activate_at") == "" {
				t.Errorf("jobs[%d] = %v: want activate_at and duplicate false", i, j)
			}
		}
		if !ulidRe.MatchString(jstr(jobs[1], "id")) {
			t.Errorf("server id %q not a ULID", jstr(jobs[1], "id"))
		}
		if got := jstr(s.peek("b-ok", "b3"), "payload_base64"); got != "AAE=" {
			t.Errorf("b3 payload_base64 %q", got)
		}
	})

	t.Run("one_bad_job_rejects_all", func(t *testing.T) {
		s := srv.as(t)
		jobs := []any{
			map[string]any{"payload": 1, "id": "bad-0"},
			map[string]any{"payload": 1, "id": "bad-1"},
			map[string]any{"payload": 1, "id": "bad-2"},
			map[string]any{"payload": 1, "id": "bad-3", "delay": "whenever"},
		}
		s.badRequest("POST", batchp("b-bad"), map[string]any{"jobs": jobs}, "jobs[3].delay")
		jobs[3] = map[string]any{"id": "bad-3"}
		s.badRequest("POST", batchp("b-bad"), map[string]any{"jobs": jobs}, "jobs[3].payload")
		jobs[3] = map[string]any{"payload": 1, "id": "bad-3", "key": strings.Repeat("k", 257)}
		s.badRequest("POST", batchp("b-bad"), map[string]any{"jobs": jobs}, "jobs[3].key")
		s.put("b-bad", map[string]any{"payload": 1, "id": "other"}) // the queue exists
		for i := 0; i < 4; i++ {
			s.wantGone("b-bad", fmt.Sprintf("bad-%d", i))
		}
		if c := s.counts("b-bad"); c["ready"] != 1 {
			t.Errorf("ready count %d after rejected batches, want 1", c["ready"])
		}
	})

	t.Run("limit_1000", func(t *testing.T) {
		s := srv.as(t)
		mk := func(n int, prefix string) []any {
			out := make([]any, n)
			for i := range out {
				out[i] = map[string]any{"payload": i, "id": fmt.Sprintf("%s-%d", prefix, i)}
			}
			return out
		}
		s.badRequest("POST", batchp("b-lim"), map[string]any{"jobs": mk(1001, "over")}, "jobs")
		s.put("b-lim", map[string]any{"payload": 1, "id": "probe"})
		s.wantGone("b-lim", "over-0")
		m, _ := s.expect(201, "POST", batchp("b-lim"), map[string]any{"jobs": mk(1000, "ok")})
		if n := len(jarr(m, "jobs")); n != 1000 {
			t.Errorf("batch of 1000: %d answers", n)
		}
		if c := s.counts("b-lim"); c["ready"] != 1001 {
			t.Errorf("ready %d, want 1001", c["ready"])
		}
	})

	t.Run("duplicates_inside_batch", func(t *testing.T) {
		s := srv.as(t)
		m, _ := s.expect(201, "POST", batchp("b-dup"), map[string]any{"jobs": []any{
			map[string]any{"payload": 1, "id": "a"},
			map[string]any{"payload": 2, "id": "b", "delay": "1h"},
			map[string]any{"payload": 3, "id": "a"},
			map[string]any{"payload": 4, "idempotency_key": "ik"},
			map[string]any{"payload": 5, "idempotency_key": "ik"},
			map[string]any{"payload": 6, "id": "b"},
		}})
		jobs := jarr(m, "jobs")
		if len(jobs) != 6 {
			t.Fatalf("answer %v", m)
		}
		dup := func(i int) bool { d, _ := jbool(jobs[i], "duplicate"); return d }
		if dup(0) || dup(1) || !dup(2) || dup(3) || !dup(4) || !dup(5) {
			t.Errorf("duplicate flags wrong: %v", jobs)
		}
		if jstr(jobs[2], "id") != "a" || jstr(jobs[4], "id") != jstr(jobs[3], "id") || jstr(jobs[5], "id") != "b" {
			t.Errorf("duplicates must carry the original's id: %v", jobs)
		}
		if jstr(jobs[5], "state") != "delayed" || jstr(jobs[5], "activate_at") != jstr(jobs[1], "activate_at") {
			t.Errorf("duplicate of b must carry b's state and activate_at: %v vs %v", jobs[5], jobs[1])
		}
		if got := string(rawObject(t, s.peekRaw("b-dup", "a"))["payload"]); got != "1" {
			t.Errorf("job a payload %s, want 1 (the first)", got)
		}
		if c := s.counts("b-dup"); c["ready"] != 2 || c["delayed"] != 1 {
			t.Errorf("counts %v, want ready 2 delayed 1", c)
		}
		// A batch duplicate of an existing job answers 201 for the batch
		// with duplicate true for that entry.
		m, _ = s.expect(201, "POST", batchp("b-dup"), map[string]any{"jobs": []any{map[string]any{"payload": 9, "id": "a"}}})
		if d, _ := jbool(m, "jobs", 0, "duplicate"); !d {
			t.Errorf("batch re-put of existing id: %v", m)
		}
	})

	t.Run("bad_shape", func(t *testing.T) {
		s := srv.as(t)
		s.badRequest("POST", batchp("b-shape"), map[string]any{"jobs": "nope"}, "jobs")
		s.badRequest("POST", batchp("b-shape"), map[string]any{"jobs": []any{map[string]any{"payload": 1, "nope": 1}}}, "jobs[0].nope")
	})
}
