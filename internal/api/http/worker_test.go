package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

const jobPath = "/v1/ns/default/queues/emails/jobs/J1"

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fullJob has every optional field set.
func fullJob() engine.Job {
	return engine.Job{
		ID: "J1", Namespace: "default", Queue: "emails", State: engine.StateReserved,
		Data: []byte(`{"to":"a@b.c","html":"<b>&</b>"}`), PayloadJSON: true,
		Priority: 10, Key: "user:42", Tags: map[string]string{"user_id": "42"},
		CreatedAt: t0, ActivateAt: t0.Add(1500 * time.Microsecond), ExpireAt: t0.Add(time.Hour),
		TTR: 30 * time.Second, Tries: 3, Attempt: 1, Receipt: "R1", ReservedUntil: t0.Add(30 * time.Second),
		LastError: "smtp timeout", ReplyTo: "results", Cron: "*/5 * * * *",
		HasResult: true, ResultJSON: true, ResultData: []byte(`[1]`),
	}
}

const fullJobJSON = `{"id":"J1","namespace":"default","queue":"emails","state":"reserved",
	"payload":{"to":"a@b.c","html":"<b>&</b>"},"priority":10,"key":"user:42","tags":{"user_id":"42"},
	"created_at":"2026-11-22T10:00:00.000Z","activate_at":"2026-11-22T10:00:00.001Z",
	"expire_at":"2026-11-22T11:00:00.000Z","ttr":"30s","tries":3,"attempt":1,"receipt":"R1",
	"reserved_until":"2026-11-22T10:00:30.000Z","last_error":"smtp timeout","reply_to":"results",
	"cron":"*/5 * * * *","result":[1]}`

// minimalJob has every optional field empty: they must all be omitted.
func minimalJob() engine.Job {
	return engine.Job{
		ID: "J2", Namespace: "default", Queue: "emails", State: engine.StateReady,
		Data: []byte{0, 1, 2}, Priority: 1024, CreatedAt: t0, ActivateAt: t0, TTR: time.Hour,
	}
}

const minimalJobJSON = `{"id":"J2","namespace":"default","queue":"emails","state":"ready",
	"payload_base64":"AAEC","priority":1024,"created_at":"2026-11-22T10:00:00.000Z",
	"activate_at":"2026-11-22T10:00:00.000Z","ttr":"1h0m0s","tries":0,"attempt":0}`

func TestTakeQueue(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.jobs = []engine.Job{fullJob(), minimalJob()}
	e.main("POST", "/v1/ns/default/queues/emails/take", `{"max":2,"ttr":"1m","wait":"10s"}`).
		status(http.StatusOK).exact(`{"jobs":[` + fullJobJSON + `,` + minimalJobJSON + `]}`)
	args := e.f.last(t, "Take")
	req := args[1].(engine.TakeRequest)
	if args[0] != "default" || len(req.Queues) != 1 || req.Queues[0] != "emails" || req.Max != 2 ||
		*req.TTR != time.Minute || args[2].(time.Duration) != 10*time.Second {
		t.Fatalf("take decoded as %v %+v %v", args[0], req, args[2])
	}
}

func TestTakeDefaultsAndEmpty(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", "/v1/ns/default/queues/emails/take", ``).status(http.StatusOK).exact(`{"jobs":[]}`)
	args := e.f.last(t, "Take")
	if req := args[1].(engine.TakeRequest); req.Max != 1 || req.TTR != nil || args[2].(time.Duration) != 0 {
		t.Fatalf("defaults %+v wait %v", req, args[2])
	}
	e.main("POST", "/v1/ns/default/queues/emails/take", `{}`).status(http.StatusOK).exact(`{"jobs":[]}`)
}

func TestTakeValidation(t *testing.T) {
	e := newEnv(t, Options{})
	p := "/v1/ns/default/queues/emails/take"
	e.main("POST", p, `{"max":1000,"wait":"60s"}`).status(http.StatusOK)
	e.main("POST", p, `{"wait":60}`).status(http.StatusOK)
	e.main("POST", p, `{"max":1001}`).badReq("max")
	e.main("POST", p, `{"max":0}`).badReq("max")
	e.main("POST", p, `{"max":-1}`).badReq("max")
	e.main("POST", p, `{"max":"1"}`).badReq("max")
	e.main("POST", p, `{"wait":"61s"}`).badReq("wait")
	e.main("POST", p, `{"wait":60.001}`).badReq("wait")
	e.main("POST", p, `{"wait":"-1s"}`).badReq("wait")
	e.main("POST", p, `{"ttr":"soon"}`).badReq("ttr")
	e.main("POST", p, `{"queues":["a"]}`).apiErr(400, "bad_request", `unknown field "queues"`)
}

