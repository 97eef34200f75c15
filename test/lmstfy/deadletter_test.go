package lmstfy_test

import (
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

var (
	noAutoCreate = engine.NamespaceConfig{AutoCreateQueues: false}
	one          = uint64(1)
	five         = uint32(5)
	smallQueue   = engine.QueuePatch{MaxJobs: &one}
	tinyPayload  = engine.QueuePatch{MaxPayload: &five}
)

// kill publishes a job with one try, consumes it with ttr 1 s and lets the
// fake clock run past it, so the job is dead; it answers the job's id.
func (e *env) kill(ns, q, data string) string {
	e.t.Helper()
	id := e.publish(ns, q, "?tries=1", nil, data)
	j := e.consume(ns, q, "?ttr=1", nil)
	if j == nil || j.ID != id || j.RemainTries != 0 {
		e.t.Fatalf("consume to kill %s: %+v", id, j)
	}
	e.clock.advance(time.Second)
	return id
}

type deadPeek struct {
	Head      string `json:"deadletter_head"`
	Size      int64  `json:"deadletter_size"`
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
}

func (e *env) peekDead(ns, q string) deadPeek {
	e.t.Helper()
	r := e.api("GET", "/api/"+ns+"/"+q+"/deadletter", nil, nil)
	if r.status != 200 {
		e.t.Fatalf("GET deadletter: %d %s", r.status, r.raw)
	}
	m := r.json(e.t)
	if len(m) != 4 {
		e.t.Errorf("GET deadletter answered %s, want 4 fields", r.raw)
	}
	return deadPeek{Head: m["deadletter_head"].(string), Size: int64(m["deadletter_size"].(float64)), Namespace: m["namespace"].(string), Queue: m["queue"].(string)}
}

// TestDeadLetter: tries run out → dead letter on time; peek, size,
// respawn and delete with their limits.
func TestDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	expect(t, "deadletter of a missing queue", e.api("GET", "/api/ns/q/deadletter", nil, nil), 200,
		`{"deadletter_head":"","deadletter_size":0,"namespace":"ns","queue":"q"}`)

	// Three tries: two TTR expiries put it back, the third makes it dead at
	// exactly the end of its last TTR.
	id := e.publish("ns", "q", "?tries=3", nil, "payload")
	for want := int64(2); want >= 0; want-- {
		j := e.consume("ns", "q", "?ttr=10", nil)
		if j == nil || j.ID != id || j.RemainTries != want {
			t.Fatalf("consume with %d tries left: %+v", want, j)
		}
		e.clock.advance(10*time.Second - time.Millisecond)
		if d := e.peekDead("ns", "q"); d.Size != 0 {
			t.Fatalf("dead before the TTR ran out (%d tries left)", want)
		}
		e.clock.advance(time.Millisecond)
	}
	d := e.peekDead("ns", "q")
	if d != (deadPeek{id, 1, "ns", "q"}) {
		t.Fatalf("dead letter at the end of the last TTR: %+v", d)
	}
	if e.size("ns", "q", "/size") != 0 || e.consume("ns", "q", "", nil) != nil {
		t.Errorf("a dead job is still consumable")
	}
	// A dead job can still be peeked by id (lmstfy keeps its data).
	pj := e.api("GET", "/api/ns/q/job/"+id, nil, nil).json(t)
	if pj["remain_tries"] != 0.0 || pj["data"] != "cGF5bG9hZA==" {
		t.Errorf("peek of a dead job: %v", pj)
	}

	b := e.kill("ns", "q", "b")
	c := e.kill("ns", "q", "c")
	if d := e.peekDead("ns", "q"); d.Size != 3 || d.Head != id {
		t.Fatalf("three dead: %+v", d)
	}

	// Parameter errors.
	for _, m := range []string{"PUT", "DELETE"} {
		for _, q := range []string{"?limit=0", "?limit=-1", "?limit=x", "?limit="} {
			expect(t, m+" deadletter"+q, e.api(m, "/api/ns/q/deadletter"+q, nil, nil), 400, errBody("invalid limit"))
		}
	}
	for _, q := range []string{"?ttl=-1", "?ttl=x", "?limit=1&ttl="} {
		expect(t, "respawn"+q, e.api("PUT", "/api/ns/q/deadletter"+q, nil, nil), 400, errBody("invalid ttl"))
	}

	// Delete, default limit 1: the oldest goes.
	expect(t, "delete deadletter", e.api("DELETE", "/api/ns/q/deadletter", nil, nil), 204, "")
	if d := e.peekDead("ns", "q"); d.Size != 2 || d.Head != b {
		t.Fatalf("after deleting one: %+v", d)
	}
	expect(t, "peek of the deleted dead job", e.api("GET", "/api/ns/q/job/"+id, nil, nil), 404, errBody("job not found"))

	// Respawn, default limit 1: the oldest is ready again.
	expect(t, "respawn", e.api("PUT", "/api/ns/q/deadletter", nil, nil), 200, `{"count":1,"msg":"respawned"}`)
	if n := e.size("ns", "q", "/deadletter/size"); n != 1 {
		t.Errorf("after respawning one: %d dead", n)
	}
	if j := e.consume("ns", "q", "", nil); j == nil || j.ID != b || string(j.Data) != "b" {
		t.Errorf("respawned job: %+v", j)
	}
	// More than there are: the count says how many.
	expect(t, "respawn limit=10", e.api("PUT", "/api/ns/q/deadletter?limit=10&ttl=60", nil, nil), 200, `{"count":1,"msg":"respawned"}`)
	if j := e.consume("ns", "q", "", nil); j == nil || j.ID != c {
		t.Errorf("second respawned job: %+v", j)
	}
	expect(t, "respawn of nothing", e.api("PUT", "/api/ns/q/deadletter", nil, nil), 200, `{"count":0,"msg":"respawned"}`)
	expect(t, "respawn in a missing queue", e.api("PUT", "/api/ns/none/deadletter", nil, nil), 200, `{"count":0,"msg":"respawned"}`)

	// Delete with a limit below and above the count.
	for _, s := range []string{"d", "e", "f", "g"} {
		e.kill("ns", "x", s)
	}
	expect(t, "delete limit=2", e.api("DELETE", "/api/ns/x/deadletter?limit=2", nil, nil), 204, "")
	if n := e.size("ns", "x", "/deadletter/size"); n != 2 {
		t.Errorf("after deleting 2 of 4: %d dead", n)
	}
	expect(t, "delete limit=100", e.api("DELETE", "/api/ns/x/deadletter?limit=100", nil, nil), 204, "")
	if d := e.peekDead("ns", "x"); d.Size != 0 || d.Head != "" {
		t.Errorf("after deleting all: %+v", d)
	}
	expect(t, "delete in a missing queue", e.api("DELETE", "/api/ns/none/deadletter", nil, nil), 204, "")
}
