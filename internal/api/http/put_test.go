package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

const jobsPath = "/v1/ns/default/queues/emails/jobs"

func (e *env) lastPut() engine.PutRequest {
	e.t.Helper()
	args := e.f.last(e.t, "Put")
	if args[0] != "default" || args[1] != "emails" {
		e.t.Fatalf("Put on %v/%v, want default/emails", args[0], args[1])
	}
	return args[2].(engine.PutRequest)
}

func TestPutAnswer(t *testing.T) {
	e := newEnv(t, Options{})
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	e.f.putResult = engine.PutResult{ID: "01JD3W0Q8Z6M1N2P3Q4R5S6T7V", State: engine.StateDelayed, ActivateAt: at}
	r := e.main("POST", jobsPath, `{"payload":{"to":"a@b.c"},"delay":"10s"}`).status(http.StatusCreated)
	r.exact(`{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","state":"delayed","activate_at":"2026-11-22T09:00:00.123Z","duplicate":false}`)

	e.f.putResult.Duplicate = true
	e.main("POST", jobsPath, `{"payload":1}`).status(http.StatusOK).exact(
		`{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","state":"delayed","activate_at":"2026-11-22T09:00:00.123Z","duplicate":true}`)
}

func TestPutAllFields(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":{"to":"a@b.c"},"id":"order-42","delay":"10s","priority":10,
		"ttl":"1h","ttr":"30s","tries":5,"key":"user:42","tags":{"user_id":"42"},"reply_to":"results",
		"cron":"0 8 * * *","idempotency_key":"req-7f3a"}`).status(http.StatusCreated)
	req := e.lastPut()
	if string(req.Payload) != `{"to":"a@b.c"}` || !req.PayloadJSON {
		t.Fatalf("payload %q json=%v", req.Payload, req.PayloadJSON)
	}
	if req.ID != "order-42" || *req.Delay != 10*time.Second || req.At != nil || *req.Priority != 10 ||
		*req.TTL != time.Hour || *req.TTR != 30*time.Second || *req.Tries != 5 || req.Key != "user:42" ||
		req.Tags["user_id"] != "42" || len(req.Tags) != 1 || req.ReplyTo != "results" || req.Cron != "0 8 * * *" ||
		req.IdempotencyKey != "req-7f3a" || req.RetainResult != 0 {
		t.Fatalf("decoded %+v", req)
	}
}

func TestPutOptionalFieldsAbsent(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":"x","delay":null,"priority":null,"tags":{}}`).status(http.StatusCreated)
	req := e.lastPut()
	if req.Delay != nil || req.At != nil || req.Priority != nil || req.TTL != nil || req.TTR != nil || req.Tries != nil || req.Tags != nil {
		t.Fatalf("absent fields decoded as set: %+v", req)
	}
}

func TestPutAt(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"at":"2027-01-01T01:00:00.5+01:00"}`).status(http.StatusCreated)
	want := time.Date(2027, 1, 1, 0, 0, 0, 5e8, time.UTC)
	if at := e.lastPut().At; at == nil || !at.Equal(want) {
		t.Fatalf("at %v, want %v", at, want)
	}
	e.main("POST", jobsPath, `{"payload":1,"at":"tomorrow"}`).badReq("at")
	e.main("POST", jobsPath, `{"payload":1,"at":1700000000}`).badReq("at")
}

func TestPutPayloadCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{ "b" : 1.50 , "a" : [ 1e3, -0, "x\u00e9\n<&>" ] }`, `{"b":1.50,"a":[1e3,-0,"x\u00e9\n<&>"]}`},
		{`null`, `null`},
		{` "text" `, `"text"`},
		{`12345678901234567890`, `12345678901234567890`},
		{"[\n\t]", `[]`},
	} {
		e := newEnv(t, Options{})
		e.main("POST", jobsPath, `{"payload":`+tc.in+`}`).status(http.StatusCreated)
		req := e.lastPut()
		if string(req.Payload) != tc.want || !req.PayloadJSON {
			t.Errorf("payload %s stored as %q (json=%v), want %q", tc.in, req.Payload, req.PayloadJSON, tc.want)
		}
	}
}

func TestPutPayloadBase64(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload_base64":"AAEC/w=="}`).status(http.StatusCreated)
	req := e.lastPut()
	if !bytes.Equal(req.Payload, []byte{0, 1, 2, 255}) || req.PayloadJSON {
		t.Fatalf("payload %v json=%v", req.Payload, req.PayloadJSON)
	}
	e.main("POST", jobsPath, `{"payload_base64":"AAEC/w"}`).badReq("payload_base64")
	e.main("POST", jobsPath, `{"payload_base64":"!!!!"}`).badReq("payload_base64")
	e.main("POST", jobsPath, `{"payload_base64":"AAEC_w=="}`).badReq("payload_base64") // URL alphabet
	e.main("POST", jobsPath, `{"payload_base64":12}`).badReq("payload_base64")
}

