package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// The methods below are the broker's public API (they satisfy the HTTP
// layer's Backend interface). Each runs its engine call on the loop.

func call[T any](b *Broker, ctx context.Context, fn func(now time.Time) (T, error)) (T, error) {
	res, err := b.do(ctx, func(now time.Time) (any, error) { return fn(now) })
	if err != nil {
		var zero T
		return zero, err
	}
	return res.(T), nil
}

// callJob is call for the calls that answer one job: the job leaves the
// server, so its payload (and result) are read from the log.
func callJob(b *Broker, ctx context.Context, fn func(now time.Time) (engine.Job, error)) (engine.Job, error) {
	j, err := call(b, ctx, fn)
	if err != nil {
		return j, err
	}
	return j, b.fillJob(&j)
}

// CreateNamespace creates a namespace.
func (b *Broker) CreateNamespace(ctx context.Context, name string, cfg engine.NamespaceConfig) (engine.NamespaceInfo, bool, error) {
	type r struct {
		info    engine.NamespaceInfo
		created bool
	}
	res, err := call(b, ctx, func(now time.Time) (r, error) {
		info, created, err := b.eng.CreateNamespace(now, name, cfg)
		if err == nil {
			b.chans.hub.Configure(name, hubConfig(info.Config.Channels))
		}
		return r{info, created}, err
	})
	return res.info, res.created, err
}

// ConfigureNamespace creates a namespace or changes its configuration;
// update runs on the loop, so read-modify-write is atomic.
func (b *Broker) ConfigureNamespace(ctx context.Context, name string, update func(cur engine.NamespaceConfig) (engine.NamespaceConfig, error)) (engine.NamespaceInfo, bool, error) {
	type r struct {
		info    engine.NamespaceInfo
		created bool
	}
	res, err := call(b, ctx, func(now time.Time) (r, error) {
		cur := engine.NamespaceConfig{AutoCreateQueues: true}
		if info, err := b.eng.Namespace(name); err == nil {
			cur = info.Config
		}
		cfg, err := update(cur)
		if err != nil {
			return r{}, err
		}
		info, created, err := b.eng.ConfigureNamespace(now, name, cfg)
		if err == nil {
			b.chans.hub.Configure(name, hubConfig(info.Config.Channels))
		}
		return r{info, created}, err
	})
	return res.info, res.created, err
}

// Namespace returns one namespace.
func (b *Broker) Namespace(ctx context.Context, name string) (engine.NamespaceInfo, error) {
	return call(b, ctx, func(time.Time) (engine.NamespaceInfo, error) { return b.eng.Namespace(name) })
}

// ListNamespaces lists the namespaces.
func (b *Broker) ListNamespaces(ctx context.Context) ([]engine.NamespaceInfo, error) {
	return call(b, ctx, func(time.Time) ([]engine.NamespaceInfo, error) { return b.eng.Namespaces(), nil })
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// CreateToken makes a new namespace token; only its hash is stored.
func (b *Broker) CreateToken(ctx context.Context, ns, desc string) (string, error) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("broker: token entropy: %w", err)
	}
	tok := "cq_" + hex.EncodeToString(raw[:])
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		err := b.eng.AddToken(now, ns, hashToken(tok), desc)
		b.refreshTokens()
		return struct{}{}, err
	})
	return tok, err
}

// RevokeToken forgets a namespace token.
func (b *Broker) RevokeToken(ctx context.Context, ns, tok string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		err := b.eng.RevokeToken(now, ns, hashToken(tok))
		b.refreshTokens()
		return struct{}{}, err
	})
	return err
}

// refreshTokens copies the token table for lock-free-ish reads off the
// loop. Runs on the loop (or before it starts).
func (b *Broker) refreshTokens() {
	t := b.eng.Tokens()
	b.tokMu.Lock()
	b.tokens = t
	b.tokMu.Unlock()
	if fn := b.onTokens.Load(); fn != nil {
		(*fn)()
	}
}

// OnTokensChanged installs fn, called (on the broker's loop: it must not
// block) after namespace tokens are created or revoked.
func (b *Broker) OnTokensChanged(fn func()) { b.onTokens.Store(&fn) }

