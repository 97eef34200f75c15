package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/wire"
)

// Job states as the server names them.
const (
	StateDelayed   = "delayed"
	StateReady     = "ready"
	StateBlocked   = "blocked"
	StateReserved  = "reserved"
	StateDead      = "dead"
	StateCompleted = "completed"
)

// Job is a job as the server returns it (take, peek, list, update).
type Job struct {
	ID        string
	Namespace string
	Queue     string
	State     string
	// Payload is the JSON payload of a job put with one; nil for a job put
	// with bytes (then see PayloadBytes).
	Payload json.RawMessage
	// PayloadBytes is the payload of a job put with PayloadBytes
	// (payload_base64 on the wire), decoded.
	PayloadBytes []byte
	Priority     uint32            // lower runs first
	Key          string            // per-key FIFO ordering key
	Tags         map[string]string // for filtering and cancelling
	CreatedAt    time.Time
	// ActivateAt is when the job became (or becomes) ready.
	ActivateAt time.Time
	ExpireAt   time.Time // zero: no TTL
	// TTR is the time to run; in a take answer, this reservation's.
	TTR           time.Duration
	Tries         uint32 // 0: unlimited
	Attempt       uint32 // deliveries so far
	Receipt       string // only in take answers
	ReservedUntil time.Time
	LastError     string
	ReplyTo       string
	// Notify is the channel that hears the job's result event
	// (docs/realtime.md).
	Notify string
	Cron   string
	// Result is a completed job's retained result (JSON); ResultBytes when
	// the server answers it in base64.
	Result      json.RawMessage
	ResultBytes []byte
}

// Binary reports whether the job's payload is bytes rather than JSON.
func (j *Job) Binary() bool { return j.Payload == nil && j.PayloadBytes != nil }

// Bytes is the payload whichever way it was put: JSON text or raw bytes.
func (j *Job) Bytes() []byte {
	if j.Payload != nil {
		return j.Payload
	}
	return j.PayloadBytes
}

// Decode unmarshals the JSON payload into v.
func (j *Job) Decode(v any) error {
	if j.Payload == nil {
		return fmt.Errorf("chronoq: job %s has a binary payload, not JSON", j.ID)
	}
	return json.Unmarshal(j.Payload, v)
}