func TestPutPayloadExactlyOne(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"payload_base64":"AA=="}`).badReq("payload")
	e.main("POST", jobsPath, `{"id":"x"}`).badReq("payload")
	e.main("POST", jobsPath, ``).badReq("payload")
	e.main("POST", jobsPath, `{}`).badReq("payload")
	if e.f.called("Put") {
		t.Fatal("a rejected put reached the backend")
	}
}

func TestPutDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{`1.5`, 1500 * time.Millisecond},
		{`0`, 0},
		{`0.001`, time.Millisecond},
		{`2`, 2 * time.Second},
		{`"250ms"`, 250 * time.Millisecond},
		{`"1h30m"`, 90 * time.Minute},
		{`"0s"`, 0},
	} {
		e := newEnv(t, Options{})
		e.main("POST", jobsPath, `{"payload":1,"delay":`+tc.in+`,"ttr":`+tc.in+`}`).status(http.StatusCreated)
		req := e.lastPut()
		if req.Delay == nil || *req.Delay != tc.want || *req.TTR != tc.want {
			t.Errorf("duration %s decoded as %v/%v, want %v", tc.in, req.Delay, req.TTR, tc.want)
		}
	}
	e := newEnv(t, Options{})
	for _, bad := range []string{`-1`, `"-1s"`, `"10 seconds"`, `""`, `true`, `{}`, `[1]`, `1e300`} {
		e.main("POST", jobsPath, `{"payload":1,"ttl":`+bad+`}`).badReq("ttl")
	}
	e.main("POST", jobsPath, `{"payload":1,"delay":-0.5}`).apiErr(400, "bad_request", "delay", "negative")
}

func TestPutDelayAndAtExclusive(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"delay":"1s","at":"2027-01-01T00:00:00Z"}`).badReq("at")
}

func TestPutWrongTypes(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"payload":1,"priority":"10"}`, "priority"},
		{`{"payload":1,"priority":1.5}`, "priority"},
		{`{"payload":1,"priority":-1}`, "priority"},
		{`{"payload":1,"priority":4294967296}`, "priority"},
		{`{"payload":1,"tries":true}`, "tries"},
		{`{"payload":1,"key":5}`, "key"},
		{`{"payload":1,"id":7}`, "id"},
		{`{"payload":1,"tags":["a"]}`, "tags"},
		{`{"payload":1,"tags":{"user_id":42}}`, "tags.user_id"},
		{`{"payload":1,"reply_to":{}}`, "reply_to"},
		{`{"payload":1,"cron":1}`, "cron"},
		{`{"payload":1,"idempotency_key":false}`, "idempotency_key"},
		{`{"payload":1,"delay":true}`, "delay"},
	} {
		e := newEnv(t, Options{})
		t.Run(tc.body, func(t *testing.T) {
			e.t = t
			e.main("POST", jobsPath, tc.body).badReq(tc.field)
		})
	}
}

func TestPutIntegralFloatsAccepted(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"priority":10.0,"tries":1e1}`).status(http.StatusCreated)
	if req := e.lastPut(); *req.Priority != 10 || *req.Tries != 10 {
		t.Fatalf("priority %d tries %d", *req.Priority, *req.Tries)
	}
}

