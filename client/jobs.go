package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/wire"
)

// Put puts one job into queue q. Unless p opts out, it carries an
// idempotency key (p's or a generated one), which makes it safe to retry.
func (c *Client) Put(ctx context.Context, q string, p PutOptions) (*PutResult, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	w, err := p.wire(true)
	if err != nil {
		return nil, err
	}
	var out PutResult
	req := request{method: http.MethodPost, path: c.queuePath(q) + "/jobs", body: w, retry: w.IdempotencyKey != ""}
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutBatch puts up to 1000 jobs into queue q, all or nothing; the answers
// are in order. Each job gets an idempotency key as in Put; the batch is
// retried only when every job has one.
func (c *Client) PutBatch(ctx context.Context, q string, jobs []PutOptions) ([]PutResult, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	body := struct {
		Jobs []wire.Put `json:"jobs"`
	}{Jobs: make([]wire.Put, len(jobs))}
	retry := true
	for i := range jobs {
		w, err := jobs[i].wire(true)
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		retry = retry && w.IdempotencyKey != ""
		body.Jobs[i] = w
	}
	var out struct {
		Jobs []PutResult `json:"jobs"`
	}
	req := request{method: http.MethodPost, path: c.queuePath(q) + "/jobs/batch", body: body, retry: retry}
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// TakeOptions tune a take. The zero value takes one job without waiting,
// with the job's own TTR.
type TakeOptions struct {
	Max  int           // jobs at most (1–1000); 0: 1
	TTR  time.Duration // this reservation's TTR; 0: the job's
	Wait time.Duration // long-poll up to this (≤ 60s); 0: answer at once
}

type takeWire struct {
	Queues []string `json:"queues,omitempty"`
	Max    int      `json:"max,omitempty"`
	TTR    string   `json:"ttr,omitempty"`
	Wait   string   `json:"wait,omitempty"`
}

func (o TakeOptions) wire(queues []string) takeWire {
	w := takeWire{Queues: queues, Max: o.Max}
	if o.TTR > 0 {
		w.TTR = fmtDuration(o.TTR)
	}
	if o.Wait > 0 {
		w.Wait = fmtDuration(o.Wait)
	}
	return w
}

// Take reserves jobs from queue q. An empty answer (no error) means none
// was ready within o.Wait. Take is not retried: a lost answer may have
// reserved jobs, which then come back after their TTR.
func (c *Client) Take(ctx context.Context, q string, o TakeOptions) ([]*Job, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	return c.take(ctx, c.queuePath(q)+"/take", o.wire(nil), o.Wait)
}

// TakeMulti reserves jobs from several queues, tried in the given order.
func (c *Client) TakeMulti(ctx context.Context, queues []string, o TakeOptions) ([]*Job, error) {
	if len(queues) == 0 {
		return nil, errors.New("chronoq: TakeMulti needs at least one queue")
	}
	return c.take(ctx, c.nsPath()+"/take", o.wire(queues), o.Wait)
}

func (c *Client) take(ctx context.Context, path string, body takeWire, wait time.Duration) ([]*Job, error) {
	var out struct {
		Jobs []*Job `json:"jobs"`
	}
	req := request{method: http.MethodPost, path: path, body: body, extraTime: wait}
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// AckOptions are ack's optional parts.
type AckOptions struct {
	// Result is stored (retaining queue) and/or sent to reply_to. Anything
	// json.Marshal takes; a json.RawMessage is sent as is. Nil: no result.
	Result any
	// Next is put atomically with the ack.
	Next *NextPut
	// Reschedule keeps the job (same id) and makes it delayed again.
	Reschedule *Reschedule
	// Take, when set, reserves the worker's next jobs in the same request,
	// after the ack (AckResult.Jobs): one round trip per job instead of
	// two. The ack stands whatever the take finds; Take.Wait long-polls.
	Take *TakeOptions
	// TakeQueues are the take's queues, tried in order; empty: the acked
	// job's queue.
	TakeQueues []string
}

// NextPut is a job put atomically with an ack; Queue empty means the acked
// job's queue.
type NextPut struct {
	Queue string
	PutOptions
}

// Reschedule moves an acked job back to delayed: after Delay or at At.
type Reschedule struct {
	Delay time.Duration
	At    time.Time
}

// AckResult is ack's answer: State is "completed", "deleted" or "delayed";
// NextID is the id of the Next job, if one was given; Jobs are the jobs
// reserved by AckOptions.Take (none when nothing came within its wait).
type AckResult struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	NextID string `json:"next_id,omitempty"`
	Jobs   []*Job `json:"jobs,omitempty"`
}

// Ack finishes a reserved job. A wrong or expired receipt is ErrConflict.
func (c *Client) Ack(ctx context.Context, q, id, receipt string, o *AckOptions) (*AckResult, error) {
	if err := c.checkJob(q, id); err != nil {
		return nil, err
	}
	body := map[string]any{"receipt": receipt}
	if o != nil {
		if o.Result != nil {
			raw, err := marshalValue(o.Result)
			if err != nil {
				return nil, fmt.Errorf("chronoq: ack result: %w", err)
			}
			body["result"] = raw
		}
		if o.Next != nil {
			// No generated key: the next job is put inside the ack, which
			// the server applies once or not at all.
			w, err := o.Next.PutOptions.wire(false)
			if err != nil {
				return nil, fmt.Errorf("next: %w", err)
			}
			w.Queue = o.Next.Queue
			body["next"] = w
		}
		if rs := o.Reschedule; rs != nil {
			if rs.Delay != 0 && !rs.At.IsZero() {
				return nil, fmt.Errorf("reschedule: %w", errExclusiveDelayAt)
			}
			m := map[string]string{}
			if !rs.At.IsZero() {
				m["at"] = fmtTime(rs.At)
			} else {
				m["delay"] = fmtDuration(rs.Delay)
			}
			body["reschedule"] = m
		}
	}
	var wait time.Duration
	if o != nil && o.Take != nil {
		for _, tq := range o.TakeQueues {
			if err := c.checkQueue(tq); err != nil {
				return nil, err
			}
		}
		body["take"] = o.Take.wire(o.TakeQueues)
		wait = o.Take.Wait
	}
	var out AckResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(q, id) + "/ack", body: body, extraTime: wait}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AckItem names one reservation of a batch ack.
type AckItem struct {
	ID      string `json:"id"`
	Receipt string `json:"receipt"`
}

// AckBatch acks many reservations of queue q (at most 1000) in one
// request, all or none: one wrong receipt fails the batch (ErrConflict,
// the error's field naming the item, e.g. "acks[3]") and acks nothing.
// The answers come in the order given.
func (c *Client) AckBatch(ctx context.Context, q string, items []AckItem) ([]AckResult, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("chronoq: AckBatch needs at least one item")
	}
	var out struct {
		Acks []AckResult `json:"acks"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: c.queuePath(q) + "/ack", body: map[string]any{"acks": items}}, &out); err != nil {
		return nil, err
	}
	return out.Acks, nil
}

// marshalValue encodes v, passing json.RawMessage through after checking it.
func marshalValue(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, errors.New("not valid JSON")
		}
		return raw, nil
	}
	b, err := marshalBody(v)
	return json.RawMessage(b), err
}

// NackOptions are nack's optional parts.
type NackOptions struct {
	// Delay before the retry. Nil: the queue's backoff decides; a pointer
	// to 0 makes the job ready at once.
	Delay *time.Duration
	Error string // kept as the job's last_error
}

// Nack gives a reserved job back for a retry and returns its new state
// ("delayed", "ready", or "dead" when its tries are used up).
func (c *Client) Nack(ctx context.Context, q, id, receipt string, o *NackOptions) (string, error) {
	if err := c.checkJob(q, id); err != nil {
		return "", err
	}
	body := struct {
		Receipt string `json:"receipt"`
		Delay   string `json:"delay,omitempty"`
		Error   string `json:"error,omitempty"`
	}{Receipt: receipt}
	if o != nil {
		if o.Delay != nil {
			body.Delay = fmtDuration(*o.Delay)
		}
		body.Error = o.Error
	}
	var out struct {
		State string `json:"state"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(q, id) + "/nack", body: body}, &out)
	return out.State, err
}