// TokenNamespace returns the namespace of a token.
func (b *Broker) TokenNamespace(tok string) (string, bool) {
	b.tokMu.RLock()
	defer b.tokMu.RUnlock()
	ns, ok := b.tokens[hashToken(tok)]
	return ns, ok
}

// HasTokens reports whether any namespace token exists.
func (b *Broker) HasTokens() bool {
	b.tokMu.RLock()
	defer b.tokMu.RUnlock()
	return len(b.tokens) > 0
}

// PutQueue creates or configures a queue.
func (b *Broker) PutQueue(ctx context.Context, ns, q string, p engine.QueuePatch) (engine.QueueInfo, bool, error) {
	type r struct {
		info    engine.QueueInfo
		created bool
	}
	res, err := call(b, ctx, func(now time.Time) (r, error) {
		info, created, err := b.eng.PutQueue(now, ns, q, p)
		return r{info, created}, err
	})
	return res.info, res.created, err
}

// GetQueue describes a queue.
func (b *Broker) GetQueue(ctx context.Context, ns, q string) (engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) (engine.QueueInfo, error) { return b.eng.Queue(now, ns, q) })
}

// ListQueues describes the queues of a namespace.
func (b *Broker) ListQueues(ctx context.Context, ns string) ([]engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) ([]engine.QueueInfo, error) { return b.eng.Queues(now, ns) })
}

// QueuePage describes one page of the queues of a namespace.
func (b *Broker) QueuePage(ctx context.Context, ns string, req engine.QueueListRequest) (engine.QueueList, error) {
	return call(b, ctx, func(now time.Time) (engine.QueueList, error) { return b.eng.QueuePage(now, ns, req) })
}

// AllQueues describes every queue (metrics).
func (b *Broker) AllQueues(ctx context.Context) ([]engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) ([]engine.QueueInfo, error) { return b.eng.AllQueues(now), nil })
}

// SetPaused pauses or resumes a queue.
func (b *Broker) SetPaused(ctx context.Context, ns, q string, paused bool) (engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) (engine.QueueInfo, error) { return b.eng.SetPaused(now, ns, q, paused) })
}

// PauseFor pauses a queue for d (0 resumes).
func (b *Broker) PauseFor(ctx context.Context, ns, q string, d time.Duration) (engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) (engine.QueueInfo, error) { return b.eng.PauseFor(now, ns, q, d) })
}

// PurgeQueue deletes every job of a queue.
func (b *Broker) PurgeQueue(ctx context.Context, ns, q string) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) {
		if err := b.far.bringQueue(now, ns, q, nil); err != nil {
			return 0, err
		}
		return b.eng.PurgeQueue(now, ns, q)
	})
}

// DeleteQueue deletes a queue.
func (b *Broker) DeleteQueue(ctx context.Context, ns, q string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		if err := b.far.bringQueue(now, ns, q, nil); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.eng.DeleteQueue(now, ns, q)
	})
	return err
}

// Put enqueues a job.
func (b *Broker) Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	if b.closing.Load() {
		return engine.PutResult{}, errClosed
	}
	r := newRequest()
	r.put = putArgs{on: true, ns: ns, q: q, req: req}
	if err := b.submit(ctx, r); err != nil {
		r.release()
		return engine.PutResult{}, err
	}
	b.await(r)
	return r.putAnswer()
}

// putAnswer reads a put's answer and recycles its request.
func (r *request) putAnswer() (engine.PutResult, error) {
	res, err := r.put.res, r.err
	r.release()
	if err != nil {
		return engine.PutResult{}, err
	}
	return res, nil
}

// putNow runs a put on the loop.
func (b *Broker) putNow(now time.Time, p *putArgs) (engine.PutResult, error) {
	if err := b.far.bringPut(now, p.ns, p.q, &p.req); err != nil {
		return engine.PutResult{}, err
	}
	return b.eng.Put(now, p.ns, p.q, p.req)
}