func TestPutUnknownField(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"foo":2}`).apiErr(400, "bad_request", `unknown field "foo"`)
	// The first unknown field in sorted order is named, whatever the body's order.
	e.main("POST", jobsPath, `{"zz":1,"payload":1,"aa":2}`).apiErr(400, "bad_request", `unknown field "aa"`)
}

func TestPutMalformedBody(t *testing.T) {
	e := newEnv(t, Options{})
	for _, body := range []string{`{`, `{"payload":1}x`, `[1]`, `"x"`, `nul`, "\v{}", `{"payload":1,}`} {
		e.main("POST", jobsPath, body).apiErr(400, "bad_request")
	}
	e.main("POST", jobsPath, `[]`).apiErr(400, "bad_request", "JSON object")
}

func TestPutLimits(t *testing.T) {
	long := strings.Repeat("k", 257)
	tags17 := map[string]string{}
	for i := range 17 {
		tags17[strings.Repeat("t", i+1)] = "v"
	}
	many, _ := json.Marshal(tags17)
	for _, tc := range []struct{ body, field string }{
		{`{"payload":1,"key":"` + long + `"}`, "key"},
		{`{"payload":1,"tags":` + string(many) + `}`, "tags"},
		{`{"payload":1,"tags":{"` + long + `":"v"}}`, "tags"},
		{`{"payload":1,"tags":{"k":"` + long + `"}}`, "tags"},
		{`{"payload":1,"delay":"87601h"}`, "delay"},
		{`{"payload":1,"delay":315360001}`, "delay"},
		{`{"payload":1,"id":"` + strings.Repeat("i", 129) + `"}`, "id"},
		{`{"payload":1,"id":"a b"}`, "id"},
		{`{"payload":1,"id":"a/b"}`, "id"},
		{`{"payload":1,"reply_to":"no spaces"}`, "reply_to"},
	} {
		e := newEnv(t, Options{})
		e.main("POST", jobsPath, tc.body).badReq(tc.field)
	}
	// Exactly at the limits is fine.
	tags16 := map[string]string{}
	for i := range 16 {
		tags16[strings.Repeat("t", i+1)] = strings.Repeat("v", 256)
	}
	tags16[strings.Repeat("t", 256)] = "v"
	delete(tags16, "t")
	at, _ := json.Marshal(tags16)
	e := newEnv(t, Options{})
	e.main("POST", jobsPath, `{"payload":1,"key":"`+long[1:]+`","tags":`+string(at)+`,"delay":"87600h","id":"`+
		strings.Repeat("i", 128)+`"}`).status(http.StatusCreated)
	e.main("POST", jobsPath, `{"payload":1,"id":"Az09_.:-"}`).status(http.StatusCreated)
}

func TestPutPayloadTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxPayload: 10})
	e.main("POST", jobsPath, `{"payload":"12345678"}`).status(http.StatusCreated) // 10 bytes with quotes
	e.main("POST", jobsPath, `{"payload":"123456789"}`).apiErr(413, "payload_too_large", "payload")
	e.main("POST", jobsPath, `{"payload_base64":"AAAAAAAAAAAAAAAA"}`).apiErr(413, "payload_too_large")
	// Whitespace does not count: the stored (compacted) size does.
	e.main("POST", jobsPath, `{"payload":   [ 1 , 2 , 3 , 4 ]   }`).status(http.StatusCreated)
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxBody: 64})
	e.main("POST", jobsPath, `{"payload":"`+strings.Repeat("x", 100)+`"}`).apiErr(413, "payload_too_large")
	if e.f.called("Put") {
		t.Fatal("an oversized body reached the backend")
	}
}

func TestPutBackendPayloadTooLarge(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.err = &engine.Error{Code: engine.CodePayloadTooLarge, Field: "payload", Message: "over the queue's max_payload"}
	e.main("POST", jobsPath, `{"payload":1}`).apiErr(413, "payload_too_large", "payload: over the queue's max_payload")
}

func TestNames(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", "/v1/ns/bad!ns/queues/q/jobs", `{"payload":1}`).badReq("namespace")
	e.main("POST", "/v1/ns/"+strings.Repeat("n", 65)+"/queues/q/jobs", `{"payload":1}`).badReq("namespace")
	e.main("POST", "/v1/ns/n/queues/"+strings.Repeat("q", 201)+"/jobs", `{"payload":1}`).badReq("queue")
	e.main("POST", "/v1/ns/n/queues/a:b/jobs", `{"payload":1}`).badReq("queue")
	e.main("POST", "/v1/ns/n/queues/a%20b/jobs", `{"payload":1}`).badReq("queue")
	e.main("POST", "/v1/ns/"+strings.Repeat("n", 64)+"/queues/"+strings.Repeat("q", 200)+"/jobs", `{"payload":1}`).status(http.StatusCreated)
	e.main("POST", "/v1/ns/A-z.0_9/queues/Q-z.0_9/jobs", `{"payload":1}`).status(http.StatusCreated)
	e.main("GET", "/v1/ns/n/queues/q/jobs/a%20b", ``).badReq("id")
	e.main("GET", "/v1/ns/n/queues/q/jobs/"+strings.Repeat("i", 129), ``).badReq("id")
}