func TestTakeMaxWaitOption(t *testing.T) {
	e := newEnv(t, Options{MaxWait: 5 * time.Second})
	e.main("POST", "/v1/ns/default/queues/emails/take", `{"wait":"6s"}`).badReq("wait")
	e.main("POST", "/v1/ns/default/queues/emails/take", `{"wait":"5s"}`).status(http.StatusOK)
}

func TestTakeMulti(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", "/v1/ns/default/take", `{"queues":["high","low"],"max":10,"wait":"20s"}`).status(http.StatusOK).exact(`{"jobs":[]}`)
	req := e.f.last(t, "Take")[1].(engine.TakeRequest)
	if strings.Join(req.Queues, ",") != "high,low" || req.Max != 10 {
		t.Fatalf("take %+v", req)
	}
	e.main("POST", "/v1/ns/default/take", `{}`).badReq("queues")
	e.main("POST", "/v1/ns/default/take", `{"queues":[]}`).badReq("queues")
	e.main("POST", "/v1/ns/default/take", `{"queues":"high"}`).badReq("queues")
	e.main("POST", "/v1/ns/default/take", `{"queues":["ok",3]}`).badReq("queues[1]")
	e.main("POST", "/v1/ns/default/take", `{"queues":["ok","bad name"]}`).badReq("queues[1]")
	// "." and ".." fit the charset but vanish from URL paths.
	e.main("POST", "/v1/ns/default/take", `{"queues":["ok",".."]}`).badReq("queues[1]")
	e.main("POST", "/v1/ns/default/take", `{"queues":["."]}`).badReq("queues[0]")
	e.main("POST", "/v1/ns/default/take", `{"queues":["...","a.b"]}`).status(http.StatusOK)
}

func TestAck(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.ackResult = engine.AckResult{ID: "J1", State: "completed"}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","result":{ "ok" : true }}`).status(http.StatusOK).exact(`{"id":"J1","state":"completed"}`)
	args := e.f.last(t, "Ack")
	req := args[3].(engine.AckRequest)
	if args[2] != "J1" || req.Receipt != "R1" || !req.HasResult || !req.ResultJSON || string(req.Result) != `{"ok":true}` ||
		req.Next != nil || req.Reschedule != nil || req.AnyReceipt {
		t.Fatalf("ack decoded as %+v", req)
	}

	e.main("POST", jobPath+"/ack", `{"receipt":"R1","result":null}`).status(http.StatusOK)
	if req := e.f.last(t, "Ack")[3].(engine.AckRequest); !req.HasResult || string(req.Result) != "null" {
		t.Fatalf("null result decoded as %+v", req)
	}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1"}`).status(http.StatusOK)
	if req := e.f.last(t, "Ack")[3].(engine.AckRequest); req.HasResult {
		t.Fatalf("absent result decoded as %+v", req)
	}
}

