package client

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"runtime/debug"
	"time"
)

// Handler processes one job. A nil error acks the job (with result, when
// non-nil; a json.RawMessage is sent as is); an error nacks it with the
// error's text, and the queue's backoff decides when it comes back.
//
// ctx is not cancelled when Consume's context is: the handler gets the
// grace period to finish. It is cancelled when the grace period ends or
// when the reservation was lost (context.Cause is then ErrReservationLost).
type Handler func(ctx context.Context, j *Job) (result any, err error)

// ErrReservationLost is the cause of a handler's context cancellation when
// a touch found that the job is no longer reserved by this worker (its TTR
// ran out first, or it was cancelled or purged).
var ErrReservationLost = errors.New("chronoq: the job's reservation was lost")

// ErrGraceExpired is the cause of a handler's context cancellation when
// the grace period after a stop ran out.
var ErrGraceExpired = errors.New("chronoq: grace period after stop expired")

// ConsumeOption tunes Consume.
type ConsumeOption func(*consumeConfig)

type consumeConfig struct {
	concurrency int
	prefetch    int
	grace       time.Duration
	wait        time.Duration
	ttr         time.Duration
	onError     func(error)
}

// Concurrency is how many handlers run at once (default 1).
func Concurrency(n int) ConsumeOption { return func(c *consumeConfig) { c.concurrency = n } }

// Prefetch is the take batch size (default: the concurrency). Above the
// concurrency, up to m jobs are held at once, the ones not yet started
// waiting for a free handler (and kept reserved meanwhile).
func Prefetch(m int) ConsumeOption { return func(c *consumeConfig) { c.prefetch = m } }

// GracePeriod is how long running handlers may go on after Consume's
// context is cancelled before their own context is (default 30s).
func GracePeriod(d time.Duration) ConsumeOption { return func(c *consumeConfig) { c.grace = d } }

// PollWait is the long-poll wait of each take (default 20s, at most 60s).
func PollWait(d time.Duration) ConsumeOption { return func(c *consumeConfig) { c.wait = d } }

// TakeTTR overrides the jobs' TTR for the reservations Consume makes.
func TakeTTR(d time.Duration) ConsumeOption { return func(c *consumeConfig) { c.ttr = d } }

// OnError receives the errors Consume works around (a failed take, ack,
// nack or touch). It is called from several goroutines at once. Default:
// the standard logger.
func OnError(f func(error)) ConsumeOption { return func(c *consumeConfig) { c.onError = f } }

const (
	maxTakeBatch   = 1000
	maxErrorText   = 8 << 10
	minTouchEvery  = 10 * time.Millisecond
	takeRetryFirst = 100 * time.Millisecond
	takeRetryMax   = 5 * time.Second
)

