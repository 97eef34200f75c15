package lmstfy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/api/lmstfy"
)

// TestConsumeParams: ttr, timeout and count errors, and their defaults.
func TestConsumeParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{fake: true})
	for _, c := range []struct{ query, msg string }{
		{"?ttr=-1", "invalid ttr"},
		{"?ttr=x", "invalid ttr"},
		{"?ttr=", "invalid ttr"},
		{"?ttr=2592001", "invalid ttr"}, // beyond chronoq's 30 days
		{"?timeout=-1", "invalid timeout"},
		{"?timeout=1e3", "invalid timeout"},
		{"?ttr=x&timeout=y", "invalid ttr"},
		{"?count=0", "invalid count"},
		{"?count=101", "invalid count"},
		{"?count=-1", "invalid count"},
		{"?count=", "invalid count"},
		{"?timeout=y&count=0", "invalid timeout"},
	} {
		expect(t, "consume"+c.query, e.api("GET", "/api/ns/q"+c.query, nil, nil), 400, errBody(c.msg))
	}
	// ttr default 120 s: the job comes back exactly then.
	id := e.publish("ns", "q", "?tries=2", nil, "x")
	if j := e.consume("ns", "q", "", nil); j == nil || j.ID != id || j.RemainTries != 1 {
		t.Fatalf("first consume: %+v", j)
	}
	e.clock.advance(120*time.Second - time.Millisecond)
	if j := e.consume("ns", "q", "", nil); j != nil {
		t.Fatalf("job back before its default ttr of 120 s: %+v", j)
	}
	e.clock.advance(time.Millisecond)
	if j := e.consume("ns", "q", "?ttr=7", nil); j == nil || j.ID != id || j.RemainTries != 0 {
		t.Fatalf("job not back at 120 s: %+v", j)
	}
	// ttr=7 holds it 7 s, then the tries are spent: dead letter.
	e.clock.advance(7*time.Second - time.Millisecond)
	if n := e.size("ns", "q", "/deadletter/size"); n != 0 {
		t.Fatalf("dead letter before the last ttr ran out: %d", n)
	}
	e.clock.advance(time.Millisecond)
	if n := e.size("ns", "q", "/deadletter/size"); n != 1 {
		t.Fatalf("dead letter at the last ttr's end: %d, want 1", n)
	}
	// ttr=0 (which lmstfy's client never sends) holds a job one second.
	id = e.publish("ns", "z", "?tries=2", nil, "x")
	e.consume("ns", "z", "?ttr=0", nil)
	e.clock.advance(time.Second - time.Millisecond)
	if e.consume("ns", "z", "", nil) != nil {
		t.Errorf("ttr=0: job back before 1 s")
	}
	e.clock.advance(time.Millisecond)
	if j := e.consume("ns", "z", "", nil); j == nil || j.ID != id {
		t.Errorf("ttr=0: job not back at 1 s")
	}
}

// TestConsumeCount: count=1 answers an object, count>1 an array (even of
// one job), none a 404.
func TestConsumeCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var ids []string
	for i := range 5 {
		ids = append(ids, e.publish("ns", "q", "", nil, strings.Repeat("x", i+1)))
	}
	r := e.api("GET", "/api/ns/q?count=3", nil, nil)
	var arr []job
	if r.status != 200 || json.Unmarshal(r.raw, &arr) != nil || len(arr) != 3 {
		t.Fatalf("count=3: %d %s", r.status, r.raw)
	}
	for i, j := range arr {
		if j.ID != ids[i] || string(j.Data) != strings.Repeat("x", i+1) || j.Msg == nil || *j.Msg != "new job" || j.Queue != "q" || j.Namespace != "ns" {
			t.Errorf("count=3 job %d: %+v", i, j)
		}
	}
	r = e.api("GET", "/api/ns/q?count=100", nil, nil)
	if r.status != 200 || json.Unmarshal(r.raw, &arr) != nil || len(arr) != 2 {
		t.Fatalf("count=100 with 2 left: %d %s", r.status, r.raw)
	}
	e.publish("ns", "q", "", nil, "last")
	r = e.api("GET", "/api/ns/q?count=2", nil, nil)
	if r.status != 200 || r.raw[0] != '[' || json.Unmarshal(r.raw, &arr) != nil || len(arr) != 1 {
		t.Fatalf("count=2 with 1 left: %d %s", r.status, r.raw)
	}
	expect(t, "count=5 on an empty queue", e.api("GET", "/api/ns/q?count=5", nil, nil), 404, `{"msg":"no job available"}`)
	expect(t, "consume of a namespace never seen", e.api("GET", "/api/fresh/q", nil, nil), 404, `{"msg":"no job available"}`)
}