// PutQueued hands a put to the loop and returns without waiting for it;
// wait gives its durable answer, and must be called exactly once. Puts
// queued one after another by one goroutine run in that order, since the
// loop takes requests first come, first served: a connection can have
// several puts in flight, pipelined behind one another, and still have its
// jobs numbered in the order it sent them. req.Payload must stay unchanged
// until wait returns.
func (b *Broker) PutQueued(ctx context.Context, ns, q string, req engine.PutRequest) (wait func() (engine.PutResult, error)) {
	fail := func(err error) func() (engine.PutResult, error) {
		return func() (engine.PutResult, error) { return engine.PutResult{}, err }
	}
	if b.closing.Load() {
		return fail(errClosed)
	}
	r := newRequest()
	r.put = putArgs{on: true, ns: ns, q: q, req: req}
	if err := b.submit(ctx, r); err != nil {
		r.release()
		return fail(err)
	}
	return func() (engine.PutResult, error) {
		b.await(r)
		return r.putAnswer()
	}
}

// PutBatch enqueues jobs atomically.
func (b *Broker) PutBatch(ctx context.Context, ns, q string, reqs []engine.PutRequest) ([]engine.PutResult, error) {
	return call(b, ctx, func(now time.Time) ([]engine.PutResult, error) {
		for i := range reqs {
			if err := b.far.bringPut(now, ns, q, &reqs[i]); err != nil {
				return nil, err
			}
		}
		return b.eng.PutBatch(now, ns, q, reqs)
	})
}

// Take reserves jobs, waiting up to wait for at least one.
func (b *Broker) Take(ctx context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error) {
	w := &waiter{ns: ns, take: &req, idx: -1}
	res, err := b.parked(ctx, w, func(now time.Time) (any, bool, error) {
		jobs, err := b.eng.Take(now, ns, req)
		if err != nil || len(jobs) > 0 || wait <= 0 || b.draining.Load() {
			return jobs, false, err
		}
		w.deadline = now.Add(wait)
		return nil, true, nil
	})
	if err != nil {
		return nil, err
	}
	jobs, _ := res.([]engine.Job)
	return jobs, b.fill(jobs)
}

// parked runs fn on the loop; if fn asks to park, the request waits as w
// until the loop answers it. If ctx ends first the waiter is marked gone
// and the loop is nudged to drop it.
func (b *Broker) parked(ctx context.Context, w *waiter, fn func(now time.Time) (any, bool, error)) (any, error) {
	if b.closing.Load() {
		return nil, errClosed
	}
	r := &request{done: make(chan struct{}, 1)}
	w.req = r
	r.fn = func(now time.Time) (any, error) {
		res, park, err := fn(now)
		if park {
			b.waiters.park(w)
		}
		return res, err
	}
	if err := b.submit(ctx, r); err != nil {
		return nil, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		w.gone.Store(true)
		go b.do(context.Background(), func(time.Time) (any, error) { return nil, nil })
		b.await(r)
	case <-b.done:
		b.await(r)
	}
	return r.res, r.err
}

// Ack acknowledges a reservation.
func (b *Broker) Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error) {
	return call(b, ctx, func(now time.Time) (engine.AckResult, error) { return b.eng.Ack(now, ns, q, id, req) })
}

// AckAndTake acknowledges a reservation and reserves the worker's next
// jobs in the same loop turn, so both entries share one fsync and the
// worker one round trip. With wait the take long-polls like Take; the ack
// is done (and durable before any answer) whatever the take finds.
func (b *Broker) AckAndTake(ctx context.Context, ns, q, id string, req engine.AckRequest, take engine.TakeRequest, wait time.Duration) (engine.AckResult, []engine.Job, error) {
	var ack engine.AckResult
	w := &waiter{ns: ns, take: &take, idx: -1}
	res, err := b.parked(ctx, w, func(now time.Time) (any, bool, error) {
		r, jobs, err := b.eng.AckAndTake(now, ns, q, id, req, take)
		if err != nil {
			return nil, false, err
		}
		ack = r // written on the loop before the request completes
		if len(jobs) > 0 || wait <= 0 || b.draining.Load() {
			return jobs, false, nil
		}
		w.deadline = now.Add(wait)
		return nil, true, nil
	})
	if err != nil {
		return engine.AckResult{}, nil, err
	}
	jobs, _ := res.([]engine.Job)
	return ack, jobs, b.fill(jobs)
}

