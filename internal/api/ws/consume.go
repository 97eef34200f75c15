package ws

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/gorilla/websocket"
)

// A consumer pushes jobs to a worker's socket with credit flow control: at
// most prefetch jobs are pushed and not yet acked, nacked or buried. It is
// one goroutine long-polling the broker's Take for as many jobs as it has
// credit, so pushing costs no broker changes and shares the waiters that
// HTTP long-polls use.
//
// When the socket closes, every job pushed and not settled is nacked with
// delay 0: it is available again at once instead of after its TTR. A
// closed socket is certain news that this worker will never ack (its acks
// travel on that socket), and waiting out a 30 s or 30 min TTR would only
// delay the job; attempts were counted when the job was taken, so a job
// that kills its workers still runs out of tries. beanstalkd releases a
// dropped connection's jobs the same way.
type consumer struct {
	c        *conn
	ns       string
	queues   []string
	ttr      *time.Duration
	prefetch int

	mu       sync.Mutex
	inflight map[jobKey]string // pushed, unsettled → receipt
	stopped  bool

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

type jobKey struct{ queue, id string }

func (c *conn) queueCommand(cmd command, more bool) {
	switch cmd.Op {
	case "consume":
		c.consume(cmd)
	case "stop":
		c.stop(cmd)
	case "put":
		// In order, like publish: a producer's puts land in the order it
		// sent them.
		var b putBody
		if err := decodePutBody(cmd.Body, &b); err != nil {
			c.settlePuts()
			c.replyError(cmd.ID, err)
			return
		}
		ns, req, err := c.putRequest(&b)
		if err != nil {
			c.settlePuts()
			c.replyError(cmd.ID, err)
			return
		}
		if more || len(c.queued) > 0 {
			// The client pipelines: more commands came with this one.
			// Hand the put to the broker and go on, so the puts of one
			// read share a loop turn and an fdatasync instead of waiting
			// for one each (docs/realtime.md); settlePuts answers them
			// in order before any other answer.
			wait := c.s.b.PutQueued(context.Background(), ns, b.Queue, req)
			c.queued = append(c.queued, queuedPut{id: cmd.ID, wait: wait})
			if !more {
				c.settlePuts()
			}
			return
		}
		r, err := c.s.b.Put(context.Background(), ns, b.Queue, req)
		if err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		// Written by hand: encoding/json's reflection on this answer was
		// the put path's largest cost after decoding (docs/benchmarks.md).
		c.replyPut(cmd.ID, r)
	case "ack", "nack", "touch", "bury":
		if c.sem == nil {
			c.sem = make(chan struct{}, c.s.opts.MaxInflight)
		}
		// Waiting for a slot stops reading, which is TCP backpressure on
		// a worker that acks faster than the disk syncs.
		c.sem <- struct{}{}
		c.async.Add(1)
		go func() {
			defer func() { <-c.sem; c.async.Done() }()
			defer c.recoverPanic("settle", nil)
			c.settle(cmd)
		}()
	}
}

func (c *conn) queueNS(ns string) (string, error) {
	if ns == "" {
		ns = c.id.defaultNS()
	}
	if !engine.ValidNamespaceName(ns) {
		return "", badRequest("namespace: invalid name %q", ns)
	}
	return ns, c.id.canQueues(ns)
}

// putRequest checks a put's namespace, queue and job.
func (c *conn) putRequest(b *putBody) (ns string, req engine.PutRequest, err error) {
	if ns, err = c.queueNS(b.Namespace); err != nil {
		return "", req, err
	}
	if !engine.ValidQueueName(b.Queue) {
		return "", req, badRequest("queue: invalid queue name %q", b.Queue)
	}
	req, err = b.request(c.s.opts.MaxPayload)
	return ns, req, err
}

// queuedPut is a pipelined put handed to the broker and not yet answered.
type queuedPut struct {
	id   uint64
	wait func() (engine.PutResult, error)
}

// settlePuts waits for the queued puts in the order they were sent and
// answers them, the answers of a run of puts in one socket write.
func (c *conn) settlePuts() {
	if len(c.queued) == 0 {
		return
	}
	var out, msg []byte
	n := 0 // answers in out
	flush := func() {
		if n > 0 {
			c.sendNow(outMsg{kind: kindFrame, bounded: true, data: out, n: n})
			out, n = nil, 0
		}
	}
	for i, p := range c.queued {
		r, err := p.wait()
		c.queued[i] = queuedPut{}
		if err != nil {
			flush()
			c.replyError(p.id, err)
			continue
		}
		msg = appendPutReply(msg[:0], p.id, r)
		out = appendFrame(out, websocket.TextMessage, msg)
		n++
	}
	c.queued = c.queued[:0]
	flush()
}

// settle runs ack, nack, touch or bury. The answer is queued before the
// job's credit is returned, so the client always hears "acked" before the
// job that replaces it arrives: counting unanswered pushes on its side
// never exceeds prefetch.
func (c *conn) settle(cmd command) {
	var ref *jobRef
	var call func(ctx context.Context, ns string) (any, error)
	switch cmd.Op {
	case "ack":
		var b ackBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		req := engine.AckRequest{Receipt: b.Receipt}
		if len(b.Result) > 0 {
			data, err := compactJSON("result", b.Result, c.s.opts.MaxPayload)
			if err != nil {
				c.replyError(cmd.ID, err)
				return
			}
			req.HasResult, req.Result, req.ResultJSON = true, data, true
		}
		ref = &b.jobRef
		call = func(ctx context.Context, ns string) (any, error) {
			r, err := c.s.b.Ack(ctx, ns, b.Queue, b.ID, req)
			return map[string]string{"state": r.State}, err
		}
	case "nack":
		var b nackBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		if b.Delay != nil && time.Duration(*b.Delay) > engine.MaxDelay {
			c.replyError(cmd.ID, badRequest("delay: must be at most %s", engine.MaxDelay))
			return
		}
		ref = &b.jobRef
		call = func(ctx context.Context, ns string) (any, error) {
			st, err := c.s.b.Nack(ctx, ns, b.Queue, b.ID, engine.NackRequest{Receipt: b.Receipt, Delay: b.Delay.ptr(), Error: b.Error})
			return map[string]string{"state": st.String()}, err
		}
	case "touch":
		var b touchBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		ref = &b.jobRef
		call = func(ctx context.Context, ns string) (any, error) {
			until, err := c.s.b.Touch(ctx, ns, b.Queue, b.ID, engine.TouchRequest{Receipt: b.Receipt, TTR: b.TTR.ptr()})
			return map[string]string{"reserved_until": until.UTC().Format(timeLayout)}, err
		}
	case "bury":
		var b buryBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		ref = &b.jobRef
		call = func(ctx context.Context, ns string) (any, error) {
			return struct{}{}, c.s.b.Bury(ctx, ns, b.Queue, b.ID, engine.BuryRequest{Receipt: b.Receipt, Reason: b.Reason})
		}
	}
	ns, err := c.queueNS(ref.Namespace)
	if err == nil && (!engine.ValidQueueName(ref.Queue) || ref.ID == "") {
		err = badRequest("queue and id: name the job (as pushed: its queue and id)")
	}
	if err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	res, err := call(context.Background(), ns)
	if err != nil {
		c.replyError(cmd.ID, err)
	} else {
		c.reply(cmd.ID, res)
	}
	if cmd.Op != "touch" {
		c.settled(ns, ref, err)
	}
}

// settled returns a job's credit when the call settled the reservation
// this connection was pushed: it named that reservation's receipt, and
// either succeeded or found the reservation gone (expired and re-taken,
// deleted). A wrong receipt or a failed write leaves the job ours.
func (c *conn) settled(ns string, ref *jobRef, err error) {
	k := c.cons.Load()
	if k == nil || k.ns != ns {
		return
	}
	if err != nil {
		switch engine.CodeOf(err) {
		case engine.CodeConflict, engine.CodeJobNotFound, engine.CodeQueueNotFound:
		default:
			return
		}
	}
	key := jobKey{ref.Queue, ref.ID}
	k.mu.Lock()
	r, ok := k.inflight[key]
	ok = ok && r == ref.Receipt
	if ok {
		delete(k.inflight, key)
	}
	k.mu.Unlock()
	if ok {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

func (c *conn) consume(cmd command) {
	var b consumeBody
	if err := decodeBody(cmd.Body, &b); err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	if c.cons.Load() != nil {
		c.replyError(cmd.ID, errf("conflict", "this connection already consumes; open another for other queues"))
		return
	}
	ns, err := c.queueNS(b.Namespace)
	if err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	if len(b.Queues) == 0 {
		c.replyError(cmd.ID, badRequest("queues: missing: list at least one queue"))
		return
	}
	for _, q := range b.Queues {
		if !engine.ValidQueueName(q) {
			c.replyError(cmd.ID, badRequest("queues: invalid queue name %q", q))
			return
		}
	}
	prefetch := 1
	if b.Prefetch != nil {
		prefetch = *b.Prefetch
	}
	if prefetch < 1 || prefetch > c.s.opts.MaxPrefetch {
		c.replyError(cmd.ID, badRequest("prefetch: must be from 1 to %d", c.s.opts.MaxPrefetch))
		return
	}
	ttr := b.TTR.ptr()
	if ttr != nil && (*ttr < time.Millisecond || *ttr > engine.MaxTTR) {
		c.replyError(cmd.ID, badRequest("ttr: must be between 1ms and %s", engine.MaxTTR))
		return
	}
	k := &consumer{c: c, ns: ns, queues: b.Queues, ttr: ttr, prefetch: prefetch,
		inflight: map[jobKey]string{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	// The first take runs here, before the answer, so that a namespace or
	// queue the broker refuses is this command's error, not a silent
	// consumer that never gets anything.
	jobs, err := c.s.b.Take(k.ctx, ns, k.takeRequest(prefetch), 0)
	if err != nil {
		k.cancel()
		c.replyError(cmd.ID, err)
		return
	}
	c.cons.Store(k)
	c.reply(cmd.ID, map[string]any{"namespace": ns, "queues": b.Queues, "prefetch": prefetch})
	k.deliver(jobs)
	go k.run()
}

func (k *consumer) takeRequest(n int) engine.TakeRequest {
	return engine.TakeRequest{Queues: k.queues, Max: min(n, engine.MaxTake), TTR: k.ttr}
}

func (k *consumer) credit() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return 0
	}
	return k.prefetch - len(k.inflight)
}

func (k *consumer) run() {
	defer close(k.done)
	defer k.c.recoverPanic("consumer", nil)
	backoff := 10 * time.Millisecond
	for k.ctx.Err() == nil {
		n := k.credit()
		if n <= 0 {
			select {
			case <-k.wake:
			case <-k.ctx.Done():
			}
			continue
		}
		jobs, err := k.c.s.b.Take(k.ctx, k.ns, k.takeRequest(n), k.c.s.opts.ConsumeWait)
		if k.ctx.Err() != nil {
			// A take that was answered as we were cancelled still holds
			// reservations: give them back.
			k.giveBack(jobs)
			return
		}
		if err != nil {
			k.c.s.log.Warn("push consumer take failed; retrying", "ns", k.ns, "err", err)
			select {
			case <-time.After(backoff):
			case <-k.ctx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		k.deliver(jobs)
	}
}

// deliver records jobs as in flight, then pushes them. Recording first
// means a push that fails (the socket is closing) leaves the job in
// inflight, where teardown finds and nacks it.
func (k *consumer) deliver(jobs []engine.Job) {
	if len(jobs) == 0 {
		return
	}
	k.mu.Lock()
	for i := range jobs {
		k.inflight[jobKey{jobs[i].Queue, jobs[i].ID}] = jobs[i].Receipt
	}
	k.mu.Unlock()
	for i := range jobs {
		k.c.push(map[string]any{"job": wireenc.Job(&jobs[i])}, false)
	}
}

func (k *consumer) giveBack(jobs []engine.Job) {
	for i := range jobs {
		k.nack(jobs[i].Queue, jobs[i].ID, jobs[i].Receipt)
	}
}

func (k *consumer) nack(q, id, receipt string) {
	var zero time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := k.c.s.b.Nack(ctx, k.ns, q, id, engine.NackRequest{Receipt: receipt, Delay: &zero, Error: "worker connection closed"})
	var ee *engine.Error
	if err != nil && !(errors.As(err, &ee) && (ee.Code == engine.CodeConflict || ee.Code == engine.CodeJobNotFound || ee.Code == engine.CodeQueueNotFound)) {
		k.c.s.log.Warn("could not give back a pushed job; it returns after its TTR", "ns", k.ns, "queue", q, "id", id, "err", err)
	}
}

// stop ends pushing: no job is pushed after the answer. Jobs already
// pushed stay reserved to this connection for it to settle.
func (c *conn) stop(cmd command) {
	if err := decodeBody(cmd.Body, &struct{}{}); err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	k := c.cons.Load()
	if k == nil {
		c.replyError(cmd.ID, errf("conflict", "not consuming"))
		return
	}
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	k.cancel()
	<-k.done
	k.mu.Lock()
	n := len(k.inflight)
	k.mu.Unlock()
	c.reply(cmd.ID, map[string]int{"unacked": n})
}

// stopConsumer runs at teardown: stop taking, let running acks finish
// (an ack that made it should win over our nack), then nack the rest in
// the background, tracked so that Shutdown waits for it.
func (c *conn) stopConsumer() {
	c.async.Wait()
	k := c.cons.Load()
	if k == nil {
		return
	}
	k.cancel()
	<-k.done
	k.mu.Lock()
	left := k.inflight
	k.inflight = map[jobKey]string{}
	k.mu.Unlock()
	if len(left) == 0 {
		return
	}
	c.s.bg.Add(1)
	go func() {
		defer c.s.bg.Done()
		defer c.recoverPanic("nack", nil)
		for key, receipt := range left {
			k.nack(key.queue, key.id, receipt)
		}
	}()
}
