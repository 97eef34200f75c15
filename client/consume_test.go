package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// broker fakes the worker routes: takes hand out queued jobs (and block,
// like a long poll, while there are none), acks, nacks and touches are
// recorded and announced on channels.
type broker struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	queue   []string // job objects, JSON
	takes   []map[string]any
	takePth []string
	events  chan event
	// answers overrides a route's answer ("take", "touch", ...); a status
	// of 0 falls through to the normal answer.
	answers map[string]func() (int, string)
}

type event struct {
	kind string // ack, nack, touch
	id   string
	body map[string]any
}

func newBroker(t *testing.T) *broker {
	b := &broker{t: t, events: make(chan event, 1000), answers: map[string]func() (int, string){}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

// add queues a job with the given id, payload and TTR.
func (b *broker) add(queue, id, payload, ttr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, fmt.Sprintf(`{"id":%q,"namespace":"default","queue":%q,"state":"reserved","payload":%s,
		"priority":1024,"created_at":"2026-11-22T10:00:00.000Z","activate_at":"2026-11-22T10:00:00.000Z",
		"ttr":%q,"tries":25,"attempt":1,"receipt":"r-%s","reserved_until":"2026-11-22T10:00:30.000Z"}`, id, queue, payload, ttr, id))
}

func (b *broker) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	path := r.URL.Path
	kind := path[strings.LastIndex(path, "/")+1:]
	b.mu.Lock()
	st, out := 0, ""
	if f := b.answers[kind]; f != nil {
		st, out = f()
	}
	b.mu.Unlock()
	if st != 0 {
		w.WriteHeader(st)
		_, _ = io.WriteString(w, out)
		if kind != "take" {
			b.events <- event{kind: kind, id: jobID(path), body: body}
		}
		return
	}
	switch kind {
	case "take":
		b.mu.Lock()
		b.takes = append(b.takes, body)
		b.takePth = append(b.takePth, path)
		n := 1
		if m, ok := body["max"].(float64); ok {
			n = int(m)
		}
		n = min(n, len(b.queue))
		jobs := b.queue[:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		if len(jobs) == 0 {
			// A long poll that outlasts the test: only the client's
			// cancellation ends it.
			<-r.Context().Done()
		}
		_, _ = io.WriteString(w, `{"jobs":[`+strings.Join(jobs, ",")+`]}`)
	case "ack":
		_, _ = io.WriteString(w, `{"id":"x","state":"deleted"}`)
		b.events <- event{kind: kind, id: jobID(path), body: body}
	case "nack":
		_, _ = io.WriteString(w, `{"state":"ready"}`)
		b.events <- event{kind: kind, id: jobID(path), body: body}
	case "touch":
		_, _ = io.WriteString(w, `{"reserved_until":"2026-11-22T10:01:05.000Z"}`)
		b.events <- event{kind: kind, id: jobID(path), body: body}
	default:
		w.WriteHeader(404)
	}
}

func (b *broker) answer(kind string, f func() (int, string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers[kind] = f
}

func jobID(path string) string {
	parts := strings.Split(path, "/")
	return parts[len(parts)-2]
}

// next waits for the next event, failing the test if none comes.
func (b *broker) next() event {
	b.t.Helper()
	select {
	case e := <-b.events:
		return e
	case <-time.After(10 * time.Second):
		b.t.Fatal("no ack, nack or touch within 10s")
	}
	return event{}
}

// takeLog returns the bodies and paths of the takes so far.
func (b *broker) takeLog() ([]map[string]any, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.takes...), append([]string(nil), b.takePth...)
}

// consume runs Consume in the background and returns its cancel and a
// channel with its result.
func consume(c *Client, queues []string, h Handler, opts ...ConsumeOption) (context.CancelFunc, chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, queues, h, opts...) }()
	return cancel, done
}

func wait(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return within 10s of the stop")
	}
	return nil
}

func noLog(error) {}