func TestBatch(t *testing.T) {
	e := newEnv(t, Options{})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e.f.batchResult = []engine.PutResult{
		{ID: "A", State: engine.StateReady, ActivateAt: at},
		{ID: "A", State: engine.StateReady, ActivateAt: at, Duplicate: true},
	}
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1,"id":"A"},{"payload_base64":"AA==","id":"A"}]}`).
		status(http.StatusCreated).
		exact(`{"jobs":[{"id":"A","state":"ready","activate_at":"2026-01-02T03:04:05.000Z","duplicate":false},
			{"id":"A","state":"ready","activate_at":"2026-01-02T03:04:05.000Z","duplicate":true}]}`)
	reqs := e.f.last(t, "PutBatch")[2].([]engine.PutRequest)
	if len(reqs) != 2 || string(reqs[0].Payload) != "1" || !reqs[0].PayloadJSON || reqs[1].PayloadJSON || reqs[1].ID != "A" {
		t.Fatalf("batch decoded as %+v", reqs)
	}
}

func TestBatchErrorsNameTheIndex(t *testing.T) {
	e := newEnv(t, Options{MaxPayload: 4})
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},{"payload":1},{"payload":1},{"payload":1,"delay":"x"}]}`).badReq("jobs[3].delay")
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},{"payload":1,"ttl":true}]}`).badReq("jobs[1].ttl")
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},{"payload":1,"bogus":1}]}`).apiErr(400, "bad_request", `unknown field "jobs[1].bogus"`)
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},{"payload":1,"tags":{"a":1}}]}`).badReq("jobs[1].tags.a")
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},5]}`).badReq("jobs[1]")
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"payload":1},{"payload":"12345"}]}`).apiErr(413, "payload_too_large", "jobs[1].payload")
	e.main("POST", jobsPath+"/batch", `{"jobs":[{"delay":"1s"}]}`).badReq("jobs[0].payload")
	e.main("POST", jobsPath+"/batch", `{"jobs":[]}`).badReq("jobs")
	e.main("POST", jobsPath+"/batch", `{}`).badReq("jobs")
	e.main("POST", jobsPath+"/batch", `{"jobs":{}}`).badReq("jobs")
	e.main("POST", jobsPath+"/batch", `{"job":[]}`).apiErr(400, "bad_request", `unknown field "job"`)
	if e.f.called("PutBatch") {
		t.Fatal("a rejected batch reached the backend")
	}
}

func TestBatchLimit(t *testing.T) {
	e := newEnv(t, Options{})
	body := func(n int) string {
		return `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"payload":1},`, n), ",") + `]}`
	}
	e.main("POST", jobsPath+"/batch", body(1001)).badReq("jobs")
	e.main("POST", jobsPath+"/batch", body(1000)).status(http.StatusCreated)
	if n := len(e.f.last(t, "PutBatch")[2].([]engine.PutRequest)); n != 1000 {
		t.Fatalf("batch of %d", n)
	}
}

func TestCall(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.done = true
	e.f.resultInfo = engine.ResultInfo{ID: "J1", State: engine.StateCompleted, HasResult: true, ResultJSON: true, ResultData: []byte(`{"ok":true}`)}
	e.main("POST", "/v1/ns/default/queues/emails/call", `{"payload":{"n":1},"wait":"30s","ttr":5}`).
		status(http.StatusOK).exact(`{"id":"J1","result":{"ok":true}}`)
	args := e.f.last(t, "Call")
	req := args[2].(engine.PutRequest)
	if args[3].(time.Duration) != 30*time.Second || string(req.Payload) != `{"n":1}` || *req.TTR != 5*time.Second || req.RetainResult != time.Minute {
		t.Fatalf("call decoded as %+v wait %v", req, args[3])
	}

	e.f.done = false
	e.f.resultInfo = engine.ResultInfo{ID: "J1", State: engine.StateReserved}
	e.main("POST", "/v1/ns/default/queues/emails/call", `{"payload":1}`).
		status(http.StatusGatewayTimeout).exact(`{"id":"J1","state":"reserved"}`)
	if w := e.f.last(t, "Call")[3].(time.Duration); w != 0 {
		t.Fatalf("default call wait %v", w)
	}

	e.f.done = true
	e.f.resultInfo = engine.ResultInfo{ID: "J2", State: engine.StateCompleted}
	e.main("POST", "/v1/ns/default/queues/emails/call", `{"payload":1}`).status(http.StatusOK).exact(`{"id":"J2","result":null}`)

	e.main("POST", "/v1/ns/default/queues/emails/call", `{"payload":1,"wait":"61s"}`).badReq("wait")
	e.main("POST", "/v1/ns/default/queues/emails/call", `{"payload":1,"wait":"x"}`).badReq("wait")
	e.main("POST", "/v1/ns/default/queues/emails/call", `{"wait":"1s"}`).badReq("payload")
}
