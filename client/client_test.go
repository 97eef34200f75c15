package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

var ctx = context.Background()

func TestQueues(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		switch {
		case r.Method == "PUT":
			return 201, queueJSON
		case r.Method == "GET" && strings.HasSuffix(r.Path, "/queues"):
			return 200, `{"queues":[` + queueJSON + `]}`
		case r.Method == "GET":
			return 200, queueJSON
		case strings.HasSuffix(r.Path, "/purge"):
			return 200, `{"deleted":42}`
		case r.Method == "DELETE":
			return 204, ""
		default:
			return 200, strings.Replace(queueJSON, `"paused":false`, `"paused":true`, 1)
		}
	})
	c := f.client(WithNamespace("bill ing"), WithToken("tok"))

	q, err := c.CreateQueue(ctx, "emails", &QueueConfig{
		DefaultTTR:   Ptr(time.Minute),
		DefaultTries: Ptr[uint32](0),
		KeyMode:      Ptr("exclusive"),
		Backoff:      &Backoff{Initial: Ptr(2 * time.Second), Multiplier: Ptr(3.0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "PUT" || r.Path != "/v1/ns/bill%20ing/queues/emails" {
		t.Errorf("create: %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer tok" {
		t.Errorf("Authorization %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	// Only the fields that were set go out; the zero tries is sent.
	jsonEqual(t, "create", r.Body, `{"default_ttr":"1m0s","default_tries":0,"key_mode":"exclusive","backoff":{"initial":"2s","multiplier":3}}`)
	if !q.Created || q.Name != "emails" || q.Namespace != "default" || q.Paused {
		t.Errorf("queue %+v", q)
	}
	cfg := q.Config
	if *cfg.DefaultTTR != time.Minute || *cfg.DefaultTries != 5 || *cfg.DefaultTTL != 0 || *cfg.DefaultPriority != 1024 ||
		*cfg.MaxJobs != 0 || *cfg.MaxPayload != 1048576 || *cfg.DedupWindow != 15*time.Minute ||
		*cfg.RetainResults != time.Hour || *cfg.KeyMode != "strict" || *cfg.Backoff.Initial != 2*time.Second ||
		*cfg.Backoff.Max != 10*time.Minute || *cfg.Backoff.Multiplier != 2 || *cfg.Backoff.Jitter != 0.1 {
		t.Errorf("config decoded wrong: %+v", cfg)
	}
	if q.Counts != (Counts{1, 2, 3, 4, 5, 6}) || q.Counts.Total() != 21 || q.OldestReadyAge != 1500*time.Millisecond {
		t.Errorf("counts %+v age %v", q.Counts, q.OldestReadyAge)
	}

	// A nil config sends an empty object.
	if _, err := c.ConfigureQueue(ctx, "emails", nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "configure nil", f.last().Body, `{}`)

	if _, err := c.GetQueue(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Method != "GET" || r.Path != "/v1/ns/bill%20ing/queues/emails" {
		t.Errorf("get: %s %s", r.Method, r.Path)
	}
	qs, err := c.ListQueues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Counts.Dead != 5 {
		t.Fatalf("list: %v %+v", err, qs)
	}
	if r := f.last(); r.Method != "GET" || r.Path != "/v1/ns/bill%20ing/queues" {
		t.Errorf("list: %s %s", r.Method, r.Path)
	}
	pq, err := c.Pause(ctx, "emails")
	if err != nil || !pq.Paused {
		t.Fatalf("pause: %v %+v", err, pq)
	}
	if r := f.last(); r.Method != "POST" || r.Path != "/v1/ns/bill%20ing/queues/emails/pause" {
		t.Errorf("pause: %s %s", r.Method, r.Path)
	}
	if _, err := c.Resume(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Method != "POST" || r.Path != "/v1/ns/bill%20ing/queues/emails/resume" {
		t.Errorf("resume: %s %s", r.Method, r.Path)
	}
	n, err := c.PurgeQueue(ctx, "emails")
	if err != nil || n != 42 {
		t.Fatalf("purge: %v %d", err, n)
	}
	if r := f.last(); r.Method != "POST" || r.Path != "/v1/ns/bill%20ing/queues/emails/purge" {
		t.Errorf("purge: %s %s", r.Method, r.Path)
	}
	if err := c.DeleteQueue(ctx, "emails"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Method != "DELETE" || r.Path != "/v1/ns/bill%20ing/queues/emails" {
		t.Errorf("delete: %s %s", r.Method, r.Path)
	}
}

func TestPut(t *testing.T) {
	status := 201
	f := newFake(t, func(r *recorded) (int, string) {
		return status, `{"id":"order-42","state":"delayed","activate_at":"2026-11-22T10:00:10.000Z","duplicate":false}`
	})
	c := f.client()
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))
	res, err := c.Put(ctx, "emails", PutOptions{
		Payload: json.RawMessage(`{"to": "a@b.c"}`), ID: "order-42", At: at,
		Priority: Ptr[uint32](0), TTL: Ptr(time.Hour), TTR: 30 * time.Second, Tries: Ptr[uint32](5),
		Key: "user:42", Tags: map[string]string{"user_id": "42"}, ReplyTo: "results", Cron: "0 8 * * *",
		IdempotencyKey: "req-7f3a",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/jobs" {
		t.Errorf("put: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "put", r.Body, `{"payload":{"to":"a@b.c"},"id":"order-42","at":"2026-12-31T23:00:00Z","priority":0,
		"ttl":"1h0m0s","ttr":"30s","tries":5,"key":"user:42","tags":{"user_id":"42"},"reply_to":"results",
		"cron":"0 8 * * *","idempotency_key":"req-7f3a"}`)
	want := PutResult{ID: "order-42", State: "delayed", ActivateAt: time.Date(2026, 11, 22, 10, 0, 10, 0, time.UTC)}
	if *res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}

	// Defaults: null payload, a generated idempotency key, nothing else.
	if _, err := c.Put(ctx, "emails", PutOptions{Delay: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	m := bodyMap(t, f.last().Body)
	key, _ := m["idempotency_key"].(string)
	if key == "" {
		t.Errorf("no generated idempotency key in %v", m)
	}
	delete(m, "idempotency_key")
	b, _ := json.Marshal(m)
	jsonEqual(t, "default put", b, `{"payload":null,"delay":"10s"}`)
	if _, err := c.Put(ctx, "emails", PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if k2, _ := bodyMap(t, f.last().Body)["idempotency_key"].(string); k2 == "" || k2 == key {
		t.Errorf("second put's key %q, first %q: want a fresh one", k2, key)
	}

	// The payload's text goes out as given: no HTML escaping, numbers as
	// written (the server stores that text).
	if _, err := c.Put(ctx, "emails", PutOptions{Payload: json.RawMessage(`{"html":"<b>&amp;</b>","n":1.50}`)}); err != nil {
		t.Fatal(err)
	}
	if b := f.last().Body; !strings.Contains(string(b), `"payload":{"html":"<b>&amp;</b>","n":1.50}`) {
		t.Errorf("payload text changed on the way: %s", b)
	}

	// Bytes go as base64; opting out sends no key.
	if _, err := c.Put(ctx, "images", PutOptions{PayloadBytes: []byte{0, 1, 0xff}, NoIdempotencyKey: true}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "binary put", f.last().Body, `{"payload_base64":"AAH/"}`)

	// A duplicate answer is 200.
	status = 200
	if res, err := c.Put(ctx, "emails", PutOptions{ID: "order-42"}); err != nil || res.ID != "order-42" {
		t.Fatalf("duplicate: %v %+v", err, res)
	}

	// Client-side refusals send nothing.
	before := len(f.requests())
	for _, p := range []PutOptions{
		{Payload: json.RawMessage(`{`)},
		{Payload: json.RawMessage(`1`), PayloadBytes: []byte("x")},
		{Delay: time.Second, At: at},
	} {
		if _, err := c.Put(ctx, "emails", p); err == nil {
			t.Errorf("put %+v: no error", p)
		}
	}
	if _, err := c.Put(ctx, "", PutOptions{}); err == nil {
		t.Error("put into an empty queue name: no error")
	}
	if len(f.requests()) != before {
		t.Error("an invalid put reached the server")
	}
}

func TestPutBatch(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		return 201, `{"jobs":[{"id":"A","state":"ready","activate_at":"2026-11-22T10:00:00.000Z","duplicate":false},
			{"id":"B","state":"delayed","activate_at":"2026-11-22T11:00:00.000Z","duplicate":true}]}`
	})
	c := f.client()
	res, err := c.PutBatch(ctx, "emails", []PutOptions{
		{Payload: json.RawMessage(`{"to":"a@b.c"}`), IdempotencyKey: "k1"},
		{Payload: json.RawMessage(`{"to":"d@e.f"}`), Delay: time.Hour, IdempotencyKey: "k2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/jobs/batch" {
		t.Errorf("batch: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "batch", r.Body, `{"jobs":[{"payload":{"to":"a@b.c"},"idempotency_key":"k1"},
		{"payload":{"to":"d@e.f"},"delay":"1h0m0s","idempotency_key":"k2"}]}`)
	if len(res) != 2 || res[0].ID != "A" || res[1].State != "delayed" || !res[1].Duplicate || res[0].Duplicate {
		t.Errorf("batch answer %+v", res)
	}
	if _, err := c.PutBatch(ctx, "emails", []PutOptions{{}, {Delay: time.Second, At: time.Now()}}); err == nil || !strings.Contains(err.Error(), "jobs[1]") {
		t.Errorf("invalid batch: %v, want an error naming jobs[1]", err)
	}
}

func TestTake(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		if strings.Contains(r.Path, "empty") {
			return 200, `{"jobs":[]}`
		}
		return 200, `{"jobs":[` + takenJobJSON + `]}`
	})
	c := f.client()
	jobs, err := c.Take(ctx, "emails", TakeOptions{Max: 5, TTR: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/take" {
		t.Errorf("take: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "take", r.Body, `{"max":5,"ttr":"1m0s","wait":"10s"}`)
	if len(jobs) != 1 {
		t.Fatalf("jobs %v", jobs)
	}
	j := jobs[0]
	ts := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	if j.ID != "01JD3W0Q8Z6M1N2P3Q4R5S6T7V" || j.Namespace != "default" || j.Queue != "emails" || j.State != StateReserved ||
		string(j.Payload) != `{"to":"a@b.c"}` || j.PayloadBytes != nil || j.Priority != 1024 || j.Key != "user:42" ||
		j.Tags["user_id"] != "42" || !j.CreatedAt.Equal(ts("2026-11-22T10:00:00Z")) ||
		!j.ActivateAt.Equal(ts("2026-11-22T10:00:10Z")) || !j.ExpireAt.Equal(ts("2026-11-22T11:00:00Z")) ||
		j.TTR != 30*time.Second || j.Tries != 25 || j.Attempt != 1 || j.Receipt != "01JD3W1A2B3C4D5E6F7G8H9J0K" ||
		!j.ReservedUntil.Equal(ts("2026-11-22T10:00:40Z")) || j.LastError != "smtp timeout" || j.ReplyTo != "results" ||
		j.Cron != "*/5 * * * *" {
		t.Errorf("job decoded wrong: %+v", j)
	}
	var p struct{ To string }
	if err := j.Decode(&p); err != nil || p.To != "a@b.c" {
		t.Errorf("Decode: %v %+v", err, p)
	}
	// The job encodes back to the same wire object.
	b, _ := json.Marshal(j)
	jsonEqual(t, "job round trip", b, takenJobJSON)

	if _, err := c.TakeMulti(ctx, []string{"high", "low"}, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	r = f.last()
	if r.Path != "/v1/ns/default/take" {
		t.Errorf("take multi: %s", r.Path)
	}
	jsonEqual(t, "take multi", r.Body, `{"queues":["high","low"]}`)

	jobs, err = c.Take(ctx, "empty", TakeOptions{})
	if err != nil || len(jobs) != 0 {
		t.Errorf("empty take: %v %v", err, jobs)
	}
	jsonEqual(t, "default take", f.last().Body, `{}`)
}

func TestJobDecodingForms(t *testing.T) {
	var j Job
	if err := json.Unmarshal([]byte(`{"id":"X","state":"ready","payload_base64":"AAH/","ttr":1.5,"priority":1,"tries":0,"attempt":0,
		"created_at":"2026-11-22T10:00:00.000Z","activate_at":"2026-11-22T10:00:00.000Z"}`), &j); err != nil {
		t.Fatal(err)
	}
	if !j.Binary() || string(j.PayloadBytes) != "\x00\x01\xff" || j.Payload != nil || j.TTR != 1500*time.Millisecond {
		t.Errorf("binary job %+v", j)
	}
	if err := j.Decode(&struct{}{}); err == nil {
		t.Error("Decode of a binary job: no error")
	}
	var n Job
	if err := json.Unmarshal([]byte(`{"id":"Y","state":"ready","payload":null,"ttr":"30s","priority":1,"tries":0,"attempt":0}`), &n); err != nil {
		t.Fatal(err)
	}
	if string(n.Payload) != "null" || n.Binary() {
		t.Errorf("null payload decoded as %q", n.Payload)
	}
	if err := json.Unmarshal([]byte(`{"id":"Z","ttr":"soon"}`), &n); err == nil {
		t.Error("bad ttr: no error")
	}
}

func TestAckNackTouchBury(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		switch {
		case strings.HasSuffix(r.Path, "/ack"):
			return 200, `{"id":"J1","state":"deleted","next_id":"N1"}`
		case strings.HasSuffix(r.Path, "/nack"):
			return 200, `{"state":"delayed"}`
		case strings.HasSuffix(r.Path, "/touch"):
			return 200, `{"reserved_until":"2026-11-22T10:01:05.000Z"}`
		default:
			return 200, `{"state":"dead"}`
		}
	})
	c := f.client()
	res, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{
		Result: map[string]bool{"sent": true},
		Next:   &NextPut{Queue: "audit", PutOptions: PutOptions{Payload: json.RawMessage(`{"sent":"a@b.c"}`), Delay: time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/jobs/J1/ack" {
		t.Errorf("ack: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "ack", r.Body, `{"receipt":"R1","result":{"sent":true},"next":{"queue":"audit","payload":{"sent":"a@b.c"},"delay":"1s"}}`)
	if res.ID != "J1" || res.State != "deleted" || res.NextID != "N1" || res.Jobs != nil {
		t.Errorf("ack answer %+v", res)
	}
	if _, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{Reschedule: &Reschedule{Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "ack reschedule", f.last().Body, `{"receipt":"R1","reschedule":{"delay":"1h0m0s"}}`)
	if _, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{Result: json.RawMessage(`null`)}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "ack null result", f.last().Body, `{"receipt":"R1","result":null}`)
	if _, err := c.Ack(ctx, "emails", "J1", "R1", nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "bare ack", f.last().Body, `{"receipt":"R1"}`)

	st, err := c.Nack(ctx, "emails", "J1", "R1", &NackOptions{Delay: Ptr(time.Duration(0)), Error: "smtp timeout"})
	if err != nil || st != "delayed" {
		t.Fatalf("nack: %v %q", err, st)
	}
	if r := f.last(); r.Path != "/v1/ns/default/queues/emails/jobs/J1/nack" {
		t.Errorf("nack path %s", r.Path)
	}
	jsonEqual(t, "nack", f.last().Body, `{"receipt":"R1","delay":"0s","error":"smtp timeout"}`)
	if _, err := c.Nack(ctx, "emails", "J1", "R1", nil); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "bare nack", f.last().Body, `{"receipt":"R1"}`)

	until, err := c.Touch(ctx, "emails", "J1", "R1", 30*time.Second)
	if err != nil || !until.Equal(time.Date(2026, 11, 22, 10, 1, 5, 0, time.UTC)) {
		t.Fatalf("touch: %v %v", err, until)
	}
	if r := f.last(); r.Path != "/v1/ns/default/queues/emails/jobs/J1/touch" {
		t.Errorf("touch path %s", r.Path)
	}
	jsonEqual(t, "touch", f.last().Body, `{"receipt":"R1","ttr":"30s"}`)
	if _, err := c.Touch(ctx, "emails", "J1", "R1", 0); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "bare touch", f.last().Body, `{"receipt":"R1"}`)

	if err := c.Bury(ctx, "emails", "J1", "R1", "malformed address"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Path != "/v1/ns/default/queues/emails/jobs/J1/bury" {
		t.Errorf("bury path %s", r.Path)
	}
	jsonEqual(t, "bury", f.last().Body, `{"receipt":"R1","reason":"malformed address"}`)
}

func TestPeekUpdateCancel(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		switch r.Method {
		case "GET", "PATCH":
			return 200, takenJobJSON
		case "DELETE":
			if strings.HasSuffix(r.Path, "/jobs") {
				return 200, `{"deleted":3}`
			}
			return 204, ""
		}
		return 500, ""
	})
	c := f.client()
	j, err := c.Peek(ctx, "emails", "order/42")
	if err != nil || j.ID != "01JD3W0Q8Z6M1N2P3Q4R5S6T7V" {
		t.Fatalf("peek: %v %+v", err, j)
	}
	if r := f.last(); r.Method != "GET" || r.Path != "/v1/ns/default/queues/emails/jobs/order%2F42" {
		t.Errorf("peek: %s %s", r.Method, r.Path)
	}

	if _, err := c.Update(ctx, "emails", "order-42", UpdateOptions{
		Delay: Ptr(time.Hour), Priority: Ptr[uint32](1), Tags: map[string]string{"user_id": "42", "vip": "yes"}, Receipt: "R",
	}); err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "PATCH" || r.Path != "/v1/ns/default/queues/emails/jobs/order-42" {
		t.Errorf("update: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "update", r.Body, `{"delay":"1h0m0s","priority":1,"tags":{"user_id":"42","vip":"yes"},"receipt":"R"}`)
	if _, err := c.Update(ctx, "emails", "order-42", UpdateOptions{Payload: json.RawMessage(`[1]`), Tags: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "update clear tags", f.last().Body, `{"payload":[1],"tags":{}}`)

	if err := c.Cancel(ctx, "emails", "order-42", "R 1"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Method != "DELETE" || r.Path != "/v1/ns/default/queues/emails/jobs/order-42" || r.Query != "receipt=R+1" {
		t.Errorf("cancel: %s %s?%s", r.Method, r.Path, r.Query)
	}
	if err := c.Cancel(ctx, "emails", "order-42", ""); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Query != "" {
		t.Errorf("cancel without receipt sent query %q", r.Query)
	}

	n, err := c.CancelByFilter(ctx, "emails", Filter{States: []string{"delayed", "ready"}, Tags: map[string]string{"user_id": "42"}})
	if err != nil || n != 3 {
		t.Fatalf("cancel by filter: %v %d", err, n)
	}
	r = f.last()
	q, _ := url.ParseQuery(r.Query)
	if r.Method != "DELETE" || r.Path != "/v1/ns/default/queues/emails/jobs" || q.Get("state") != "delayed,ready" || q.Get("tag.user_id") != "42" || len(q) != 2 {
		t.Errorf("cancel by filter: %s %s?%s", r.Method, r.Path, r.Query)
	}
	if _, err := c.CancelByFilter(ctx, "", Filter{Key: "user:42"}); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Path != "/v1/ns/default/jobs" || r.Query != "key=user%3A42" {
		t.Errorf("namespace cancel: %s?%s", r.Path, r.Query)
	}
	before := len(f.requests())
	if _, err := c.CancelByFilter(ctx, "emails", Filter{}); err == nil {
		t.Error("cancel with no filter: no error")
	}
	if len(f.requests()) != before {
		t.Error("a filterless cancel reached the server")
	}
}

func TestDeadLetters(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		if r.Method == "POST" {
			return 200, `{"respawned":12}`
		}
		return 200, `{"deleted":7}`
	})
	c := f.client()
	n, err := c.Respawn(ctx, "emails", RespawnOptions{Limit: 100})
	if err != nil || n != 12 {
		t.Fatalf("respawn: %v %d", err, n)
	}
	if r := f.last(); r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/dead/respawn" {
		t.Errorf("respawn: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "respawn", f.last().Body, `{"limit":100}`)
	if _, err := c.Respawn(ctx, "emails", RespawnOptions{IDs: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "respawn ids", f.last().Body, `{"ids":["a","b"]}`)
	if _, err := c.Respawn(ctx, "emails", RespawnOptions{Limit: 1, IDs: []string{"a"}}); err == nil {
		t.Error("respawn with limit and ids: no error")
	}
	n, err = c.PurgeDead(ctx, "emails")
	if err != nil || n != 7 {
		t.Fatalf("purge dead: %v %d", err, n)
	}
	if r := f.last(); r.Method != "DELETE" || r.Path != "/v1/ns/default/queues/emails/dead" {
		t.Errorf("purge dead: %s %s", r.Method, r.Path)
	}
}

func TestResultAndCall(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		switch {
		case strings.HasSuffix(r.Path, "/done/result"):
			return 200, `{"state":"completed","result":{"sent":true}}`
		case strings.HasSuffix(r.Path, "/bare/result"):
			return 200, `{"state":"completed","result":null}`
		case strings.HasSuffix(r.Path, "/result"):
			return 202, `{"state":"reserved"}`
		case strings.Contains(r.Path, "/slow/"):
			return 504, `{"id":"C2","state":"reserved"}`
		case strings.Contains(r.Path, "/proxy/"):
			return 504, `<html>gateway timeout</html>`
		default:
			return 200, `{"id":"C1","result":{"url":"https://cdn/x_128.png"}}`
		}
	})
	c := f.client()
	res, err := c.Result(ctx, "emails", "done", 30*time.Second)
	if err != nil || !res.Done || res.State != StateCompleted || string(res.Result) != `{"sent":true}` || res.ID != "done" {
		t.Fatalf("result: %v %+v", err, res)
	}
	if r := f.last(); r.Method != "GET" || r.Path != "/v1/ns/default/queues/emails/jobs/done/result" || r.Query != "wait=30s" {
		t.Errorf("result: %s %s?%s", r.Method, r.Path, r.Query)
	}
	res, err = c.Result(ctx, "emails", "bare", 0)
	if err != nil || !res.Done || string(res.Result) != "null" {
		t.Fatalf("result null: %v %+v", err, res)
	}
	if r := f.last(); r.Query != "" {
		t.Errorf("result without wait sent %q", r.Query)
	}
	res, err = c.Result(ctx, "emails", "pending", time.Second)
	if err != nil || res.Done || res.State != "reserved" {
		t.Fatalf("pending result: %v %+v", err, res)
	}

	res, err = c.Call(ctx, "resize", PutOptions{Payload: json.RawMessage(`{"w":128}`)}, 30*time.Second)
	if err != nil || !res.Done || res.ID != "C1" || string(res.Result) != `{"url":"https://cdn/x_128.png"}` {
		t.Fatalf("call: %v %+v", err, res)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/resize/call" {
		t.Errorf("call: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "call", r.Body, `{"payload":{"w":128},"wait":"30s"}`)
	res, err = c.Call(ctx, "slow", PutOptions{}, time.Second)
	if !errors.Is(err, ErrWaitTimeout) || res == nil || res.ID != "C2" || res.State != "reserved" || res.Done {
		t.Fatalf("call timeout: %v %+v", err, res)
	}
	if n := len(f.requests()); n != 5 {
		t.Errorf("%d requests, want 5 (a call timeout is not retried)", n)
	}
	_, err = c.Call(ctx, "proxy", PutOptions{}, time.Second)
	var e *Error
	if !errors.As(err, &e) || e.Status != 504 || errors.Is(err, ErrWaitTimeout) {
		t.Errorf("gateway 504: %v", err)
	}
}

func TestChannels(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		if r.Method == "POST" {
			return 200, `{"offset":17,"epoch":"k3j9"}`
		}
		return 200, `{"publications":[{"offset":16,"data":{"title":"hi"},"time":"2026-11-22T10:00:00.000Z"},
                 {"offset":17,"data":{"title":"hello"},"time":"2026-11-22T10:00:01.250Z"}],
 "offset":17,"epoch":"k3j9","recovered":true}`
	})
	c := f.client()
	p, err := c.Publish(ctx, "news", map[string]string{"title": "hello"})
	if err != nil || *p != (PublishResult{17, "k3j9"}) {
		t.Fatalf("publish: %v %+v", err, p)
	}
	if r := f.last(); r.Method != "POST" || r.Path != "/v1/ns/default/channels/news/publish" {
		t.Errorf("publish: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "publish", f.last().Body, `{"data":{"title":"hello"}}`)
	h, err := c.History(ctx, "news", HistoryOptions{Since: 15, Epoch: "k3j9", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	q, _ := url.ParseQuery(r.Query)
	if r.Method != "GET" || r.Path != "/v1/ns/default/channels/news/history" || q.Get("since") != "15" || q.Get("epoch") != "k3j9" || q.Get("limit") != "100" {
		t.Errorf("history: %s %s?%s", r.Method, r.Path, r.Query)
	}
	if !h.Recovered || h.Offset != 17 || h.Epoch != "k3j9" || len(h.Publications) != 2 ||
		h.Publications[1].Offset != 17 || string(h.Publications[1].Data) != `{"title":"hello"}` ||
		!h.Publications[1].Time.Equal(time.Date(2026, 11, 22, 10, 0, 1, 250e6, time.UTC)) {
		t.Errorf("history %+v", h)
	}
}

func TestAdmin(t *testing.T) {
	main := newFake(t, func(r *recorded) (int, string) { return 500, "" })
	admin := newFake(t, func(r *recorded) (int, string) {
		switch {
		case r.Method == "POST" && r.Path == "/admin/namespaces":
			return 201, `{"name":"billing","auto_create_queues":false}`
		case r.Method == "GET":
			return 200, `{"namespaces":[{"name":"default","auto_create_queues":true},{"name":"billing","auto_create_queues":false}]}`
		case r.Method == "POST":
			return 201, `{"token":"cq_4f9a"}`
		default:
			return 204, ""
		}
	})
	c := main.client(WithAdminURL(admin.srv.URL+"/"), WithToken("ADMIN"))
	ns, err := c.CreateNamespace(ctx, "billing", false)
	if err != nil || *ns != (Namespace{Name: "billing", AutoCreateQueues: false}) {
		t.Fatalf("create ns: %v %+v", err, ns)
	}
	r := admin.last()
	if r.Header.Get("Authorization") != "Bearer ADMIN" {
		t.Errorf("admin call without the token")
	}
	jsonEqual(t, "create ns", r.Body, `{"name":"billing","auto_create_queues":false}`)
	nss, err := c.ListNamespaces(ctx)
	if err != nil || len(nss) != 2 || nss[0].Name != "default" || !nss[0].AutoCreateQueues {
		t.Fatalf("list ns: %v %+v", err, nss)
	}
	tok, err := c.CreateToken(ctx, "billing", "billing workers")
	if err != nil || tok != "cq_4f9a" {
		t.Fatalf("create token: %v %q", err, tok)
	}
	if r := admin.last(); r.Method != "POST" || r.Path != "/admin/namespaces/billing/tokens" {
		t.Errorf("create token: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "create token", admin.last().Body, `{"description":"billing workers"}`)
	if err := c.RevokeToken(ctx, "billing", "cq_4f9a"); err != nil {
		t.Fatal(err)
	}
	if r := admin.last(); r.Method != "DELETE" || r.Path != "/admin/namespaces/billing/tokens/cq_4f9a" {
		t.Errorf("revoke: %s %s", r.Method, r.Path)
	}
	if n := len(main.requests()); n != 0 {
		t.Errorf("%d admin calls went to the main listener", n)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		status int
		code   string
		is     []error
		isNot  []error
	}{
		{400, "bad_request", []error{ErrBadRequest}, []error{ErrNotFound, ErrConflict}},
		{401, "unauthorized", []error{ErrUnauthorized}, []error{ErrForbidden}},
		{403, "forbidden", []error{ErrForbidden}, []error{ErrUnauthorized}},
		{404, "job_not_found", []error{ErrNotFound, ErrJobNotFound}, []error{ErrQueueNotFound, ErrConflict}},
		{404, "queue_not_found", []error{ErrNotFound, ErrQueueNotFound}, []error{ErrJobNotFound}},
		{404, "namespace_not_found", []error{ErrNotFound, ErrNamespaceNotFound}, []error{ErrJobNotFound}},
		{409, "conflict", []error{ErrConflict}, []error{ErrBadRequest}},
		{413, "payload_too_large", []error{ErrPayloadTooLarge}, []error{ErrQueueFull}},
		{429, "queue_full", []error{ErrQueueFull}, []error{ErrUnavailable}},
		{503, "unavailable", []error{ErrUnavailable}, []error{ErrQueueFull}},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			f := newFake(t, func(r *recorded) (int, string) {
				return tc.status, fmt.Sprintf(`{"error":{"code":%q,"message":"jobs[3].delay: nope"}}`, tc.code)
			})
			// Peek is a GET: 503 is retried, so give no retries here.
			_, err := f.client(WithRetries(0, 0)).Peek(ctx, "q", "j")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Message != "jobs[3].delay: nope" {
				t.Errorf("error %+v", e)
			}
			if !strings.Contains(err.Error(), tc.code) || !strings.Contains(err.Error(), "jobs[3].delay: nope") {
				t.Errorf("error text %q lacks the code or message", err)
			}
			for _, s := range tc.is {
				if !errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = false", err, s)
				}
			}
			for _, s := range tc.isNot {
				if errors.Is(err, s) {
					t.Errorf("errors.Is(%v, %v) = true", err, s)
				}
			}
		})
	}

	t.Run("not_json", func(t *testing.T) {
		f := newFake(t, func(r *recorded) (int, string) { return 502, "<html>bad gateway</html>" })
		_, err := f.client().Peek(ctx, "q", "j")
		var e *Error
		if !errors.As(err, &e) || e.Status != 502 || !strings.Contains(e.Message, "bad gateway") {
			t.Errorf("error %v", err)
		}
	})

}

func TestRetryAfterParsed(t *testing.T) {
	res := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"7"}}}
	e := newError(res, []byte(`{"error":{"code":"unavailable","message":"shutting down"}}`))
	if e.RetryAfter != 7*time.Second || e.Code != "unavailable" {
		t.Errorf("error %+v", e)
	}
}

func TestRetries(t *testing.T) {
	// fail answers 503 to the first n requests.
	failing := func(n int, okStatus int, ok string) (*fake, *int) {
		count := 0
		var f *fake
		f = newFake(t, func(r *recorded) (int, string) {
			count++
			if count <= n {
				return 503, `{"error":{"code":"unavailable","message":"not durable right now"}}`
			}
			return okStatus, ok
		})
		return f, &count
	}
	putOK := `{"id":"A","state":"ready","activate_at":"2026-11-22T10:00:00.000Z","duplicate":false}`

	t.Run("put_same_key", func(t *testing.T) {
		f, _ := failing(2, 201, putOK)
		if _, err := f.client().Put(ctx, "q", PutOptions{}); err != nil {
			t.Fatal(err)
		}
		rs := f.requests()
		if len(rs) != 3 {
			t.Fatalf("%d requests, want 3", len(rs))
		}
		key := bodyMap(t, rs[0].Body)["idempotency_key"]
		for i, r := range rs {
			if string(r.Body) != string(rs[0].Body) {
				t.Errorf("attempt %d body %s differs from the first %s", i, r.Body, rs[0].Body)
			}
			if k := bodyMap(t, r.Body)["idempotency_key"]; k != key || k == "" {
				t.Errorf("attempt %d key %v, first %v", i, k, key)
			}
		}
	})
	t.Run("put_gives_up", func(t *testing.T) {
		f, _ := failing(100, 201, putOK)
		_, err := f.client().Put(ctx, "q", PutOptions{})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("error %v, want unavailable", err)
		}
		if n := len(f.requests()); n != 4 {
			t.Errorf("%d requests, want 1 + 3 retries", n)
		}
	})
	t.Run("put_without_key_not_retried", func(t *testing.T) {
		f, _ := failing(1, 201, putOK)
		if _, err := f.client().Put(ctx, "q", PutOptions{NoIdempotencyKey: true}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("error %v", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("get_retried_on_429", func(t *testing.T) {
		count := 0
		f := newFake(t, func(r *recorded) (int, string) {
			count++
			if count == 1 {
				return 429, `{"error":{"code":"queue_full","message":"full"}}`
			}
			return 200, queueJSON
		})
		if _, err := f.client().GetQueue(ctx, "emails"); err != nil {
			t.Fatal(err)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
	t.Run("bad_request_not_retried", func(t *testing.T) {
		f := newFake(t, func(r *recorded) (int, string) {
			return 400, `{"error":{"code":"bad_request","message":"delay: too long"}}`
		})
		if _, err := f.client().Put(ctx, "q", PutOptions{}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("error %v", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("take_not_retried", func(t *testing.T) {
		f, _ := failing(1, 200, `{"jobs":[]}`)
		if _, err := f.client().Take(ctx, "q", TakeOptions{}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("error %v", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("delete_retried", func(t *testing.T) {
		f, _ := failing(1, 204, "")
		if err := f.client().DeleteQueue(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
	t.Run("connection_refused_retried", func(t *testing.T) {
		f, _ := failing(0, 200, `{"jobs":[]}`)
		url := f.srv.URL
		f.srv.Close()
		c := New(url, WithRetries(2, time.Millisecond))
		_, err := c.Take(ctx, "q", TakeOptions{})
		if err == nil {
			t.Fatal("take against a closed server: no error")
		}
		var e *Error
		if errors.As(err, &e) {
			t.Errorf("network error reported as %v", e)
		}
	})
}

func TestListIterates(t *testing.T) {
	pages := map[string]string{
		"":   `{"jobs":[{"id":"1","state":"ready"},{"id":"2","state":"ready"}],"next_cursor":"c1"}`,
		"c1": `{"jobs":[{"id":"3","state":"delayed"}],"next_cursor":"c2"}`,
		"c2": `{"jobs":[{"id":"4","state":"dead"},{"id":"5","state":"dead"}]}`,
	}
	f := newFake(t, func(r *recorded) (int, string) {
		q, _ := url.ParseQuery(r.Query)
		p, ok := pages[q.Get("cursor")]
		if !ok {
			return 400, `{"error":{"code":"bad_request","message":"cursor: unknown"}}`
		}
		return 200, p
	})
	c := f.client()
	it := c.List(ctx, "emails", Filter{States: []string{"ready", "delayed"}, Key: "user:42", Tags: map[string]string{"user_id": "42"}, Limit: 2})
	var ids []string
	for it.Next(ctx) {
		ids = append(ids, it.Job().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "1,2,3,4,5" {
		t.Errorf("ids %v", ids)
	}
	rs := f.requests()
	if len(rs) != 3 {
		t.Fatalf("%d requests, want 3", len(rs))
	}
	for i, r := range rs {
		q, _ := url.ParseQuery(r.Query)
		wantCursor := []string{"", "c1", "c2"}[i]
		if r.Method != "GET" || r.Path != "/v1/ns/default/queues/emails/jobs" || q.Get("state") != "ready,delayed" ||
			q.Get("key") != "user:42" || q.Get("tag.user_id") != "42" || q.Get("limit") != "2" || q.Get("cursor") != wantCursor {
			t.Errorf("page %d: %s %s?%s", i, r.Method, r.Path, r.Query)
		}
	}
	if it.Next(ctx) {
		t.Error("Next after the end returned true")
	}

	// An error stops the iteration and is kept.
	bad := newFake(t, func(r *recorded) (int, string) {
		return 404, `{"error":{"code":"queue_not_found","message":"no queue"}}`
	})
	it = bad.client().List(ctx, "nope", Filter{})
	if it.Next(ctx) || !errors.Is(it.Err(), ErrQueueNotFound) {
		t.Errorf("listing a missing queue: %v", it.Err())
	}
}

func TestTimeoutCoversLongPoll(t *testing.T) {
	// The per-attempt timeout is tiny; a take with a wait must still get
	// its answer, which the fake gives only once the client says it waits.
	release := make(chan struct{})
	f := newFake(t, func(r *recorded) (int, string) {
		<-release
		return 200, `{"jobs":[]}`
	})
	c := f.client(WithTimeout(time.Nanosecond))
	close(release)
	if _, err := c.Take(ctx, "q", TakeOptions{Wait: 10 * time.Second}); err != nil {
		t.Errorf("take with wait under a tiny timeout: %v", err)
	}
	if _, err := c.Take(ctx, "q", TakeOptions{}); err == nil {
		t.Error("take without wait under a 1ns timeout: no error")
	}
}

func TestAckTakeAndBatch(t *testing.T) {
	f := newFake(t, func(r *recorded) (int, string) {
		if strings.HasSuffix(r.Path, "/queues/emails/ack") {
			return 200, `{"acks":[{"id":"J1","state":"deleted"},{"id":"J2","state":"completed"}]}`
		}
		return 200, `{"id":"J1","state":"deleted","jobs":[{"id":"J2","queue":"emails","state":"reserved","payload":{"n":2},"receipt":"R2","ttr":"30s"}]}`
	})
	c := f.client()
	res, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{Take: &TakeOptions{TTR: time.Minute, Wait: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "ack+take", f.last().Body, `{"receipt":"R1","take":{"ttr":"1m0s","wait":"5s"}}`)
	if res.State != "deleted" || len(res.Jobs) != 1 || res.Jobs[0].ID != "J2" || res.Jobs[0].Receipt != "R2" || string(res.Jobs[0].Payload) != `{"n":2}` {
		t.Fatalf("ack+take answer %+v", res)
	}
	if _, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{Take: &TakeOptions{Max: 3}, TakeQueues: []string{"high", "low"}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "ack+take queues", f.last().Body, `{"receipt":"R1","take":{"queues":["high","low"],"max":3}}`)
	if _, err := c.Ack(ctx, "emails", "J1", "R1", &AckOptions{Take: &TakeOptions{}, TakeQueues: []string{""}}); err == nil {
		t.Fatal("an empty take queue name was sent")
	}

	acks, err := c.AckBatch(ctx, "emails", []AckItem{{"J1", "R1"}, {"J2", "R2"}})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.Path != "/v1/ns/default/queues/emails/ack" {
		t.Errorf("batch ack: %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "batch ack", r.Body, `{"acks":[{"id":"J1","receipt":"R1"},{"id":"J2","receipt":"R2"}]}`)
	if len(acks) != 2 || acks[1].ID != "J2" || acks[1].State != "completed" {
		t.Fatalf("batch answer %+v", acks)
	}
	if _, err := c.AckBatch(ctx, "emails", nil); err == nil {
		t.Fatal("an empty batch was sent")
	}
}