func TestConsumeAcksAndNacks(t *testing.T) {
	b := newBroker(t)
	for i := range 6 {
		b.add("work", fmt.Sprintf("J%d", i), fmt.Sprintf(`{"n":%d}`, i), "30s")
	}
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(ctx context.Context, j *Job) (any, error) {
		var p struct{ N int }
		if err := j.Decode(&p); err != nil {
			return nil, err
		}
		switch p.N % 3 {
		case 0:
			return map[string]int{"double": 2 * p.N}, nil
		case 1:
			return nil, nil
		}
		return nil, fmt.Errorf("boom %d", p.N)
	}, Concurrency(3), OnError(noLog))
	got := map[string]event{}
	for range 6 {
		e := b.next()
		got[e.id] = e
	}
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	for i := range 6 {
		id := fmt.Sprintf("J%d", i)
		e, ok := got[id]
		if !ok {
			t.Errorf("%s: never settled", id)
			continue
		}
		b, _ := json.Marshal(e.body)
		switch i % 3 {
		case 0:
			if e.kind != "ack" {
				t.Errorf("%s: %s, want ack", id, e.kind)
			}
			jsonEqual(t, id+" ack", b, fmt.Sprintf(`{"receipt":"r-%s","result":{"double":%d}}`, id, 2*i))
		case 1:
			if e.kind != "ack" {
				t.Errorf("%s: %s, want ack", id, e.kind)
			}
			jsonEqual(t, id+" ack", b, fmt.Sprintf(`{"receipt":"r-%s"}`, id))
		case 2:
			if e.kind != "nack" {
				t.Errorf("%s: %s, want nack", id, e.kind)
			}
			// No delay: the queue's backoff decides.
			jsonEqual(t, id+" nack", b, fmt.Sprintf(`{"receipt":"r-%s","error":"boom %d"}`, id, i))
		}
	}
	takes, paths := b.takeLog()
	for i, tk := range takes {
		if tk["wait"] != "20s" {
			t.Errorf("take %d: wait %v, want 20s", i, tk["wait"])
		}
		if m, _ := tk["max"].(float64); m < 1 || m > 3 {
			t.Errorf("take %d: max %v, want 1..3", i, tk["max"])
		}
		if paths[i] != "/v1/ns/default/queues/work/take" {
			t.Errorf("take %d: path %s", i, paths[i])
		}
	}
}