// Touch extends a reservation by ttr (0: by the reservation's TTR) and
// returns the new end.
func (c *Client) Touch(ctx context.Context, q, id, receipt string, ttr time.Duration) (time.Time, error) {
	if err := c.checkJob(q, id); err != nil {
		return time.Time{}, err
	}
	body := map[string]string{"receipt": receipt}
	if ttr > 0 {
		body["ttr"] = fmtDuration(ttr)
	}
	var out struct {
		ReservedUntil string `json:"reserved_until"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(q, id) + "/touch", body: body}, &out); err != nil {
		return time.Time{}, err
	}
	return parseTime(out.ReservedUntil)
}

// Bury moves a reserved job straight to the dead letters.
func (c *Client) Bury(ctx context.Context, q, id, receipt, reason string) error {
	if err := c.checkJob(q, id); err != nil {
		return err
	}
	body := map[string]string{"receipt": receipt}
	if reason != "" {
		body["reason"] = reason
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.jobPath(q, id) + "/bury", body: body}, nil)
	return err
}

// Peek returns a job without changing it.
func (c *Client) Peek(ctx context.Context, q, id string) (*Job, error) {
	if err := c.checkJob(q, id); err != nil {
		return nil, err
	}
	var j Job
	if _, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(q, id), retry: true}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Filter selects jobs for List and CancelByFilter. All given parts must
// match.
type Filter struct {
	States []string          // any of these states; none: all (cancel: all but reserved)
	Key    string            // this per-key FIFO key
	Tags   map[string]string // every one of these tags
	// Limit is List's page size (1–1000; 0: the server's 100). Not used by
	// CancelByFilter.
	Limit int
}

func (f Filter) empty() bool { return len(f.States) == 0 && f.Key == "" && len(f.Tags) == 0 }

func (f Filter) query() url.Values {
	v := url.Values{}
	if len(f.States) > 0 {
		v.Set("state", strings.Join(f.States, ","))
	}
	if f.Key != "" {
		v.Set("key", f.Key)
	}
	for k, val := range f.Tags {
		v.Set("tag."+k, val)
	}
	return v
}

// JobPage is one page of a listing; NextCursor is empty on the last.
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListPage fetches one page of queue q's jobs, starting at cursor ("" for
// the first page).
func (c *Client) ListPage(ctx context.Context, q string, f Filter, cursor string) (*JobPage, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	v := f.query()
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var page JobPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: c.queuePath(q) + "/jobs", query: v, retry: true}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// JobIterator walks a listing page by page:
//
//	it := c.List(ctx, "emails", client.Filter{States: []string{"dead"}})
//	for it.Next(ctx) {
//		fmt.Println(it.Job().ID)
//	}
//	if err := it.Err(); err != nil { ... }
type JobIterator struct {
	c      *Client
	queue  string
	filter Filter
	cursor string
	page   []*Job
	cur    *Job
	done   bool
	err    error
}

// List returns an iterator over queue q's jobs matching f. It makes no
// request itself; each Next fetches a page when needed, under Next's ctx.
func (c *Client) List(_ context.Context, q string, f Filter) *JobIterator {
	return &JobIterator{c: c, queue: q, filter: f}
}

// Next advances to the next job, fetching the next page when the current
// one is used up. It returns false at the end or on an error (see Err).
func (it *JobIterator) Next(ctx context.Context) bool {
	for len(it.page) == 0 {
		if it.done || it.err != nil {
			it.cur = nil
			return false
		}
		p, err := it.c.ListPage(ctx, it.queue, it.filter, it.cursor)
		if err != nil {
			it.err = err
			it.cur = nil
			return false
		}
		it.page, it.cursor = p.Jobs, p.NextCursor
		// A server that answered an empty page with a cursor would loop us
		// forever; an empty page ends the listing.
		it.done = p.NextCursor == "" || len(p.Jobs) == 0
	}
	it.cur, it.page = it.page[0], it.page[1:]
	return true
}

// Job is the current job; valid after Next returned true.
func (it *JobIterator) Job() *Job { return it.cur }

// Err is the error that stopped the iteration, nil at a normal end.
func (it *JobIterator) Err() error { return it.err }

// Cursor resumes the listing after the jobs fetched so far (pages are
// fetched whole, so this is after the current page).
func (it *JobIterator) Cursor() string { return it.cursor }

// UpdateOptions change a job in place; nil and zero fields are kept.
type UpdateOptions struct {
	Payload      json.RawMessage // new JSON payload (json.RawMessage("null") for null)
	PayloadBytes []byte          // new binary payload
	Delay        *time.Duration  // activate this long after the update
	At           time.Time       // or at this time
	Priority     *uint32
	// Tags replace the whole map when non-nil; an empty map clears them.
	Tags map[string]string
	// Receipt is needed to update a reserved job.
	Receipt string
}

// Update changes a job that is not reserved (or is, with its receipt) and
// returns it.
func (c *Client) Update(ctx context.Context, q, id string, u UpdateOptions) (*Job, error) {
	if err := c.checkJob(q, id); err != nil {
		return nil, err
	}
	body := map[string]any{}
	switch {
	case u.Payload != nil && u.PayloadBytes != nil:
		return nil, errPayloadAmbiguous
	case u.Payload != nil:
		if !json.Valid(u.Payload) {
			return nil, errors.New("chronoq: Payload is not valid JSON")
		}
		body["payload"] = u.Payload
	case u.PayloadBytes != nil:
		body["payload_base64"] = base64.StdEncoding.EncodeToString(u.PayloadBytes)
	}
	if u.Delay != nil && !u.At.IsZero() {
		return nil, errExclusiveDelayAt
	}
	if u.Delay != nil {
		body["delay"] = fmtDuration(*u.Delay)
	}
	if !u.At.IsZero() {
		body["at"] = fmtTime(u.At)
	}
	if u.Priority != nil {
		body["priority"] = *u.Priority
	}
	if u.Tags != nil {
		body["tags"] = u.Tags
	}
	if u.Receipt != "" {
		body["receipt"] = u.Receipt
	}
	var j Job
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: c.jobPath(q, id), body: body}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Cancel deletes one job. A reserved job needs its receipt (else
// ErrConflict); give "" otherwise.
func (c *Client) Cancel(ctx context.Context, q, id, receipt string) error {
	if err := c.checkJob(q, id); err != nil {
		return err
	}
	var v url.Values
	if receipt != "" {
		v = url.Values{"receipt": {receipt}}
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: c.jobPath(q, id), query: v, retry: true}, nil)
	return err
}

// CancelByFilter deletes the jobs of queue q matching f, or of every queue
// of the namespace when q is "". f must have at least one part; without
// States it spares reserved jobs. It returns how many were deleted.
func (c *Client) CancelByFilter(ctx context.Context, q string, f Filter) (int, error) {
	// Refused here as well as by the server: a filterless DELETE on a
	// collection must never go out by accident.
	if f.empty() {
		return 0, errNoFilter
	}
	path := c.nsPath() + "/jobs"
	if q != "" {
		path = c.queuePath(q) + "/jobs"
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: path, query: f.query(), retry: true}, &out)
	return out.Deleted, err
}

// RespawnOptions pick dead jobs to respawn: the Limit oldest, or exactly
// IDs (exclusive). The zero value respawns as the server's default decides.
type RespawnOptions struct {
	Limit int
	IDs   []string
}

// Respawn makes dead jobs of queue q ready again (attempt 0) and returns
// how many.
func (c *Client) Respawn(ctx context.Context, q string, o RespawnOptions) (int, error) {
	if err := c.checkQueue(q); err != nil {
		return 0, err
	}
	if o.Limit > 0 && len(o.IDs) > 0 {
		return 0, errRespawnLimitAndIDs
	}
	body := struct {
		Limit int      `json:"limit,omitempty"`
		IDs   []string `json:"ids,omitempty"`
	}{o.Limit, o.IDs}
	var out struct {
		Respawned int `json:"respawned"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: c.queuePath(q) + "/dead/respawn", body: body}, &out)
	return out.Respawned, err
}

