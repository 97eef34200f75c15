package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

// TestEndToEnd runs the client against the real server: it builds
// ./cmd/chronoq, starts it on loopback ports and goes through a producer /
// worker round trip. It is skipped when the server does not build.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server")
	}
	bin := buildServer(t)
	c, admin, exited := startServer(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, st := range []struct {
		name string
		f    func(context.Context, *testing.T, *Client)
	}{
		{"consume_100", e2eConsume100},
		{"retry_after_error", e2eRetry},
		{"delayed", e2eDelayed},
		{"fifo", e2eFIFO},
		{"call", e2eCall},
		{"errors", e2eErrors},
		{"stop_releases", e2eStopReleases},
		{"touch_keeps_reservation", e2eTouch},
		{"list_and_cancel", e2eListCancel},
		{"queue_pages", e2eQueuePages},
		{"ack_take_and_batch", e2eAckTakeBatch},
	} {
		t.Run(st.name, func(t *testing.T) { st.f(ctx, t, c) })
		select {
		case <-exited:
			t.Fatalf("the server died during %s (its log follows)", st.name)
		default:
		}
	}
	// Last: once a token exists, the other calls would need one too.
	t.Run("admin", func(t *testing.T) { e2eAdmin(ctx, t, admin) })
}

func buildServer(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Build(t.TempDir())
	if err != nil {
		t.Skipf("the server does not build: %v", err)
	}
	return bin
}

// startServer runs the server until the test ends, then stops it with
// SIGTERM. It returns a client of the main listener and one that also
// knows the admin listener.
func startServer(t *testing.T, bin string) (c, admin *Client, exited chan struct{}) {
	t.Helper()
	httpAddr, adminAddr := testbin.FreeAddr(t), testbin.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--http", httpAddr, "--admin", adminAddr, "--beanstalk", "")
	var log testbin.Output
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("server exit after SIGTERM: %v", waitErr)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("server still running 10s after SIGTERM")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	probe := New("http://"+httpAddr, WithRetries(0, 0))
	deadline := time.Now().Add(15 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := probe.Healthz(hctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("server exited before answering /healthz: %v", waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy within 15s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return New("http://" + httpAddr), New("http://"+httpAddr, WithAdminURL("http://"+adminAddr)), exited
}

// run starts Consume and returns a stop function that cancels it and
// reports its result.
func run(ctx context.Context, t *testing.T, c *Client, queues []string, h Handler, opts ...ConsumeOption) (stop func()) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	errs := &testbin.Output{}
	opts = append([]ConsumeOption{OnError(func(err error) { fmt.Fprintln(errs, err) })}, opts...)
	go func() { done <- c.Consume(cctx, queues, h, opts...) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Consume returned %v", err)
			}
		case <-ctx.Done():
			t.Fatal("Consume did not stop before the test's deadline")
		}
		if s := errs.String(); s != "" {
			t.Errorf("Consume reported errors:\n%s", s)
		}
	}
}