func TestConsumeMultiQueueAndPanic(t *testing.T) {
	b := newBroker(t)
	b.add("high", "P", `"panic"`, "30s")
	var errs []error
	var mu sync.Mutex
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"high", "low"}, func(ctx context.Context, j *Job) (any, error) {
		panic("handler bug")
	}, OnError(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
	e := b.next()
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if e.kind != "nack" || e.id != "P" || !strings.Contains(e.body["error"].(string), "handler bug") {
		t.Errorf("after a panic: %+v, want a nack naming the panic", e)
	}
	takes, paths := b.takeLog()
	if paths[0] != "/v1/ns/default/take" {
		t.Errorf("take path %s", paths[0])
	}
	if qs, _ := takes[0]["queues"].([]any); len(qs) != 2 || qs[0] != "high" || qs[1] != "low" {
		t.Errorf("take queues %v", takes[0]["queues"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 0 {
		t.Errorf("errors reported: %v", errs)
	}
}

func TestConsumeTouchesLongJob(t *testing.T) {
	b := newBroker(t)
	b.add("work", "SLOW", `{}`, "40ms")
	touched := make(chan event, 1)
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(ctx context.Context, j *Job) (any, error) {
		// Done only after the worker touched the job: if it never does,
		// the test fails on the timeout below instead of passing.
		select {
		case e := <-touched:
			return e.id, nil
		case <-time.After(10 * time.Second):
			return nil, errors.New("never touched")
		}
	}, OnError(noLog))
	e := b.next()
	if e.kind != "touch" || e.id != "SLOW" {
		t.Fatalf("first event %+v, want a touch of SLOW", e)
	}
	b2, _ := json.Marshal(e.body)
	jsonEqual(t, "touch", b2, `{"receipt":"r-SLOW"}`)
	touched <- e
	for {
		e = b.next()
		if e.kind != "touch" {
			break
		}
	}
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if e.kind != "ack" || e.id != "SLOW" || e.body["result"] != "SLOW" {
		t.Errorf("after the touch: %+v, want the ack", e)
	}
}

func TestConsumeStopReleasesPrefetched(t *testing.T) {
	b := newBroker(t)
	for _, id := range []string{"A", "B", "C"} {
		b.add("work", id, `{}`, "30s")
	}
	started := make(chan string, 3)
	release := make(chan struct{})
	ctxErrAtRelease := make(chan error, 1)
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(ctx context.Context, j *Job) (any, error) {
		started <- j.ID
		<-release
		ctxErrAtRelease <- ctx.Err()
		return nil, nil
	}, Concurrency(1), Prefetch(3), OnError(noLog))
	first := <-started
	cancel()
	// The two jobs that never started come back at once, while the
	// running handler is still going.
	nacked := map[string]bool{}
	for range 2 {
		e := b.next()
		if e.kind != "nack" || e.body["delay"] != "0s" || e.id == first {
			t.Errorf("event %+v, want a nack with delay 0s of an unstarted job", e)
		}
		nacked[e.id] = true
	}
	close(release)
	if err := <-ctxErrAtRelease; err != nil {
		t.Errorf("the running handler's ctx was cancelled at once (%v); it should get the grace period", err)
	}
	e := b.next()
	if e.kind != "ack" || e.id != first {
		t.Errorf("event %+v, want the ack of %s", e, first)
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if len(nacked) != 2 || nacked[first] {
		t.Errorf("nacked %v, want the two besides %s", nacked, first)
	}
	select {
	case id := <-started:
		t.Errorf("job %s started after the stop", id)
	default:
	}
	takes, _ := b.takeLog()
	if n := len(takes); n != 1 {
		t.Fatalf("%d takes, want 1", n)
	}
	if m := takes[0]["max"]; m != 3.0 {
		t.Errorf("take max %v, want the prefetch 3", m)
	}
}

func TestConsumeGraceExpires(t *testing.T) {
	b := newBroker(t)
	b.add("work", "G", `{}`, "30s")
	started := make(chan struct{})
	cause := make(chan error, 1)
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(ctx context.Context, j *Job) (any, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}, GracePeriod(time.Millisecond), OnError(noLog))
	<-started
	cancel()
	e := b.next()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if e.kind != "nack" || e.id != "G" || !strings.Contains(e.body["error"].(string), "context canceled") {
		t.Errorf("event %+v, want a nack with the handler's error", e)
	}
	if err := <-cause; !errors.Is(err, ErrGraceExpired) {
		t.Errorf("cause %v, want ErrGraceExpired", err)
	}
}

func TestConsumeLostReservation(t *testing.T) {
	b := newBroker(t)
	b.add("work", "L", `{}`, "20ms")
	b.answer("touch", func() (int, string) {
		return 409, `{"error":{"code":"conflict","message":"receipt does not match the current reservation"}}`
	})
	cause := make(chan error, 1)
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(ctx context.Context, j *Job) (any, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}, OnError(noLog))
	if e := b.next(); e.kind != "touch" {
		t.Errorf("event %+v, want the touch", e)
	}
	if err := <-cause; !errors.Is(err, ErrReservationLost) {
		t.Errorf("cause %v, want ErrReservationLost", err)
	}
	b.next() // the nack, refused or not
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeStopsOnPermanentError(t *testing.T) {
	b := newBroker(t)
	b.answer("take", func() (int, string) {
		return 401, `{"error":{"code":"unauthorized","message":"missing token"}}`
	})
	c := New(b.srv.URL)
	err := c.Consume(context.Background(), []string{"work"}, func(context.Context, *Job) (any, error) { return nil, nil }, OnError(noLog))
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Consume: %v, want unauthorized", err)
	}
}

func TestConsumeRetriesTransientTakeErrors(t *testing.T) {
	b := newBroker(t)
	b.add("work", "T", `{}`, "30s")
	fails := 2
	// Answers run under b.mu.
	b.answer("take", func() (int, string) {
		if fails == 0 {
			return 0, ""
		}
		fails--
		return 503, `{"error":{"code":"unavailable","message":"not durable"}}`
	})
	reported := make(chan error, 10)
	c := New(b.srv.URL)
	cancel, done := consume(c, []string{"work"}, func(context.Context, *Job) (any, error) { return nil, nil },
		OnError(func(err error) { reported <- err }))
	e := b.next()
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if e.kind != "ack" || e.id != "T" {
		t.Errorf("event %+v, want the ack after the retries", e)
	}
	if len(reported) != 2 {
		t.Errorf("%d errors reported, want the 2 failed takes", len(reported))
	}
}

func TestConsumeArguments(t *testing.T) {
	c := New("http://127.0.0.1:1")
	if err := c.Consume(ctx, nil, func(context.Context, *Job) (any, error) { return nil, nil }); err == nil {
		t.Error("no queues: no error")
	}
	if err := c.Consume(ctx, []string{"q"}, nil); err == nil {
		t.Error("no handler: no error")
	}
}