// AckBatch acknowledges many reservations of one queue in one log entry,
// all or none.
func (b *Broker) AckBatch(ctx context.Context, ns, q string, items []engine.AckItem) ([]engine.AckResult, error) {
	return call(b, ctx, func(now time.Time) ([]engine.AckResult, error) { return b.eng.AckBatch(now, ns, q, items) })
}

// Nack gives a reservation back.
func (b *Broker) Nack(ctx context.Context, ns, q, id string, req engine.NackRequest) (engine.State, error) {
	return call(b, ctx, func(now time.Time) (engine.State, error) { return b.eng.Nack(now, ns, q, id, req) })
}

// Touch extends a reservation.
func (b *Broker) Touch(ctx context.Context, ns, q, id string, req engine.TouchRequest) (time.Time, error) {
	return call(b, ctx, func(now time.Time) (time.Time, error) { return b.eng.Touch(now, ns, q, id, req) })
}

// Bury moves a reserved job to dead.
func (b *Broker) Bury(ctx context.Context, ns, q, id string, req engine.BuryRequest) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) { return struct{}{}, b.eng.Bury(now, ns, q, id, req) })
	return err
}

// Peek returns a job without changing it.
func (b *Broker) Peek(ctx context.Context, ns, q, id string) (engine.Job, error) {
	return callJob(b, ctx, func(now time.Time) (engine.Job, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return engine.Job{}, err
		}
		return b.eng.Peek(now, ns, q, id)
	})
}

// List pages through jobs.
func (b *Broker) List(ctx context.Context, ns, q string, req engine.ListRequest) (engine.ListResult, error) {
	res, err := call(b, ctx, func(now time.Time) (engine.ListResult, error) { return b.far.list(now, ns, q, req) })
	if err != nil {
		return res, err
	}
	return res, b.fill(res.Jobs)
}

// Update patches a job.
func (b *Broker) Update(ctx context.Context, ns, q, id string, req engine.UpdateRequest) (engine.Job, error) {
	return callJob(b, ctx, func(now time.Time) (engine.Job, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return engine.Job{}, err
		}
		return b.eng.Update(now, ns, q, id, req)
	})
}

// Cancel deletes a job.
func (b *Broker) Cancel(ctx context.Context, ns, q, id, receipt string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.eng.Cancel(now, ns, q, id, receipt)
	})
	return err
}

// CancelByFilter deletes matching jobs.
func (b *Broker) CancelByFilter(ctx context.Context, ns, q string, f engine.Filter) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) {
		if farMayMatch(f) {
			if err := b.far.bringQueue(now, ns, q, f.Tags); err != nil {
				return 0, err
			}
		}
		return b.eng.CancelByFilter(now, ns, q, f)
	})
}

// Respawn brings dead jobs back.
func (b *Broker) Respawn(ctx context.Context, ns, q string, req engine.RespawnRequest) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.Respawn(now, ns, q, req) })
}

// PurgeDead deletes dead jobs.
func (b *Broker) PurgeDead(ctx context.Context, ns, q string) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.PurgeDead(now, ns, q) })
}

// Result waits up to wait for a job to complete.
func (b *Broker) Result(ctx context.Context, ns, q, id string, wait time.Duration) (engine.ResultInfo, bool, error) {
	w := &waiter{ns: ns, q: q, id: id, idx: -1}
	res, err := b.parked(ctx, w, func(now time.Time) (any, bool, error) {
		info, err := b.eng.Result(now, ns, q, id)
		if err != nil || info.State == engine.StateCompleted || wait <= 0 || b.draining.Load() {
			return resultWait{info: info, done: err == nil && info.State == engine.StateCompleted}, false, err
		}
		w.deadline = now.Add(wait)
		return nil, true, nil
	})
	if err != nil {
		return engine.ResultInfo{}, false, err
	}
	rw, _ := res.(resultWait)
	if rw.done {
		rw.info.ResultData, err = b.blob(rw.info.Result, rw.info.HasResult)
		for try := 0; try < relocatedRetries && errors.Is(err, wal.ErrSegmentGone); try++ {
			// moved by compaction meanwhile (fillJob)
			cur, rerr := call(b, ctx, func(now time.Time) (engine.ResultInfo, error) { return b.eng.Result(now, ns, q, id) })
			if rerr != nil {
				break
			}
			rw.info.ResultData, err = b.blob(cur.Result, rw.info.HasResult)
		}
	}
	return rw.info, rw.done, err
}