func mustQueue(ctx context.Context, t *testing.T, c *Client, q string) *Queue {
	t.Helper()
	info, err := c.GetQueue(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// e2eAckTakeBatch: a worker loop of acks that take the next job, a take
// that long-polls after its ack, and a batch ack.
func e2eAckTakeBatch(ctx context.Context, t *testing.T, c *Client) {
	const q = "acktake"
	for i := range 3 {
		if _, err := c.Put(ctx, q, PutOptions{Payload: json.RawMessage(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := c.Take(ctx, q, TakeOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take: %v %d", err, len(jobs))
	}
	j := jobs[0]
	var got []string
	for {
		got = append(got, string(j.Payload))
		res, err := c.Ack(ctx, q, j.ID, j.Receipt, &AckOptions{Take: &TakeOptions{}})
		if err != nil {
			t.Fatal(err)
		}
		if res.State != "deleted" {
			t.Fatalf("ack %+v", res)
		}
		if len(res.Jobs) == 0 {
			break
		}
		j = res.Jobs[0]
	}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("handled %v", got)
	}
	// the take waits after the ack; a put made meanwhile ends the wait
	if _, err := c.Put(ctx, q, PutOptions{Payload: json.RawMessage(`"w"`)}); err != nil {
		t.Fatal(err)
	}
	jobs, err = c.Take(ctx, q, TakeOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take: %v %d", err, len(jobs))
	}
	done := make(chan *AckResult, 1)
	go func() {
		res, err := c.Ack(ctx, q, jobs[0].ID, jobs[0].Receipt, &AckOptions{Take: &TakeOptions{Wait: 20 * time.Second}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// the ack is done while the take still waits
	for {
		if _, err := c.Peek(ctx, q, jobs[0].ID); errors.Is(err, ErrNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ack did not happen while its take waited")
		case <-time.After(10 * time.Millisecond):
		}
	}
	p, err := c.Put(ctx, q, PutOptions{Payload: json.RawMessage(`"late"`)})
	if err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || len(res.Jobs) != 1 || res.Jobs[0].ID != p.ID {
		t.Fatalf("waiting take answered %+v", res)
	}
	// batch: all or none
	if _, err := c.Put(ctx, q, PutOptions{Payload: json.RawMessage(`"b"`)}); err != nil {
		t.Fatal(err)
	}
	more, err := c.Take(ctx, q, TakeOptions{Max: 2})
	if err != nil || len(more) != 1 {
		t.Fatalf("take: %v %d", err, len(more))
	}
	items := []AckItem{{res.Jobs[0].ID, res.Jobs[0].Receipt}, {more[0].ID, "wrong"}}
	if _, err := c.AckBatch(ctx, q, items); !errors.Is(err, ErrConflict) {
		t.Fatalf("batch with a wrong receipt: %v", err)
	}
	items[1].Receipt = more[0].Receipt
	acks, err := c.AckBatch(ctx, q, items)
	if err != nil || len(acks) != 2 || acks[0].State != "deleted" || acks[1].ID != more[0].ID {
		t.Fatalf("batch: %+v %v", acks, err)
	}
	for _, id := range []string{items[0].ID, items[1].ID} {
		if _, err := c.Peek(ctx, q, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("job %s after the batch ack: %v", id, err)
		}
	}
}

func e2eConsume100(ctx context.Context, t *testing.T, c *Client) {
	const n = 100
	for i := range n / 2 {
		if _, err := c.Put(ctx, "bulk", PutOptions{Payload: json.RawMessage(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	batch := make([]PutOptions, 0, n/2)
	for i := n / 2; i < n; i++ {
		batch = append(batch, PutOptions{Payload: json.RawMessage(strconv.Itoa(i))})
	}
	if res, err := c.PutBatch(ctx, "bulk", batch); err != nil || len(res) != n/2 {
		t.Fatalf("batch: %v (%d answers)", err, len(res))
	}
	var mu sync.Mutex
	seen := map[int]int{}
	all := make(chan struct{})
	stop := run(ctx, t, c, []string{"bulk"}, func(ctx context.Context, j *Job) (any, error) {
		var v int
		if err := j.Decode(&v); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		seen[v]++
		if len(seen) == n && seen[v] == 1 {
			close(all)
		}
		return nil, nil
	}, Concurrency(4))
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("only %d of %d jobs handled before the deadline", len(seen), n)
	}
	stop()
	for v, k := range seen {
		if k != 1 {
			t.Errorf("job %d handled %d times", v, k)
		}
	}
	// Every ack landed: the queue is empty, nothing is left reserved.
	if q := mustQueue(ctx, t, c, "bulk"); q.Counts.Total() != 0 {
		t.Errorf("after consuming everything: counts %+v", q.Counts)
	}
}

func e2eRetry(ctx context.Context, t *testing.T, c *Client) {
	if _, err := c.ConfigureQueue(ctx, "flaky", &QueueConfig{Backoff: &Backoff{Initial: Ptr(10 * time.Millisecond), Jitter: Ptr(0.0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "flaky", PutOptions{Payload: json.RawMessage(`"x"`)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Job, 1)
	stop := run(ctx, t, c, []string{"flaky"}, func(ctx context.Context, j *Job) (any, error) {
		if j.Attempt == 1 {
			return nil, errors.New("first try fails")
		}
		done <- j
		return nil, nil
	})
	var j *Job
	select {
	case j = <-done:
	case <-ctx.Done():
		t.Fatal("the nacked job was not redelivered")
	}
	stop()
	if j.Attempt != 2 || j.LastError != "first try fails" {
		t.Errorf("redelivered job: attempt %d, last_error %q", j.Attempt, j.LastError)
	}
}

func e2eDelayed(ctx context.Context, t *testing.T, c *Client) {
	res, err := c.Put(ctx, "later", PutOptions{Payload: json.RawMessage(`{"when":"soon"}`), Delay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateDelayed {
		t.Errorf("put state %q, want delayed", res.State)
	}
	if jobs, err := c.Take(ctx, "later", TakeOptions{}); err != nil || len(jobs) != 0 {
		t.Fatalf("take before the delay: %v %v", err, jobs)
	}
	if j, err := c.Peek(ctx, "later", res.ID); err != nil || j.State != StateDelayed {
		t.Fatalf("peek: %v %+v", err, j)
	}
	jobs, err := c.Take(ctx, "later", TakeOptions{Wait: 10 * time.Second})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take with wait: %v %v", err, jobs)
	}
	got := time.Now()
	j := jobs[0]
	// Same host, same clock; the answer's times have millisecond precision.
	if got.Before(res.ActivateAt.Add(-time.Millisecond)) {
		t.Errorf("delayed job handed out at %v, before its activation %v", got, res.ActivateAt)
	}
	if j.ID != res.ID || string(j.Payload) != `{"when":"soon"}` || j.Receipt == "" {
		t.Errorf("taken job %+v", j)
	}
	if _, err := c.Ack(ctx, "later", j.ID, j.Receipt, nil); err != nil {
		t.Fatal(err)
	}
}

func e2eFIFO(ctx context.Context, t *testing.T, c *Client) {
	for i := 1; i <= 3; i++ {
		if _, err := c.Put(ctx, "fifo", PutOptions{Payload: json.RawMessage(strconv.Itoa(i)), Key: "user:42"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, "fifo", PutOptions{Payload: json.RawMessage(`100`), Key: "user:7"}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for range 4 {
		jobs, err := c.Take(ctx, "fifo", TakeOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		// Of one key only the oldest is ever out at a time.
		keys := map[string]int{}
		for _, j := range jobs {
			keys[j.Key]++
		}
		if keys["user:42"] > 1 {
			t.Fatalf("two jobs of one key out at once: %v", jobs)
		}
		for _, j := range jobs {
			if j.Key == "user:42" {
				order = append(order, string(j.Payload))
			}
			if _, err := c.Ack(ctx, "fifo", j.ID, j.Receipt, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fmt.Sprint(order) != "[1 2 3]" {
		t.Errorf("per-key order %v, want [1 2 3]", order)
	}
}

func e2eCall(ctx context.Context, t *testing.T, c *Client) {
	stop := run(ctx, t, c, []string{"rpc"}, func(ctx context.Context, j *Job) (any, error) {
		var in struct{ W int }
		if err := j.Decode(&in); err != nil {
			return nil, err
		}
		return map[string]int{"area": in.W * in.W}, nil
	}, Concurrency(2))
	defer stop()
	res, err := c.Call(ctx, "rpc", PutOptions{Payload: json.RawMessage(`{"w":12}`)}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || res.ID == "" {
		t.Errorf("call %+v", res)
	}
	jsonEqual(t, "call result", res.Result, `{"area":144}`)
	// The call's result stays fetchable for a while.
	r, err := c.Result(ctx, "rpc", res.ID, 0)
	if err != nil || !r.Done {
		t.Fatalf("result after call: %v %+v", err, r)
	}
	jsonEqual(t, "result", r.Result, `{"area":144}`)
}

func e2eErrors(ctx context.Context, t *testing.T, c *Client) {
	if _, err := c.Put(ctx, "errs", PutOptions{Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Take(ctx, "errs", TakeOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take: %v %v", err, jobs)
	}
	j := jobs[0]
	_, err = c.Ack(ctx, "errs", j.ID, "WRONG", nil)
	var e *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &e) || e.Code != "conflict" || e.Message == "" {
		t.Errorf("ack with a wrong receipt: %v, want conflict", err)
	}
	if err := c.Cancel(ctx, "errs", j.ID, ""); !errors.Is(err, ErrConflict) {
		t.Errorf("cancel of a reserved job without its receipt: %v, want conflict", err)
	}
	if err := c.Cancel(ctx, "errs", j.ID, j.Receipt); err != nil {
		t.Errorf("cancel with the receipt: %v", err)
	}
	if _, err := c.Peek(ctx, "errs", j.ID); !errors.Is(err, ErrJobNotFound) || !errors.Is(err, ErrNotFound) {
		t.Errorf("peek of a cancelled job: %v, want job_not_found", err)
	}
	_, err = c.Take(ctx, "errs", TakeOptions{Max: 5000})
	if !errors.Is(err, ErrBadRequest) || !errors.As(err, &e) || !bytes.Contains([]byte(e.Message), []byte("max")) {
		t.Errorf("take max 5000: %v, want bad_request naming max", err)
	}
	if _, err := c.GetQueue(ctx, "no-such-queue"); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("get missing queue: %v", err)
	}
}

func e2eStopReleases(ctx context.Context, t *testing.T, c *Client) {
	for i := range 10 {
		if _, err := c.Put(ctx, "release", PutOptions{Payload: json.RawMessage(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan struct{}, 10)
	stop := run(ctx, t, c, []string{"release"}, func(ctx context.Context, j *Job) (any, error) {
		started <- struct{}{}
		return nil, nil
	}, Concurrency(1), Prefetch(5))
	<-started
	stop()
	// Whatever was taken is acked or back: none stays reserved to time out.
	q := mustQueue(ctx, t, c, "release")
	if q.Counts.Reserved != 0 || q.Counts.Ready+uint64(len(started))+1 != 10 {
		t.Errorf("after stop: counts %+v, %d handled", q.Counts, len(started)+1)
	}
}

func e2eTouch(ctx context.Context, t *testing.T, c *Client) {
	if _, err := c.Put(ctx, "slow", PutOptions{Payload: json.RawMessage(`1`), TTR: time.Second}); err != nil {
		t.Fatal(err)
	}
	var calls sync.Map
	finished := make(chan struct{})
	stop := run(ctx, t, c, []string{"slow"}, func(ctx context.Context, j *Job) (any, error) {
		if _, dup := calls.LoadOrStore(j.ID, true); dup {
			t.Errorf("job %s delivered twice: its reservation ran out", j.ID)
		}
		// Work for well past the TTR; without touches the server would
		// hand the job out again meanwhile.
		select {
		case <-time.After(2500 * time.Millisecond):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		close(finished)
		return nil, nil
	}, Concurrency(2), Prefetch(1))
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatal("slow handler never finished")
	}
	stop()
	if q := mustQueue(ctx, t, c, "slow"); q.Counts.Total() != 0 {
		t.Errorf("after the slow job: counts %+v (the ack failed?)", q.Counts)
	}
}

func e2eListCancel(ctx context.Context, t *testing.T, c *Client) {
	var batch []PutOptions
	for i := range 25 {
		tag := "a"
		if i%5 == 0 {
			tag = "b"
		}
		batch = append(batch, PutOptions{Payload: json.RawMessage(strconv.Itoa(i)), Tags: map[string]string{"group": tag}, Delay: time.Hour})
	}
	if _, err := c.PutBatch(ctx, "listing", batch); err != nil {
		t.Fatal(err)
	}
	it := c.List(ctx, "listing", Filter{States: []string{StateDelayed}, Limit: 4})
	count := 0
	for it.Next(ctx) {
		count++
	}
	if err := it.Err(); err != nil || count != 25 {
		t.Errorf("listing: %d jobs, %v", count, err)
	}
	n, err := c.CancelByFilter(ctx, "listing", Filter{Tags: map[string]string{"group": "b"}})
	if err != nil || n != 5 {
		t.Errorf("cancel by tag: %d, %v", n, err)
	}
	if q := mustQueue(ctx, t, c, "listing"); q.Counts.Delayed != 20 {
		t.Errorf("after cancel: %+v", q.Counts)
	}
}

// e2eQueuePages pages through the queues (GET queues answers pages of
// limit with next_cursor) and ListQueues follows the pages.
func e2eQueuePages(ctx context.Context, t *testing.T, c *Client) {
	for _, q := range []string{"page-a", "page-b", "page-c"} {
		if _, err := c.CreateQueue(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	cursor := ""
	for i := 0; i <= len(all); i++ {
		p, err := c.ListQueuesPage(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Queues) > 2 {
			t.Fatalf("page of %d queues, limit 2", len(p.Queues))
		}
		for _, q := range p.Queues {
			seen = append(seen, q.Name)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != len(all) || !slices.IsSorted(seen) || !slices.Contains(seen, "page-b") {
		t.Fatalf("pages gave %v; ListQueues gave %d queues", seen, len(all))
	}
}

func e2eAdmin(ctx context.Context, t *testing.T, c *Client) {
	if _, err := c.CreateNamespace(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	nss, err := c.ListNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ns := range nss {
		found = found || ns.Name == "billing"
	}
	if !found {
		t.Errorf("namespaces %v lack billing", nss)
	}
	// Two tokens: with one left after the revoke, auth stays on.
	tok, err := c.CreateToken(ctx, "billing", "e2e")
	if err != nil || tok == "" {
		t.Fatalf("token: %v %q", err, tok)
	}
	keep, err := c.CreateToken(ctx, "billing", "e2e keep")
	if err != nil || keep == "" || keep == tok {
		t.Fatalf("second token: %v %q", err, keep)
	}
	billing := New(c.BaseURL(), WithNamespace("billing"), WithToken(tok))
	if _, err := billing.Put(ctx, "invoices", PutOptions{Payload: json.RawMessage(`1`)}); err != nil {
		t.Errorf("put with the namespace token: %v", err)
	}
	if err := c.RevokeToken(ctx, "billing", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := billing.Put(ctx, "invoices", PutOptions{Payload: json.RawMessage(`1`)}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("put with a revoked token: %v, want unauthorized", err)
	}
	other := New(c.BaseURL(), WithToken(keep))
	if _, err := other.ListQueues(ctx); !errors.Is(err, ErrForbidden) {
		t.Errorf("billing token on the default namespace: %v, want forbidden", err)
	}
	if q, err := New(c.BaseURL(), WithNamespace("billing"), WithToken(keep)).GetQueue(ctx, "invoices"); err != nil || q.Counts.Ready != 1 {
		t.Errorf("the kept token: %v %+v", err, q)
	}
}