func TestAckNext(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.ackResult = engine.AckResult{ID: "J1", State: "deleted", NextID: "J9"}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","next":{"queue":"stage2","payload":[1, 2],"delay":1,"tags":{"a":"b"}}}`).
		status(http.StatusOK).exact(`{"id":"J1","state":"deleted","next_id":"J9"}`)
	req := e.f.last(t, "Ack")[3].(engine.AckRequest)
	if req.Next == nil || req.Next.Queue != "stage2" || string(req.Next.Put.Payload) != "[1,2]" || *req.Next.Put.Delay != time.Second ||
		req.Next.Put.Tags["a"] != "b" {
		t.Fatalf("next decoded as %+v", req.Next)
	}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","next":{"payload":1}}`).status(http.StatusOK)
	if req := e.f.last(t, "Ack")[3].(engine.AckRequest); req.Next.Queue != "emails" {
		t.Fatalf("next without queue goes to %q", req.Next.Queue)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"next":{"payload":1,"delay":"x"}}`, "next.delay"},
		{`{"next":{"payload":1,"delay":"1s","at":"2027-01-01T00:00:00Z"}}`, "next.at"},
		{`{"next":{"payload":1,"queue":"bad queue"}}`, "next.queue"},
		{`{"next":{"payload":1,"queue":5}}`, "next.queue"},
		{`{"next":{"delay":"1s"}}`, "next.payload"},
		{`{"next":{"payload":1,"tags":{"x":[]}}}`, "next.tags.x"},
		{`{"next":{"payload":1,"key":"` + strings.Repeat("k", 257) + `"}}`, "next.key"},
		{`{"next":5}`, "next"},
		{`{"reschedule":{"delay":"x"}}`, "reschedule.delay"},
		{`{"reschedule":{"delay":"87601h"}}`, "reschedule.delay"},
		{`{"reschedule":{"delay":"1s","at":"2027-01-01T00:00:00Z"}}`, "reschedule.at"},
		{`{"receipt":5}`, "receipt"},
	} {
		e.main("POST", jobPath+"/ack", tc.body).badReq(tc.field)
	}
	e.main("POST", jobPath+"/ack", `{"next":{"payload":1,"zap":1}}`).apiErr(400, "bad_request", `unknown field "next.zap"`)
	e.main("POST", jobPath+"/ack", `{"reschedule":{"every":"1h"}}`).apiErr(400, "bad_request", `unknown field "reschedule.every"`)
}

func TestAckReschedule(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.ackResult = engine.AckResult{ID: "J1", State: "delayed"}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","reschedule":{"delay":"1h"}}`).status(http.StatusOK).exact(`{"id":"J1","state":"delayed"}`)
	req := e.f.last(t, "Ack")[3].(engine.AckRequest)
	if req.Reschedule == nil || *req.Reschedule.Delay != time.Hour || req.Reschedule.At != nil {
		t.Fatalf("reschedule %+v", req.Reschedule)
	}
}

func TestAckResultTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxPayload: 3})
	e.main("POST", jobPath+"/ack", `{"result":"abc"}`).apiErr(413, "payload_too_large", "result")
	e.main("POST", jobPath+"/ack", `{"next":{"payload":"abc"}}`).apiErr(413, "payload_too_large", "next.payload")
}

func TestNack(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.nackState = engine.StateDelayed
	e.main("POST", jobPath+"/nack", `{"receipt":"R1","delay":"0s","error":"smtp timeout"}`).status(http.StatusOK).exact(`{"state":"delayed"}`)
	req := e.f.last(t, "Nack")[3].(engine.NackRequest)
	if req.Receipt != "R1" || req.Delay == nil || *req.Delay != 0 || req.Error != "smtp timeout" || req.AnyReceipt {
		t.Fatalf("nack %+v", req)
	}
	e.main("POST", jobPath+"/nack", ``).status(http.StatusOK)
	if req := e.f.last(t, "Nack")[3].(engine.NackRequest); req.Delay != nil {
		t.Fatalf("nack without delay decoded a delay: %v", *req.Delay)
	}
	e.main("POST", jobPath+"/nack", `{"delay":"87601h"}`).badReq("delay")
	e.main("POST", jobPath+"/nack", `{"delay":-1}`).badReq("delay")
	e.main("POST", jobPath+"/nack", `{"error":1}`).badReq("error")
	e.main("POST", jobPath+"/nack", `{"reason":"x"}`).apiErr(400, "bad_request", `unknown field "reason"`)
}

func TestTouch(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.until = time.Date(2026, 11, 22, 10, 0, 30, 999999999, time.UTC)
	e.main("POST", jobPath+"/touch", `{"receipt":"R1","ttr":"30s"}`).status(http.StatusOK).exact(`{"reserved_until":"2026-11-22T10:00:30.999Z"}`)
	if req := e.f.last(t, "Touch")[3].(engine.TouchRequest); req.Receipt != "R1" || *req.TTR != 30*time.Second {
		t.Fatalf("touch %+v", req)
	}
	e.main("POST", jobPath+"/touch", ``).status(http.StatusOK)
	if req := e.f.last(t, "Touch")[3].(engine.TouchRequest); req.TTR != nil {
		t.Fatal("touch without ttr decoded one")
	}
	e.main("POST", jobPath+"/touch", `{"ttr":[]}`).badReq("ttr")
}