// Consume runs a worker loop on queues (tried in order) until ctx is
// cancelled: it long-polls for jobs, runs handler on each, acks on success
// and nacks with the error text on failure, and touches each job at about
// half its TTR while it is held.
//
// On cancellation it stops taking, nacks at once (delay 0) the jobs it
// took but never started, so nothing is left to time out silently, and
// waits for running handlers: they get the grace period, then their
// context is cancelled, and their outcome is acked or nacked as usual.
// It returns nil after such a clean stop. It returns an error when the
// server refuses the takes for good (bad request, auth, unknown
// namespace), after the same orderly stop.
func (c *Client) Consume(ctx context.Context, queues []string, handler Handler, opts ...ConsumeOption) error {
	if len(queues) == 0 {
		return errors.New("chronoq: Consume needs at least one queue")
	}
	if handler == nil {
		return errors.New("chronoq: Consume needs a handler")
	}
	cfg := consumeConfig{concurrency: 1, grace: 30 * time.Second, wait: 20 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.concurrency = max(cfg.concurrency, 1)
	if cfg.prefetch <= 0 {
		cfg.prefetch = cfg.concurrency
	}
	cfg.prefetch = min(cfg.prefetch, maxTakeBatch)
	if cfg.onError == nil {
		cfg.onError = func(err error) { log.Printf("chronoq: consume: %v", err) }
	}
	w := &worker{c: c, cfg: cfg, queues: queues, handler: handler}
	return w.run(ctx)
}

// worker is one Consume call. Its state is owned by run's goroutine; the
// take and handler goroutines report back over channels.
type worker struct {
	c       *Client
	cfg     consumeConfig
	queues  []string
	handler Handler
}

// held is a job this worker has reserved: waiting in the prefetch buffer
// or running.
type held struct {
	job    *Job
	ctx    context.Context // the handler's
	cancel context.CancelCauseFunc
	stopKA context.CancelFunc
	kaDone chan struct{}
}

type takeResult struct {
	jobs []*Job
	err  error
}

func (w *worker) run(ctx context.Context) error {
	// Acks, nacks and touches must still go out after ctx is cancelled,
	// so they run under a context that keeps ctx's values only.
	bg := context.WithoutCancel(ctx)
	handlersCtx, cancelHandlers := context.WithCancelCause(bg)
	defer cancelHandlers(nil)

	n := w.cfg.concurrency
	capacity := max(n, w.cfg.prefetch)
	takeCh := make(chan takeResult, 1)
	doneCh := make(chan struct{}, n)
	var (
		buf        []*held
		running    int
		taking     bool
		stopping   bool
		fatal      error
		retryC     <-chan time.Time
		retryDelay time.Duration
		graceT     *time.Timer
		graceC     <-chan time.Time
	)
	stop := func() {
		stopping = true
		graceT = time.NewTimer(w.cfg.grace)
		graceC = graceT.C
	}
	defer func() {
		if graceT != nil {
			graceT.Stop()
		}
	}()

	for {
		for !stopping && running < n && len(buf) > 0 {
			h := buf[0]
			buf = buf[1:]
			running++
			go func() {
				w.process(bg, h)
				doneCh <- struct{}{}
			}()
		}
		if stopping {
			for _, h := range buf {
				w.release(bg, h)
			}
			buf = nil
			if running == 0 && !taking {
				return fatal
			}
		} else if !taking && retryC == nil && len(buf) == 0 && running < n {
			taking = true
			size := min(w.cfg.prefetch, capacity-running)
			go func() {
				jobs, err := w.take(ctx, size)
				takeCh <- takeResult{jobs, err}
			}()
		}

		var ctxDone <-chan struct{}
		if !stopping {
			ctxDone = ctx.Done()
		}
		select {
		case <-ctxDone:
			stop()
		case r := <-takeCh:
			taking = false
			for _, j := range r.jobs {
				buf = append(buf, w.hold(bg, handlersCtx, j))
			}
			switch {
			case r.err == nil:
				retryDelay = 0
			case ctx.Err() != nil:
				// The take was cut short by the stop itself.
			case permanent(r.err):
				w.cfg.onError(fmt.Errorf("take: %w (stopping)", r.err))
				fatal = r.err
				if !stopping {
					stop()
				}
			default:
				w.cfg.onError(fmt.Errorf("take: %w", r.err))
				retryDelay = min(max(2*retryDelay, takeRetryFirst), takeRetryMax)
				retryC = time.After(retryDelay)
			}
		case <-doneCh:
			running--
		case <-retryC:
			retryC = nil
		case <-graceC:
			graceC = nil
			cancelHandlers(ErrGraceExpired)
		}
	}
}

// permanent says whether a take error will not go away by retrying: the
// request itself is wrong or not allowed.
func permanent(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

func (w *worker) take(ctx context.Context, size int) ([]*Job, error) {
	o := TakeOptions{Max: size, TTR: w.cfg.ttr, Wait: w.cfg.wait}
	if len(w.queues) > 1 {
		return w.c.TakeMulti(ctx, w.queues, o)
	}
	jobs, err := w.c.Take(ctx, w.queues[0], o)
	for _, j := range jobs {
		// Acks address the job by queue; never depend on the answer
		// repeating the queue we asked.
		if j.Queue == "" {
			j.Queue = w.queues[0]
		}
	}
	return jobs, err
}

// hold takes custody of a freshly reserved job: from here until its ack or
// nack it is touched before its TTR runs out.
func (w *worker) hold(bg, handlersCtx context.Context, j *Job) *held {
	hctx, cancel := context.WithCancelCause(handlersCtx)
	kaCtx, stopKA := context.WithCancel(bg)
	h := &held{job: j, ctx: hctx, cancel: cancel, stopKA: stopKA, kaDone: make(chan struct{})}
	go w.keepAlive(kaCtx, h)
	return h
}

// keepAlive touches the job every half TTR, counted on the local clock
// from the last touch, so server clock skew does not matter.
func (w *worker) keepAlive(ctx context.Context, h *held) {
	defer close(h.kaDone)
	ttr := h.job.TTR
	if ttr <= 0 {
		ttr = 30 * time.Second
	}
	every := max(ttr/2, minTouchEvery)
	next := every
	t := time.NewTimer(next)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := w.c.Touch(ctx, h.job.Queue, h.job.ID, h.job.Receipt, 0)
		switch {
		case err == nil:
			next = every
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
			w.cfg.onError(fmt.Errorf("touch %s/%s: %w", h.job.Queue, h.job.ID, err))
			h.cancel(ErrReservationLost)
			return
		default:
			// Try again well before the reservation ends.
			w.cfg.onError(fmt.Errorf("touch %s/%s: %w", h.job.Queue, h.job.ID, err))
			next = max(ttr/8, minTouchEvery)
		}
		t.Reset(next)
	}
}

// finish stops the keep-alive and waits for it, so that no touch races the
// ack or nack that follows.
func (h *held) finish() {
	h.stopKA()
	<-h.kaDone
}

// process runs the handler on a held job and settles it.
func (w *worker) process(bg context.Context, h *held) {
	defer h.cancel(nil)
	result, err := w.call(h)
	h.finish()
	j := h.job
	if err == nil && result != nil {
		raw, merr := marshalValue(result)
		if merr != nil {
			err = fmt.Errorf("encoding the handler's result: %w", merr)
		} else {
			result = raw
		}
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText]
		}
		if _, nerr := w.c.Nack(bg, j.Queue, j.ID, j.Receipt, &NackOptions{Error: msg}); nerr != nil {
			w.cfg.onError(fmt.Errorf("nack %s/%s: %w", j.Queue, j.ID, nerr))
		}
		return
	}
	var o *AckOptions
	if result != nil {
		o = &AckOptions{Result: result}
	}
	if _, aerr := w.c.Ack(bg, j.Queue, j.ID, j.Receipt, o); aerr != nil {
		w.cfg.onError(fmt.Errorf("ack %s/%s: %w", j.Queue, j.ID, aerr))
	}
}

// call runs the handler, turning a panic into an error so the job is
// nacked instead of the worker process dying with it reserved.
func (w *worker) call(h *held) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return w.handler(h.ctx, h.job)
}

// release gives back a job that was taken but never started: ready again at
// once. Its attempt was already counted by the take.
func (w *worker) release(bg context.Context, h *held) {
	h.finish()
	h.cancel(nil)
	j := h.job
	zero := time.Duration(0)
	o := &NackOptions{Delay: &zero, Error: "released unstarted: the worker stopped"}
	if _, err := w.c.Nack(bg, j.Queue, j.ID, j.Receipt, o); err != nil {
		w.cfg.onError(fmt.Errorf("release %s/%s: %w", j.Queue, j.ID, err))
	}
}
