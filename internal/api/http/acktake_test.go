package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

func TestAckTake(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.ackResult = engine.AckResult{ID: "J1", State: "deleted"}
	e.f.jobs = []engine.Job{fullJob()}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","take":{"max":2,"ttr":"1m","wait":"10s"}}`).
		status(http.StatusOK).exact(`{"id":"J1","state":"deleted","jobs":[` + fullJobJSON + `]}`)
	args := e.f.last(t, "AckAndTake")
	ack, take := args[3].(engine.AckRequest), args[4].(engine.TakeRequest)
	if args[0] != "default" || args[1] != "emails" || args[2] != "J1" || ack.Receipt != "R1" ||
		len(take.Queues) != 1 || take.Queues[0] != "emails" || take.Max != 2 || *take.TTR != time.Minute ||
		args[5].(time.Duration) != 10*time.Second {
		t.Fatalf("ack+take decoded as %v", args)
	}
	if _, plain := e.f.calls["Ack"]; plain {
		t.Fatal("an ack with take also called the plain ack")
	}

	// an empty take object: one job from the acked job's queue, no wait;
	// nothing found is an empty list, never an absent one
	e.f.jobs = nil
	e.f.ackResult = engine.AckResult{ID: "J1", State: "deleted", NextID: "J9"}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","next":{"payload":1},"take":{}}`).
		status(http.StatusOK).exact(`{"id":"J1","state":"deleted","next_id":"J9","jobs":[]}`)
	args = e.f.last(t, "AckAndTake")
	if take := args[4].(engine.TakeRequest); take.Max != 1 || take.TTR != nil || take.Queues[0] != "emails" ||
		args[5].(time.Duration) != 0 || args[3].(engine.AckRequest).Next == nil {
		t.Fatalf("defaults %v", args)
	}
	// take from other queues, in order
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","take":{"queues":["high","low"]}}`).status(http.StatusOK)
	if take := e.f.last(t, "AckAndTake")[4].(engine.TakeRequest); len(take.Queues) != 2 || take.Queues[1] != "low" {
		t.Fatalf("queues %v", take.Queues)
	}

	calls := len(e.f.order)
	for _, tc := range []struct{ body, field string }{
		{`{"receipt":"R1","take":5}`, "take"},
		{`{"receipt":"R1","take":{"max":0}}`, "take.max"},
		{`{"receipt":"R1","take":{"max":1001}}`, "take.max"},
		{`{"receipt":"R1","take":{"ttr":"x"}}`, "take.ttr"},
		{`{"receipt":"R1","take":{"wait":"61s"}}`, "take.wait"},
		{`{"receipt":"R1","take":{"queues":[]}}`, "take.queues"},
		{`{"receipt":"R1","take":{"queues":["bad queue"]}}`, "take.queues[0]"},
	} {
		e.main("POST", jobPath+"/ack", tc.body).badReq(tc.field)
	}
	e.main("POST", jobPath+"/ack", `{"receipt":"R1","take":{"zap":1}}`).apiErr(400, "bad_request", `unknown field "take.zap"`)
	if len(e.f.order) != calls {
		t.Fatalf("a rejected body reached the backend: %v", e.f.order[calls:])
	}
}

func TestAckBatch(t *testing.T) {
	e := newEnv(t, Options{})
	const path = "/v1/ns/default/queues/emails/ack"
	e.f.ackResults = []engine.AckResult{{ID: "J1", State: "deleted"}, {ID: "J2", State: "completed"}}
	e.main("POST", path, `{"acks":[{"id":"J1","receipt":"R1"},{"id":"J2","receipt":"R2"}]}`).
		status(http.StatusOK).exact(`{"acks":[{"id":"J1","state":"deleted"},{"id":"J2","state":"completed"}]}`)
	args := e.f.last(t, "AckBatch")
	items := args[2].([]engine.AckItem)
	if args[0] != "default" || args[1] != "emails" || len(items) != 2 || items[1] != (engine.AckItem{ID: "J2", Receipt: "R2"}) {
		t.Fatalf("batch decoded as %v", args)
	}
	calls := len(e.f.order)
	many := `{"acks":[`
	for i := 0; i <= engine.MaxAckBatch; i++ {
		if i > 0 {
			many += ","
		}
		many += `{"id":"J","receipt":"R"}`
	}
	many += `]}`
	for _, tc := range []struct{ body, field string }{
		{``, "acks"},
		{`{"acks":[]}`, "acks"},
		{`{"acks":{}}`, "acks"},
		{many, "acks"},
		{`{"acks":[5]}`, "acks[0]"},
		{`{"acks":[{"id":"J1","receipt":"R1"},{"receipt":"R2"}]}`, "acks[1].id"},
		{`{"acks":[{"id":"J1"}]}`, "acks[0].receipt"},
		{`{"acks":[{"id":5,"receipt":"R"}]}`, "acks[0].id"},
	} {
		e.main("POST", path, tc.body).badReq(tc.field)
	}
	e.main("POST", path, `{"acks":[{"id":"J1","receipt":"R1","result":1}]}`).apiErr(400, "bad_request", `unknown field "acks[0].result"`)
	if len(e.f.order) != calls {
		t.Fatalf("a rejected body reached the backend: %v", e.f.order[calls:])
	}
}