// TestConsumeMulti: queues are tried in the order named.
func TestConsumeMulti(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	c1 := e.publish("ns", "low", "", nil, "c1")
	b1 := e.publish("ns", "mid", "", nil, "b1")
	a1 := e.publish("ns", "high", "", nil, "a1")
	c2 := e.publish("ns", "low", "", nil, "c2")
	var got []string
	for range 4 {
		j := e.consume("ns", "high,mid,missing,low", "", nil)
		if j == nil {
			t.Fatal("multi-queue consume found nothing")
		}
		got = append(got, j.Queue+"/"+j.ID)
	}
	want := []string{"high/" + a1, "mid/" + b1, "low/" + c1, "low/" + c2}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("multi-queue order %v, want %v", got, want)
	}
	// A batch across queues fills from the first, then the next.
	e.publish("ns", "high", "", nil, "a")
	e.publish("ns", "low", "", nil, "c")
	e.publish("ns", "low", "", nil, "d")
	var arr []job
	r := e.api("GET", "/api/ns/high,low?count=10", nil, nil)
	if r.status != 200 || json.Unmarshal(r.raw, &arr) != nil || len(arr) != 3 || arr[0].Queue != "high" || arr[2].Queue != "low" {
		t.Errorf("batch across queues: %s", r.raw)
	}
}

// TestConsumeLongPoll: a blocked consume is woken by a publish, by a delay
// running out, and otherwise answers 404 after its timeout.
func TestConsumeLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	type result struct {
		j  *job
		at time.Time
	}
	poll := func(queues, query string) chan result {
		ch := make(chan result, 1)
		go func() {
			j := e.consume("ns", queues, query, nil)
			ch <- result{j, time.Now()}
		}()
		return ch
	}
	// The consume must be parked before the publish for the test to mean
	// anything; the pause only arranges that. What is checked is that the
	// answer is the job, which a 404 after the timeout would not be.
	ch := poll("idle,q", "?timeout=20")
	time.Sleep(200 * time.Millisecond)
	id := e.publish("ns", "q", "", nil, "wake")
	published := time.Now()
	select {
	case r := <-ch:
		if r.j == nil || r.j.ID != id || string(r.j.Data) != "wake" {
			t.Fatalf("woken consume: %+v", r.j)
		}
		if r.at.Before(published.Add(-time.Second)) {
			t.Errorf("consume answered before the publish")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a publish did not wake the long-polling consume")
	}
	// A batch consume is woken too, and answers an array.
	chb := make(chan []job, 1)
	go func() {
		r := e.api("GET", "/api/ns/b?timeout=20&count=5", nil, nil)
		var arr []job
		if r.status != 200 || json.Unmarshal(r.raw, &arr) != nil {
			t.Errorf("woken batch consume: %d %s", r.status, r.raw)
		}
		chb <- arr
	}()
	time.Sleep(200 * time.Millisecond)
	e.publish("ns", "b", "", nil, "one")
	select {
	case arr := <-chb:
		if len(arr) != 1 || string(arr[0].Data) != "one" {
			t.Errorf("woken batch consume: %+v", arr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a publish did not wake the long-polling batch consume")
	}
	// A delayed job wakes a waiting consume when it becomes ready.
	start := time.Now()
	id = e.publish("ns", "d", "?delay=1", nil, "later")
	r := <-poll("d", "?timeout=20")
	if r.j == nil || r.j.ID != id {
		t.Fatalf("consume waiting for a delayed job: %+v", r.j)
	}
	if d := r.at.Sub(start); d < 900*time.Millisecond {
		t.Errorf("delayed job handed out after %v, before its 1 s delay", d)
	}
	// Nothing comes: 404 once the timeout has passed, not before.
	start = time.Now()
	r = <-poll("empty", "?timeout=1")
	if r.j != nil {
		t.Fatalf("empty long-poll got %+v", r.j)
	}
	if d := r.at.Sub(start); d < time.Second {
		t.Errorf("empty long-poll answered after %v, before its 1 s timeout", d)
	}
}

// TestConsumeMaxWait: a timeout beyond the server's cap is cut to the cap.
func TestConsumeMaxWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{maxWait: time.Second})
	start := time.Now()
	r := e.api("GET", "/api/ns/q?timeout=500", nil, nil)
	expect(t, "long-poll past the cap", r, 404, `{"msg":"no job available"}`)
	if d := time.Since(start); d < time.Second || d > 20*time.Second {
		t.Errorf("capped long-poll took %v, want about 1 s", d)
	}
}

// TestConsumeOutlivesWriteTimeout: cmd/chronoq's listeners have a write
// timeout sized for chronoq's own 60 s waits; an lmstfy long-poll may run
// longer and must still get its answer.
func TestConsumeOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	mux := http.NewServeMux()
	mux.Handle("/api/", e.srv.Main())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	r := e.req(srv.URL, "GET", "/api/ns/q?timeout=1", nil, nil)
	expect(t, "long-poll past the listener's write timeout", r, 404, `{"msg":"no job available"}`)
}

// TestObserve: every routed request is reported with its operation and
// status, for request metrics.
func TestObserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var mu sync.Mutex
	var seen []string
	srv := lmstfy.New(e.b, lmstfy.Options{Logger: quiet, Observe: func(op string, code int, _ time.Duration) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %d", op, code))
		mu.Unlock()
	}})
	h := srv.Main()
	for _, c := range []struct{ method, path string }{
		{"PUT", "/api/ns/q"}, {"GET", "/api/ns/q"}, {"GET", "/api/ns/q"}, {"PUT", "/api/ns/_q"}, {"GET", "/api/ns/q/size"}, {"GET", "/api/x"},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader("x"))
		req.Host = "127.0.0.1" // a local client: the open mode refuses other Hosts
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	want := "publish 201,consume 200,consume 404,publish 400,size 200"
	if got := strings.Join(seen, ","); got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
}