// wireTime formats an answer-side time the way the server does, so a job
// printed by the CLI reads like the server's own JSON.
func wireTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// MarshalJSON writes the job in docs/api.md's wire form.
func (j Job) MarshalJSON() ([]byte, error) {
	w := wire.Job{
		ID: j.ID, Namespace: j.Namespace, Queue: j.Queue, State: j.State,
		Priority: j.Priority, Key: j.Key, Tags: j.Tags,
		CreatedAt: wireTime(j.CreatedAt), ActivateAt: wireTime(j.ActivateAt), ExpireAt: wireTime(j.ExpireAt),
		TTR: wire.Duration(j.TTR.String()), Tries: j.Tries, Attempt: j.Attempt, Receipt: j.Receipt, ReservedUntil: wireTime(j.ReservedUntil),
		LastError: j.LastError, ReplyTo: j.ReplyTo, Notify: j.Notify, Cron: j.Cron, Result: j.Result,
	}
	if j.Payload != nil {
		w.Payload = j.Payload
	} else if j.PayloadBytes != nil {
		s := base64.StdEncoding.EncodeToString(j.PayloadBytes)
		w.PayloadBase64 = &s
	}
	if j.Result == nil && j.ResultBytes != nil {
		s := base64.StdEncoding.EncodeToString(j.ResultBytes)
		w.ResultBase64 = &s
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads docs/api.md's job object.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w wire.Job
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	out := Job{
		ID: w.ID, Namespace: w.Namespace, Queue: w.Queue, State: w.State,
		Payload: w.Payload, Priority: w.Priority, Key: w.Key, Tags: w.Tags,
		Tries: w.Tries, Attempt: w.Attempt, Receipt: w.Receipt, LastError: w.LastError,
		ReplyTo: w.ReplyTo, Notify: w.Notify, Cron: w.Cron, Result: w.Result,
	}
	var err error
	if w.PayloadBase64 != nil {
		if out.PayloadBytes, err = base64.StdEncoding.DecodeString(*w.PayloadBase64); err != nil {
			return fmt.Errorf("job %s: payload_base64: %w", w.ID, err)
		}
	}
	if w.ResultBase64 != nil {
		if out.ResultBytes, err = base64.StdEncoding.DecodeString(*w.ResultBase64); err != nil {
			return fmt.Errorf("job %s: result_base64: %w", w.ID, err)
		}
	}
	if out.TTR, err = parseDurationString(string(w.TTR)); err != nil {
		return fmt.Errorf("job %s: ttr: %w", w.ID, err)
	}
	for _, f := range []struct {
		name string
		s    string
		t    *time.Time
	}{
		{"created_at", w.CreatedAt, &out.CreatedAt},
		{"activate_at", w.ActivateAt, &out.ActivateAt},
		{"expire_at", w.ExpireAt, &out.ExpireAt},
		{"reserved_until", w.ReservedUntil, &out.ReservedUntil},
	} {
		if *f.t, err = parseTime(f.s); err != nil {
			return fmt.Errorf("job %s: %s: %w", w.ID, f.name, err)
		}
	}
	*j = out
	return nil
}

// PutOptions is one job to put: its payload and the optional settings of
// docs/api.md's put body. The zero value puts a job whose payload is JSON null.
type PutOptions struct {
	// Payload is JSON text, sent as "payload". Nil (with PayloadBytes nil)
	// means JSON null.
	Payload json.RawMessage
	// PayloadBytes is an opaque payload, sent as "payload_base64". Set at
	// most one of Payload and PayloadBytes.
	PayloadBytes []byte
	// ID is a client job id: a put with the id of a job that still exists
	// is answered as a duplicate. Empty: the server picks a ULID.
	ID string
	// Delay and At set the first activation (exclusive). Zero: now.
	Delay time.Duration
	At    time.Time
	// Priority: lower first. Nil: the queue's default.
	Priority *uint32
	// TTL is the lifetime from the put. Nil: the queue's default; 0: none.
	TTL *time.Duration
	// TTR is the time to run of each reservation. Zero: the queue's.
	TTR time.Duration
	// Tries is the most deliveries before dead. Nil: the queue's default;
	// 0: unlimited.
	Tries   *uint32
	Key     string            // per-key FIFO ordering key
	Tags    map[string]string // for filtering and cancelling
	ReplyTo string            // queue that receives the ack's result
	Notify  string            // channel that hears the result event (docs/realtime.md)
	Cron    string            // re-armed on each ack
	// IdempotencyKey makes the server answer repeats within the queue's
	// dedup window as duplicates. Empty: Put and PutBatch generate a random
	// one, so that their retries never put a job twice.
	IdempotencyKey string
	// NoIdempotencyKey stops the generated key; such a put is then not
	// retried after a failure the server may have seen.
	NoIdempotencyKey bool
}

// wire builds the put body. autoKey adds a generated idempotency key when
// the caller gave none and did not opt out.
func (p *PutOptions) wire(autoKey bool) (wire.Put, error) {
	var w wire.Put
	switch {
	case p.Payload != nil && p.PayloadBytes != nil:
		return w, errPayloadAmbiguous
	case p.PayloadBytes != nil:
		s := base64.StdEncoding.EncodeToString(p.PayloadBytes)
		w.PayloadBase64 = &s
	case p.Payload != nil:
		if !json.Valid(p.Payload) {
			return w, fmt.Errorf("chronoq: Payload is not valid JSON (use PayloadBytes for bytes)")
		}
		raw := p.Payload
		w.Payload = &raw
	default:
		raw := json.RawMessage("null")
		w.Payload = &raw
	}
	if p.Delay != 0 && !p.At.IsZero() {
		return w, errExclusiveDelayAt
	}
	if p.Delay != 0 {
		w.Delay = fmtDuration(p.Delay)
	}
	if !p.At.IsZero() {
		w.At = fmtTime(p.At)
	}
	if p.TTL != nil {
		w.TTL = fmtDuration(*p.TTL)
	}
	if p.TTR != 0 {
		w.TTR = fmtDuration(p.TTR)
	}
	w.ID, w.Priority, w.Tries = p.ID, p.Priority, p.Tries
	w.Key, w.Tags, w.ReplyTo, w.Notify, w.Cron = p.Key, p.Tags, p.ReplyTo, p.Notify, p.Cron
	w.IdempotencyKey = p.IdempotencyKey
	if w.IdempotencyKey == "" && autoKey && !p.NoIdempotencyKey {
		w.IdempotencyKey = newIdempotencyKey()
	}
	return w, nil
}

// PutResult is the answer to one put.
type PutResult struct {
	ID         string
	State      string
	ActivateAt time.Time
	// Duplicate is true when the server already had this job (same client
	// id, or same idempotency key within the dedup window); ID is then the
	// original's and nothing changed.
	Duplicate bool
}

func (r *PutResult) UnmarshalJSON(b []byte) error {
	var w wire.PutAnswer
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	at, err := parseTime(w.ActivateAt)
	if err != nil {
		return fmt.Errorf("activate_at: %w", err)
	}
	*r = PutResult{ID: w.ID, State: w.State, ActivateAt: at, Duplicate: w.Duplicate}
	return nil
}

func (r PutResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.PutAnswer{ID: r.ID, State: r.State, ActivateAt: wireTime(r.ActivateAt), Duplicate: r.Duplicate})
}

// Backoff is a queue's nack retry delay: Initial × Multiplier^(attempt−1),
// capped at Max, ± Jitter. Nil fields are left as they are.
type Backoff struct {
	Initial    *time.Duration
	Max        *time.Duration
	Multiplier *float64
	Jitter     *float64
}