func TestBury(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("POST", jobPath+"/bury", `{"receipt":"R1","reason":"poison"}`).status(http.StatusOK).exact(`{"state":"dead"}`)
	if req := e.f.last(t, "Bury")[3].(engine.BuryRequest); req.Receipt != "R1" || req.Reason != "poison" {
		t.Fatalf("bury %+v", req)
	}
	e.main("POST", jobPath+"/bury", `{"reason":false}`).badReq("reason")
}

func TestReceiptConflict(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.err = &engine.Error{Code: engine.CodeConflict, Message: "stale receipt"}
	for _, op := range []string{"ack", "nack", "touch", "bury"} {
		e.main("POST", jobPath+"/"+op, `{"receipt":"old"}`).apiErr(409, "conflict", "stale receipt")
	}
}

func TestPeek(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.job = fullJob()
	e.main("GET", jobPath, ``).status(http.StatusOK).exact(fullJobJSON)
	if args := e.f.last(t, "Peek"); args[0] != "default" || args[1] != "emails" || args[2] != "J1" {
		t.Fatalf("peek %v", args)
	}
	e.f.job = minimalJob()
	e.main("GET", jobPath, ``).status(http.StatusOK).exact(minimalJobJSON)
	e.f.err = &engine.Error{Code: engine.CodeJobNotFound, Message: "job J1 not found"}
	e.main("GET", jobPath, ``).apiErr(404, "job_not_found", "job J1 not found")
}