// PurgeDead deletes queue q's dead jobs and returns how many.
func (c *Client) PurgeDead(ctx context.Context, q string) (int, error) {
	if err := c.checkQueue(q); err != nil {
		return 0, err
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	// Not retried: a retry would also delete jobs that died in between.
	_, err := c.do(ctx, request{method: http.MethodDelete, path: c.queuePath(q) + "/dead"}, &out)
	return out.Deleted, err
}

// JobResult is the outcome of Result and Call.
type JobResult struct {
	ID string // Call only
	// Done is true once the job was acked; then Result holds its result
	// (JSON null when acked without one) or ResultBytes a binary one.
	Done        bool
	State       string // the job's state; "completed" when Done
	Result      json.RawMessage
	ResultBytes []byte
}

// resultWire is the answer of result and call.
type resultWire wire.Result

func (w *resultWire) toResult(done bool) (*JobResult, error) {
	r := &JobResult{ID: w.ID, Done: done, State: w.State, Result: w.Result}
	if done && r.State == "" {
		r.State = StateCompleted
	}
	if w.ResultBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*w.ResultBase64)
		if err != nil {
			return nil, fmt.Errorf("chronoq: result_base64: %w", err)
		}
		r.Result, r.ResultBytes = nil, b
	} else if done && r.Result == nil {
		r.Result = json.RawMessage("null")
	}
	return r, nil
}

