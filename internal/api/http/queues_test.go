package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

const queuePath = "/v1/ns/default/queues/emails"

func defaultQueue() engine.QueueInfo {
	return engine.QueueInfo{
		Namespace: "default", Name: "emails", Config: engine.DefaultQueueConfig(),
		Counts: engine.Counts{Delayed: 1, Ready: 2, Blocked: 3, Reserved: 4, Dead: 5, Completed: 6},
	}
}

const defaultQueueJSON = `{"namespace":"default","name":"emails","config":{"default_ttr":"30s","default_tries":25,
	"default_ttl":"0s","default_priority":1024,"max_jobs":0,"max_payload":1048576,"dedup_window":"15m0s",
	"retain_results":"0s","key_mode":"strict","backoff":{"initial":"1s","max":"10m0s","multiplier":2,"jitter":0.1}},
	"paused":false,"counts":{"delayed":1,"ready":2,"blocked":3,"reserved":4,"dead":5,"completed":6},
	"oldest_ready_age":"0s"}`

func TestPutQueue(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.queue = defaultQueue()
	e.f.created = true
	e.main("PUT", queuePath, ``).status(http.StatusCreated).exact(defaultQueueJSON)
	if p := e.f.last(t, "PutQueue")[2].(engine.QueuePatch); p != (engine.QueuePatch{}) {
		t.Fatalf("empty body decoded as %+v", p)
	}
	e.f.created = false
	e.main("PUT", queuePath, `{"default_ttr":"1m","default_tries":0,"default_ttl":3600,"default_priority":7,"max_jobs":100,
		"max_payload":1024,"dedup_window":"15m","retain_results":"1h","key_mode":"exclusive",
		"backoff":{"initial":"2s","max":"1h","multiplier":1.5,"jitter":0}}`).status(http.StatusOK).exact(defaultQueueJSON)
	p := e.f.last(t, "PutQueue")[2].(engine.QueuePatch)
	if *p.DefaultTTR != time.Minute || *p.DefaultTries != 0 || *p.DefaultTTL != time.Hour || *p.DefaultPriority != 7 ||
		*p.MaxJobs != 100 || *p.MaxPayload != 1024 || *p.DedupWindow != 15*time.Minute || *p.RetainResults != time.Hour ||
		*p.KeyMode != engine.KeyExclusive || *p.BackoffInitial != 2*time.Second || *p.BackoffMax != time.Hour ||
		*p.BackoffMult != 1.5 || *p.BackoffJitter != 0 {
		t.Fatalf("patch %+v", p)
	}
	e.main("PUT", queuePath, `{"backoff":{"jitter":0.5}}`).status(http.StatusOK)
	p = e.f.last(t, "PutQueue")[2].(engine.QueuePatch)
	if p.BackoffInitial != nil || p.BackoffMax != nil || p.BackoffMult != nil || *p.BackoffJitter != 0.5 || p.DefaultTTR != nil {
		t.Fatalf("partial patch %+v", p)
	}
}

func TestPutQueueValidation(t *testing.T) {
	e := newEnv(t, Options{})
	for _, tc := range []struct{ body, field string }{
		{`{"default_ttr":"x"}`, "default_ttr"},
		{`{"default_ttr":-1}`, "default_ttr"},
		{`{"default_tries":"3"}`, "default_tries"},
		{`{"max_jobs":-1}`, "max_jobs"},
		{`{"max_payload":1048577}`, "max_payload"},
		{`{"key_mode":"fifo"}`, "key_mode"},
		{`{"key_mode":1}`, "key_mode"},
		{`{"backoff":{"initial":true}}`, "backoff.initial"},
		{`{"backoff":{"max":"-1s"}}`, "backoff.max"},
		{`{"backoff":{"multiplier":"2"}}`, "backoff.multiplier"},
		{`{"backoff":{"multiplier":0.5}}`, "backoff.multiplier"},
		{`{"backoff":{"jitter":1.5}}`, "backoff.jitter"},
		{`{"backoff":"fast"}`, "backoff"},
	} {
		e.main("PUT", queuePath, tc.body).badReq(tc.field)
	}
	e.main("PUT", queuePath, `{"backoff":{"factor":2}}`).apiErr(400, "bad_request", `unknown field "backoff.factor"`)
	e.main("PUT", queuePath, `{"name":"x"}`).apiErr(400, "bad_request", `unknown field "name"`)
	if e.f.called("PutQueue") {
		t.Fatal("a rejected queue config reached the backend")
	}
	big := newEnv(t, Options{MaxPayload: 64 << 20})
	big.main("PUT", queuePath, `{"max_payload":67108864}`).status(http.StatusOK)
	big.main("PUT", queuePath, `{"max_payload":67108865}`).badReq("max_payload")
}

