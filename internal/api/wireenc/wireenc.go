// Package wireenc fills the JSON shapes of package wire from the engine's
// and the hub's values. Every protocol that shows a job as docs/api.md's job
// object (the HTTP API, the WebSocket push) encodes it here, so there is
// one encoder for one shape.
package wireenc

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
	"github.com/chronoq/chronoq/wire"
)

// Time formats an answer-side time.
func Time(t time.Time) string {
	var b [32]byte
	return string(appendTime(b[:0], t))
}

// OptTime gives "" for the zero time so omitempty drops the field.
func OptTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return Time(t)
}

// Blob is a stored byte string answered either as JSON text or as base64,
// depending on how it was given. Bytes flagged as JSON that do not parse
// (which only a bug or a corrupt log could produce) fall back to base64
// rather than breaking the whole answer.
func Blob(data []byte, isJSON bool) (raw json.RawMessage, b64 *string) {
	if isJSON {
		if len(data) == 0 {
			return json.RawMessage("null"), nil
		}
		if json.Valid(data) {
			return json.RawMessage(data), nil
		}
	}
	s := base64.StdEncoding.EncodeToString(data)
	return nil, &s
}

// Job is the job object of j.
func Job(j *engine.Job) wire.Job {
	out := wire.Job{
		ID:            j.ID,
		Namespace:     j.Namespace,
		Queue:         j.Queue,
		State:         j.State.String(),
		Priority:      j.Priority,
		Key:           j.Key,
		Tags:          j.Tags,
		CreatedAt:     Time(j.CreatedAt),
		ActivateAt:    Time(j.ActivateAt),
		ExpireAt:      OptTime(j.ExpireAt),
		TTR:           wire.Duration(j.TTR.String()),
		Tries:         j.Tries,
		Attempt:       j.Attempt,
		Receipt:       j.Receipt,
		ReservedUntil: OptTime(j.ReservedUntil),
		LastError:     j.LastError,
		ReplyTo:       j.ReplyTo,
		Notify:        j.Notify,
		Cron:          j.Cron,
	}
	out.Payload, out.PayloadBase64 = Blob(j.Data, j.PayloadJSON)
	if j.HasResult {
		out.Result, out.ResultBase64 = Blob(j.ResultData, j.ResultJSON)
	}
	return out
}

// Jobs never gives a nil slice: an empty answer is "jobs":[], not null.
func Jobs(jobs []engine.Job) []wire.Job {
	out := make([]wire.Job, len(jobs))
	for i := range jobs {
		out[i] = Job(&jobs[i])
	}
	return out
}

// Put is the answer to one put.
func Put(r engine.PutResult) wire.PutAnswer {
	return wire.PutAnswer{ID: r.ID, State: r.State.String(), ActivateAt: Time(r.ActivateAt), Duplicate: r.Duplicate}
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) *string { return ptr(d.String()) }

// Queue is the queue object of q; every config field is set.
func Queue(q *engine.QueueInfo) wire.Queue {
	c := &q.Config
	return wire.Queue{
		Namespace: q.Namespace,
		Name:      q.Name,
		Config: wire.QueueConfig{
			DefaultTTR:      dur(c.DefaultTTR),
			DefaultTries:    ptr(c.DefaultTries),
			DefaultTTL:      dur(c.DefaultTTL),
			DefaultPriority: ptr(c.DefaultPriority),
			MaxJobs:         ptr(c.MaxJobs),
			MaxPayload:      ptr(c.MaxPayload),
			DedupWindow:     dur(c.DedupWindow),
			RetainResults:   dur(c.RetainResults),
			KeyMode:         ptr(c.KeyMode.String()),
			Backoff: &wire.Backoff{
				Initial:    dur(c.Backoff.Initial),
				Max:        dur(c.Backoff.Max),
				Multiplier: ptr(c.Backoff.Multiplier),
				Jitter:     ptr(c.Backoff.Jitter),
			},
		},
		Paused: q.Paused,
		Counts: wire.Counts{
			Delayed:   q.Counts.Delayed,
			Ready:     q.Counts.Ready,
			Blocked:   q.Counts.Blocked,
			Reserved:  q.Counts.Reserved,
			Dead:      q.Counts.Dead,
			Completed: q.Counts.Completed,
		},
		OldestReadyAge: wire.Duration(q.OldestReadyAge.String()),
	}
}

// resultBlob is a completed job's result: JSON null when acked without one
// (docs/api.md, Results and RPC), so the field is always there when done.
func resultBlob(info engine.ResultInfo) (json.RawMessage, *string) {
	if !info.HasResult {
		return json.RawMessage("null"), nil
	}
	return Blob(info.ResultData, info.ResultJSON)
}

// Result is the answer of GET .../result: the state, plus the result once
// completed.
func Result(info engine.ResultInfo, done bool) wire.Result {
	if !done {
		return wire.Result{State: info.State.String()}
	}
	out := wire.Result{State: engine.StateCompleted.String()}
	out.Result, out.ResultBase64 = resultBlob(info)
	return out
}

// Call is call's answer: the id and the result when done (200), the id and
// the state when the wait ended first (504).
func Call(info engine.ResultInfo, done bool) wire.Result {
	if !done {
		return wire.Result{ID: info.ID, State: info.State.String()}
	}
	out := wire.Result{ID: info.ID}
	out.Result, out.ResultBase64 = resultBlob(info)
	return out
}

// Namespace is the namespace object; the channel history policy is shown
// only for namespaces that set one, so the object stays as it is for
// everyone else.
func Namespace(n engine.NamespaceInfo) wire.Namespace {
	out := wire.Namespace{Name: n.Name, AutoCreateQueues: n.Config.AutoCreateQueues}
	if c := n.Config.Channels; c != (engine.ChannelHistory{}) {
		size, ttl := c.Size, c.TTL
		if size == 0 {
			size = pubsub.DefaultHistorySize
		}
		if ttl == 0 {
			ttl = pubsub.DefaultHistoryTTL
		}
		h := &wire.ChannelHistory{Size: size, TTL: ttl.String(), Durable: c.Durable}
		if ttl < 0 {
			h.TTL = "-1"
		}
		out.ChannelHistory = h
	}
	return out
}

// History is a channel's history answer; Publications is never nil.
func History(h pubsub.HistoryResult) wire.History {
	out := wire.History{Publications: make([]wire.Publication, 0, len(h.Publications)), Offset: h.Offset, Epoch: h.Epoch, Recovered: h.Recovered}
	for _, p := range h.Publications {
		data := json.RawMessage(p.Data)
		if !json.Valid(data) {
			data = json.RawMessage("null")
		}
		out.Publications = append(out.Publications, wire.Publication{Offset: p.Offset, Data: data, Time: Time(p.Time)})
	}
	return out
}