// QueueConfig is a queue's settings. In CreateQueue and ConfigureQueue nil
// fields are not sent (and keep their values); in answers every field is
// set.
type QueueConfig struct {
	DefaultTTR      *time.Duration
	DefaultTries    *uint32 // 0: unlimited
	DefaultTTL      *time.Duration
	DefaultPriority *uint32
	MaxJobs         *uint64 // 0: no limit
	MaxPayload      *uint32
	DedupWindow     *time.Duration
	RetainResults   *time.Duration
	KeyMode         *string // "strict" or "exclusive"
	Backoff         *Backoff
}

func durPtrString(d *time.Duration) *string {
	if d == nil {
		return nil
	}
	s := fmtDuration(*d)
	return &s
}

func parseDurPtr(s *string, name string, err *error) *time.Duration {
	if s == nil || *err != nil {
		return nil
	}
	d, e := time.ParseDuration(*s)
	if e != nil {
		*err = fmt.Errorf("%s: %w", name, e)
		return nil
	}
	return &d
}

// MarshalJSON writes only the set fields, as the queue PUT body wants.
func (c QueueConfig) MarshalJSON() ([]byte, error) {
	w, err := c.wire()
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

func (c QueueConfig) wire() (wire.QueueConfig, error) {
	w := wire.QueueConfig{
		DefaultTTR: durPtrString(c.DefaultTTR), DefaultTries: c.DefaultTries,
		DefaultTTL: durPtrString(c.DefaultTTL), DefaultPriority: c.DefaultPriority,
		MaxJobs: c.MaxJobs, MaxPayload: c.MaxPayload, DedupWindow: durPtrString(c.DedupWindow),
		RetainResults: durPtrString(c.RetainResults), KeyMode: c.KeyMode,
	}
	if b := c.Backoff; b != nil {
		w.Backoff = &wire.Backoff{Initial: durPtrString(b.Initial), Max: durPtrString(b.Max), Multiplier: b.Multiplier, Jitter: b.Jitter}
	}
	return w, nil
}

// UnmarshalJSON reads a queue object's "config".
func (c *QueueConfig) UnmarshalJSON(b []byte) error {
	var w wire.QueueConfig
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return c.fromWire(w)
}

func (c *QueueConfig) fromWire(w wire.QueueConfig) error {
	var err error
	out := QueueConfig{
		DefaultTTR:      parseDurPtr(w.DefaultTTR, "default_ttr", &err),
		DefaultTries:    w.DefaultTries,
		DefaultTTL:      parseDurPtr(w.DefaultTTL, "default_ttl", &err),
		DefaultPriority: w.DefaultPriority,
		MaxJobs:         w.MaxJobs,
		MaxPayload:      w.MaxPayload,
		DedupWindow:     parseDurPtr(w.DedupWindow, "dedup_window", &err),
		RetainResults:   parseDurPtr(w.RetainResults, "retain_results", &err),
		KeyMode:         w.KeyMode,
	}
	if bw := w.Backoff; bw != nil {
		out.Backoff = &Backoff{
			Initial:    parseDurPtr(bw.Initial, "backoff.initial", &err),
			Max:        parseDurPtr(bw.Max, "backoff.max", &err),
			Multiplier: bw.Multiplier,
			Jitter:     bw.Jitter,
		}
	}
	if err != nil {
		return err
	}
	*c = out
	return nil
}

// Counts are a queue's jobs by state.
type Counts wire.Counts

// Total is the number of jobs the queue holds.
func (c Counts) Total() uint64 {
	return c.Delayed + c.Ready + c.Blocked + c.Reserved + c.Dead + c.Completed
}

// Queue is a queue object: settings, pause flag and live counts.
type Queue struct {
	Namespace      string
	Name           string
	Config         QueueConfig
	Paused         bool
	Counts         Counts
	OldestReadyAge time.Duration // how long the oldest ready job has waited
	// Created is true when CreateQueue/ConfigureQueue created the queue
	// (201) rather than updating it (200); false in other answers.
	Created bool
}

func (q Queue) MarshalJSON() ([]byte, error) {
	cfg, err := q.Config.wire()
	if err != nil {
		return nil, err
	}
	return json.Marshal(wire.Queue{Namespace: q.Namespace, Name: q.Name, Config: cfg, Paused: q.Paused,
		Counts: wire.Counts(q.Counts), OldestReadyAge: wire.Duration(q.OldestReadyAge.String())})
}

func (q *Queue) UnmarshalJSON(b []byte) error {
	var w wire.Queue
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	age, err := parseDurationString(string(w.OldestReadyAge))
	if err != nil {
		return fmt.Errorf("queue %s: oldest_ready_age: %w", w.Name, err)
	}
	var cfg QueueConfig
	if err := cfg.fromWire(w.Config); err != nil {
		return fmt.Errorf("queue %s: config: %w", w.Name, err)
	}
	*q = Queue{Namespace: w.Namespace, Name: w.Name, Config: cfg, Paused: w.Paused, Counts: Counts(w.Counts), OldestReadyAge: age}
	return nil
}

// Namespace is a namespace as the admin listener lists it; ChannelHistory
// is set only for namespaces with their own channel history policy.
type Namespace wire.Namespace