func TestQueueReads(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.queue = defaultQueue()
	e.main("GET", queuePath, ``).status(http.StatusOK).exact(defaultQueueJSON)

	e.main("GET", "/v1/ns/default/queues", ``).status(http.StatusOK).exact(`{"queues":[]}`)
	e.f.queues = []engine.QueueInfo{defaultQueue(), defaultQueue()}
	e.main("GET", "/v1/ns/default/queues", ``).status(http.StatusOK).exact(`{"queues":[` + defaultQueueJSON + `,` + defaultQueueJSON + `]}`)

	q := defaultQueue()
	q.Paused = true
	q.OldestReadyAge = 90 * time.Second
	e.f.queue = q
	m := e.main("GET", queuePath, ``).status(http.StatusOK).json()
	if m["paused"] != true || m["oldest_ready_age"] != "1m30s" {
		t.Fatalf("queue %v", m)
	}
	e.f.err = &engine.Error{Code: engine.CodeQueueNotFound, Message: "queue emails not found"}
	e.main("GET", queuePath, ``).apiErr(404, "queue_not_found", "queue emails not found")
}

func TestQueueActions(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.queue = defaultQueue()
	e.main("POST", queuePath+"/pause", ``).status(http.StatusOK).exact(defaultQueueJSON)
	if args := e.f.last(t, "SetPaused"); args[2] != true {
		t.Fatalf("pause %v", args)
	}
	e.main("POST", queuePath+"/resume", `{}`).status(http.StatusOK).exact(defaultQueueJSON)
	if args := e.f.last(t, "SetPaused"); args[2] != false {
		t.Fatalf("resume %v", args)
	}
	e.main("POST", queuePath+"/pause", `{"until":"1h"}`).apiErr(400, "bad_request", `unknown field "until"`)

	e.f.count = 12
	e.main("POST", queuePath+"/purge", ``).status(http.StatusOK).exact(`{"deleted":12}`)
	r := e.main("DELETE", queuePath, ``).status(http.StatusNoContent)
	if r.body != "" {
		t.Fatalf("204 with body %q", r.body)
	}
	if args := e.f.last(t, "DeleteQueue"); args[0] != "default" || args[1] != "emails" {
		t.Fatalf("delete %v", args)
	}
}

func TestChannels(t *testing.T) {
	e := newEnv(t, Options{MaxPayload: 16})
	e.f.offset, e.f.epoch = 5, "ep1"
	e.main("POST", "/v1/ns/default/channels/news/publish", `{"data": {"a" : [1, 2]}}`).status(http.StatusOK).exact(`{"offset":5,"epoch":"ep1"}`)
	if args := e.f.last(t, "Publish"); args[1] != "news" || string(args[2].([]byte)) != `{"a":[1,2]}` {
		t.Fatalf("publish %v", args)
	}
	e.main("POST", "/v1/ns/default/channels/news/publish", `{"data":null}`).status(http.StatusOK)
	e.main("POST", "/v1/ns/default/channels/news/publish", `{}`).badReq("data")
	e.main("POST", "/v1/ns/default/channels/news/publish", `{"data":"`+"0123456789abcdef"+`"}`).apiErr(413, "payload_too_large", "data")
	e.main("POST", "/v1/ns/default/channels/bad%20name/publish", `{"data":1}`).badReq("channel")

	e.f.hist = pubsub.HistoryResult{
		Publications: []*pubsub.Publication{{Offset: 4, Data: []byte(`{"x":1}`), Time: t0}, {Offset: 5, Data: []byte(`"y"`), Time: t0.Add(time.Millisecond)}},
		Position:     pubsub.Position{Offset: 5, Epoch: "ep1"}, Recovered: true,
	}
	e.main("GET", "/v1/ns/default/channels/news/history?since=3&epoch=ep1&limit=10", ``).status(http.StatusOK).exact(
		`{"publications":[{"offset":4,"data":{"x":1},"time":"2026-11-22T10:00:00.000Z"},{"offset":5,"data":"y","time":"2026-11-22T10:00:00.001Z"}],
		"offset":5,"epoch":"ep1","recovered":true}`)
	if args := e.f.last(t, "History"); args[2] != uint64(3) || args[3] != "ep1" || args[4] != 10 {
		t.Fatalf("history %v", args)
	}
	e.f.hist = pubsub.HistoryResult{Position: pubsub.Position{Offset: 9, Epoch: "ep2"}}
	e.main("GET", "/v1/ns/default/channels/news/history", ``).status(http.StatusOK).exact(`{"publications":[],"offset":9,"epoch":"ep2","recovered":false}`)
	if args := e.f.last(t, "History"); args[2] != uint64(0) || args[3] != "" || args[4] != 100 {
		t.Fatalf("history defaults %v", args)
	}
	e.main("GET", "/v1/ns/default/channels/news/history?since=-1", ``).badReq("since")
	e.main("GET", "/v1/ns/default/channels/news/history?limit=1001", ``).badReq("limit")
}