func TestPeekPayloadForms(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct {
		job  engine.Job
		want string
	}{
		{engine.Job{Data: []byte(`null`), PayloadJSON: true}, `"payload":null`},
		{engine.Job{Data: []byte(`"\u00e9\u2028"`), PayloadJSON: true}, `"payload":"\u00e9\u2028"`},
		{engine.Job{Data: []byte{}, PayloadJSON: false}, `"payload_base64":""`},
		{engine.Job{Data: []byte("\xff"), PayloadJSON: false}, `"payload_base64":"/w=="`},
		{engine.Job{State: engine.StateCompleted, Data: []byte(`1`), PayloadJSON: true, HasResult: true, ResultJSON: true, ResultData: []byte(`null`)}, `"result":null`},
		{engine.Job{State: engine.StateCompleted, Data: []byte(`1`), PayloadJSON: true, HasResult: true, ResultData: []byte("ab")}, `"result_base64":"YWI="`},
	} {
		e.f.job = tc.job
		r := e.main("GET", jobPath, ``).status(http.StatusOK)
		if !strings.Contains(r.body, tc.want) {
			t.Errorf("job %+v answered %s, want it to contain %s", tc.job, r.body, tc.want)
		}
	}
	e.f.job = engine.Job{Data: []byte(`1`), PayloadJSON: true}
	if body := e.main("GET", jobPath, ``).body; strings.Contains(body, `"result`) {
		t.Errorf("job without result answered %s", body)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.listResult = engine.ListResult{Jobs: []engine.Job{minimalJob()}, NextCursor: "C2"}
	e.main("GET", jobsPath+"?state=ready,delayed&state=dead&key=user:42&tag.user_id=42&tag.kind=a&limit=5&cursor=C1", ``).
		status(http.StatusOK).exact(`{"jobs":[` + minimalJobJSON + `],"next_cursor":"C2"}`)
	req := e.f.last(t, "List")[2].(engine.ListRequest)
	f := req.Filter
	if len(f.States) != 3 || f.States[0] != engine.StateReady || f.States[1] != engine.StateDelayed || f.States[2] != engine.StateDead ||
		!f.HasKey || f.Key != "user:42" || len(f.Tags) != 2 || f.Tags["user_id"] != "42" || f.Tags["kind"] != "a" ||
		req.Limit != 5 || req.Cursor != "C1" {
		t.Fatalf("list %+v", req)
	}

	e.f.listResult = engine.ListResult{}
	e.main("GET", jobsPath, ``).status(http.StatusOK).exact(`{"jobs":[]}`)
	req = e.f.last(t, "List")[2].(engine.ListRequest)
	if req.Limit != 100 || req.Filter.States != nil || req.Filter.HasKey || req.Filter.Tags != nil || req.Cursor != "" {
		t.Fatalf("list defaults %+v", req)
	}

	e.main("GET", jobsPath+"?state=ready,bogus", ``).badReq("state")
	e.main("GET", jobsPath+"?limit=1001", ``).badReq("limit")
	e.main("GET", jobsPath+"?limit=0", ``).badReq("limit")
	e.main("GET", jobsPath+"?limit=ten", ``).badReq("limit")
	e.main("GET", jobsPath+"?limit=1000", ``).status(http.StatusOK)
	e.main("GET", jobsPath+"?key="+strings.Repeat("k", 257), ``).badReq("key")
	e.main("GET", jobsPath+"?tag.a=1&tag.a=2", ``).badReq("tag.a")
}

func TestUpdate(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.job = minimalJob()
	e.main("PATCH", jobPath, `{"payload":{"a": 1},"delay":"5s","priority":3,"tags":{},"receipt":"R1"}`).
		status(http.StatusOK).exact(minimalJobJSON)
	req := e.f.last(t, "Update")[3].(engine.UpdateRequest)
	if !req.HasPayload || !req.PayloadJSON || string(req.Payload) != `{"a":1}` || *req.Delay != 5*time.Second ||
		*req.Priority != 3 || !req.HasTags || len(req.Tags) != 0 || req.Receipt != "R1" || req.At != nil {
		t.Fatalf("update %+v", req)
	}
	e.main("PATCH", jobPath, `{"at":"2027-01-01T00:00:00Z"}`).status(http.StatusOK)
	req = e.f.last(t, "Update")[3].(engine.UpdateRequest)
	if req.HasPayload || req.HasTags || req.At == nil || req.Priority != nil {
		t.Fatalf("partial update %+v", req)
	}
	e.main("PATCH", jobPath, `{"payload_base64":"AA=="}`).status(http.StatusOK)
	if req := e.f.last(t, "Update")[3].(engine.UpdateRequest); !req.HasPayload || req.PayloadJSON || len(req.Payload) != 1 {
		t.Fatalf("base64 update %+v", req)
	}
	e.main("PATCH", jobPath, `{"payload":1,"payload_base64":"AA=="}`).badReq("payload")
	e.main("PATCH", jobPath, `{"delay":"1s","at":"2027-01-01T00:00:00Z"}`).badReq("at")
	e.main("PATCH", jobPath, `{"tags":{"a":1}}`).badReq("tags.a")
	e.main("PATCH", jobPath, `{"ttl":"1s"}`).apiErr(400, "bad_request", `unknown field "ttl"`)
	e.f.err = &engine.Error{Code: engine.CodeConflict, Message: "job is reserved"}
	e.main("PATCH", jobPath, `{"priority":1}`).apiErr(409, "conflict")
}

func TestCancel(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.main("DELETE", jobPath+"?receipt=R1", ``).status(http.StatusNoContent)
	if r.body != "" {
		t.Fatalf("204 with body %q", r.body)
	}
	if args := e.f.last(t, "Cancel"); args[2] != "J1" || args[3] != "R1" {
		t.Fatalf("cancel %v", args)
	}
	e.main("DELETE", jobPath, ``).status(http.StatusNoContent)
	if args := e.f.last(t, "Cancel"); args[3] != "" {
		t.Fatalf("cancel without receipt passed %q", args[3])
	}
}

func TestCancelByFilter(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.count = 7
	e.main("DELETE", jobsPath+"?state=delayed&tag.user_id=42", ``).status(http.StatusOK).exact(`{"deleted":7}`)
	args := e.f.last(t, "CancelByFilter")
	f := args[2].(engine.Filter)
	if args[1] != "emails" || len(f.States) != 1 || f.States[0] != engine.StateDelayed || f.Tags["user_id"] != "42" {
		t.Fatalf("cancel %v", args)
	}
	e.main("DELETE", "/v1/ns/default/jobs?tag.user_id=42", ``).status(http.StatusOK).exact(`{"deleted":7}`)
	if args := e.f.last(t, "CancelByFilter"); args[1] != "" || args[2].(engine.Filter).States != nil {
		t.Fatalf("namespace-wide cancel %v", args)
	}
	e.main("DELETE", "/v1/ns/default/jobs?key=k", ``).status(http.StatusOK)
	e.main("DELETE", "/v1/ns/default/jobs?state=dead", ``).status(http.StatusOK)

	e = newEnv(t, Options{})
	e.main("DELETE", jobsPath, ``).badReq("filter")
	e.main("DELETE", jobsPath+"?limit=5&key=", ``).badReq("filter")
	e.main("DELETE", "/v1/ns/default/jobs", ``).badReq("filter")
	e.main("DELETE", "/v1/ns/default/jobs?state=nope", ``).badReq("state")
	if e.f.called("CancelByFilter") {
		t.Fatal("a cancel without filter reached the backend")
	}
}

func TestDeadLetters(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.count = 3
	p := "/v1/ns/default/queues/emails/dead"
	e.main("POST", p+"/respawn", `{"limit":100}`).status(http.StatusOK).exact(`{"respawned":3}`)
	if req := e.f.last(t, "Respawn")[2].(engine.RespawnRequest); req.Limit != 100 || req.IDs != nil {
		t.Fatalf("respawn %+v", req)
	}
	e.main("POST", p+"/respawn", `{"ids":["A","B"]}`).status(http.StatusOK)
	if req := e.f.last(t, "Respawn")[2].(engine.RespawnRequest); req.Limit != 0 || len(req.IDs) != 2 || req.IDs[1] != "B" {
		t.Fatalf("respawn %+v", req)
	}
	e.main("POST", p+"/respawn", ``).status(http.StatusOK)
	e.main("POST", p+"/respawn", `{"limit":1,"ids":["A"]}`).badReq("ids")
	e.main("POST", p+"/respawn", `{"ids":["A","bad id"]}`).badReq("ids[1]")
	e.main("POST", p+"/respawn", `{"limit":-1}`).badReq("limit")
	e.main("POST", p+"/respawn", `{"limit":"all"}`).badReq("limit")
	e.main("DELETE", p, ``).status(http.StatusOK).exact(`{"deleted":3}`)
	if args := e.f.last(t, "PurgeDead"); args[1] != "emails" {
		t.Fatalf("purge dead %v", args)
	}
}

func TestResult(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.done = true
	e.f.resultInfo = engine.ResultInfo{ID: "J1", State: engine.StateCompleted, HasResult: true, ResultJSON: true, ResultData: []byte(`{"sent":true}`)}
	e.main("GET", jobPath+"/result?wait=30s", ``).status(http.StatusOK).exact(`{"state":"completed","result":{"sent":true}}`)
	if w := e.f.last(t, "Result")[3].(time.Duration); w != 30*time.Second {
		t.Fatalf("wait %v", w)
	}
	e.main("GET", jobPath+"/result?wait=1.5", ``).status(http.StatusOK)
	if w := e.f.last(t, "Result")[3].(time.Duration); w != 1500*time.Millisecond {
		t.Fatalf("wait %v", w)
	}
	e.f.resultInfo = engine.ResultInfo{ID: "J1", State: engine.StateCompleted}
	e.main("GET", jobPath+"/result", ``).status(http.StatusOK).exact(`{"state":"completed","result":null}`)
	if w := e.f.last(t, "Result")[3].(time.Duration); w != 0 {
		t.Fatalf("default wait %v", w)
	}

	e.f.done = false
	e.f.resultInfo = engine.ResultInfo{ID: "J1", State: engine.StateReady}
	e.main("GET", jobPath+"/result?wait=1s", ``).status(http.StatusAccepted).exact(`{"state":"ready"}`)

	e.main("GET", jobPath+"/result?wait=61s", ``).badReq("wait")
	e.main("GET", jobPath+"/result?wait=-1s", ``).badReq("wait")
	e.main("GET", jobPath+"/result?wait=soon", ``).badReq("wait")
	e.f.err = &engine.Error{Code: engine.CodeJobNotFound, Message: "job J1 not found"}
	e.main("GET", jobPath+"/result", ``).apiErr(404, "job_not_found")
}