// Result waits up to wait (≤ 60s; 0: answer at once) for a job's result.
// When the wait ends first the answer has Done false and the current
// state, and no error. A job that no longer exists is ErrJobNotFound.
func (c *Client) Result(ctx context.Context, q, id string, wait time.Duration) (*JobResult, error) {
	if err := c.checkJob(q, id); err != nil {
		return nil, err
	}
	var v url.Values
	if wait > 0 {
		v = url.Values{"wait": {fmtDuration(wait)}}
	}
	var w resultWire
	res, err := c.do(ctx, request{method: http.MethodGet, path: c.jobPath(q, id) + "/result", query: v, retry: true, extraTime: wait}, &w)
	if err != nil {
		return nil, err
	}
	r, err := w.toResult(res.status == http.StatusOK)
	if r != nil {
		r.ID = id
	}
	return r, err
}

// Call puts a job and waits up to wait (≤ 60s) for its result: an RPC over
// the queue. When the wait ends first it returns ErrWaitTimeout together
// with a JobResult carrying the job's id and state, so the caller can keep
// waiting with Result (the result is kept a minute after completion).
// Call carries no generated idempotency key and is not retried.
func (c *Client) Call(ctx context.Context, q string, p PutOptions, wait time.Duration) (*JobResult, error) {
	if err := c.checkQueue(q); err != nil {
		return nil, err
	}
	w, err := p.wire(false)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		w.Wait = fmtDuration(wait)
	}
	req := request{method: http.MethodPost, path: c.queuePath(q) + "/call", body: w, extraTime: wait, ok: []int{http.StatusGatewayTimeout}}
	res, err := c.do(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	var rw resultWire
	done := res.status == http.StatusOK
	if jerr := json.Unmarshal(res.body, &rw); jerr != nil || rw.ID == "" {
		if !done {
			// A 504 without the server's {"id","state"} is a gateway's own
			// timeout: nothing says the job was even put.
			return nil, &Error{Status: res.status, Code: "gateway_timeout", Message: strings.TrimSpace(string(res.body[:min(len(res.body), 512)]))}
		}
		if jerr != nil {
			return nil, fmt.Errorf("chronoq: decoding call answer: %w", jerr)
		}
	}
	r, err := rw.toResult(done)
	if err != nil {
		return nil, err
	}
	if !done {
		return r, ErrWaitTimeout
	}
	return r, nil
}