// callRetention is how long a call's own result is kept (docs/api.md, call).
const callRetention = time.Minute

// Call puts a job and waits for its result.
func (b *Broker) Call(ctx context.Context, ns, q string, req engine.PutRequest, wait time.Duration) (engine.ResultInfo, bool, error) {
	req.RetainResult = callRetention
	put, err := b.Put(ctx, ns, q, req)
	if err != nil {
		return engine.ResultInfo{}, false, err
	}
	info, done, err := b.Result(ctx, ns, q, put.ID, wait)
	info.ID = put.ID
	if err == nil && !done && info.State == engine.StateNone {
		info.State = put.State
	}
	return info, done, err
}

// fill reads payload and result bytes for jobs leaving the server.
func (b *Broker) fill(jobs []engine.Job) error {
	for i := range jobs {
		if jobs[i].Data != nil {
			continue // a far job, listed with its payload from its bucket (far.go)
		}
		if err := b.fillJob(&jobs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Housekeeping never fails a read: compaction may move a job's payload or
// result and drop the old segment between the loop's answer and the read
// here, so a read of a removed segment asks the loop where the bytes are
// now and reads them there (a few times: a move can race again).
const relocatedRetries = 3

func (b *Broker) fillJob(j *engine.Job) error {
	err := b.readJob(j)
	for try := 0; try < relocatedRetries && errors.Is(err, wal.ErrSegmentGone); try++ {
		cur, perr := call(b, context.Background(), func(now time.Time) (engine.Job, error) {
			return b.eng.Peek(now, j.Namespace, j.Queue, j.ID)
		})
		if perr != nil {
			break
		}
		j.Payload, j.Result = cur.Payload, cur.Result
		err = b.readJob(j)
	}
	return err
}

func (b *Broker) readJob(j *engine.Job) error {
	data, err := b.blob(j.Payload, true)
	if err != nil {
		return err
	}
	j.Data = data
	if j.HasResult {
		if j.ResultData, err = b.blob(j.Result, true); err != nil {
			return err
		}
		if j.Result == (engine.BlobRef{}) {
			j.ResultData = []byte("null")
		}
	}
	return nil
}

func (b *Broker) blob(ref engine.BlobRef, has bool) ([]byte, error) {
	if !has {
		return nil, nil
	}
	if ref.Len == 0 {
		if ref == (engine.BlobRef{}) {
			return []byte("null"), nil
		}
		return []byte{}, nil
	}
	data, err := b.log.ReadAt(ref.Segment, ref.Offset, ref.Len)
	if err != nil {
		return nil, &blobError{unavailable("reading payload at segment %d offset %d: %v", ref.Segment, ref.Offset, err), err}
	}
	return data, nil
}

// blobError is the unavailable answer to a failed blob read that still
// lets the caller see why (errors.Is ErrSegmentGone: read again).
type blobError struct {
	answer error // what the client sees (*engine.Error)
	cause  error
}

func (e *blobError) Error() string { return e.answer.Error() }

func (e *blobError) Unwrap() []error { return []error{e.answer, e.cause} }

// Stats returns the engine counters.
func (b *Broker) Stats(ctx context.Context) (engine.Stats, error) {
	return call(b, ctx, func(time.Time) (engine.Stats, error) { return b.eng.Stats(), nil })
}

// EngineStats returns the process-wide engine counters.
func (b *Broker) EngineStats(ctx context.Context) (engine.Stats, error) { return b.Stats(ctx) }
