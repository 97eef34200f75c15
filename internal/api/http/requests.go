package httpapi

import (
	"encoding/base64"
	"slices"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// This file turns request bodies into engine requests. Each reader takes an
// object (so nested bodies such as ack's "next" and batch's "jobs[i]" reuse
// the same code with their own path prefix) and leaves its first error in
// o.err.

// limits are the server-wide settings that decoding enforces.
type limits struct {
	maxPayload int64
	maxWait    time.Duration
}

var putFields = []string{
	"payload", "payload_base64", "id", "delay", "at", "priority", "ttl", "ttr",
	"tries", "key", "tags", "reply_to", "cron", "idempotency_key", "notify",
}

// payload reads payload / payload_base64. required=false is for patch,
// where leaving both out means "keep the payload".
func (o *object) payload(maxPayload int64, required bool) (data []byte, isJSON, present bool) {
	if o.err != nil {
		return nil, false, false
	}
	_, hasJSON := o.member("payload")
	b64, hasB64 := o.get("payload_base64")
	switch {
	case hasJSON && hasB64:
		o.fail("payload", "give either payload or payload_base64, not both")
		return nil, false, false
	case !hasJSON && !hasB64:
		if required {
			o.fail("payload", "missing: give payload (any JSON value) or payload_base64")
		}
		return nil, false, false
	case hasJSON:
		data, _ = o.anyJSON("payload")
		isJSON = true
	default:
		s, ok := rawString(b64)
		if !ok {
			o.fail("payload_base64", "must be a base64 string")
			return nil, false, false
		}
		var err error
		data, err = base64.StdEncoding.DecodeString(s)
		if err != nil {
			o.fail("payload_base64", "invalid standard base64 (RFC 4648 §4, padded): %v", err)
			return nil, false, false
		}
	}
	if o.err == nil && int64(len(data)) > maxPayload {
		o.setErr(tooLarge(o.field("payload"), "payload is %d bytes, the limit is %d", len(data), maxPayload))
	}
	return data, isJSON, o.err == nil
}

// readPut reads a put body; extra names the fields the caller reads itself
// (call's "wait", next's "queue").
func readPut(o *object, lim limits, extra ...string) engine.PutRequest {
	if len(extra) == 0 {
		o.allow(putFields...)
	} else {
		o.allow(append(slices.Clone(putFields), extra...)...)
	}
	var req engine.PutRequest
	req.Payload, req.PayloadJSON, _ = o.payload(lim.maxPayload, true)
	if req.ID = o.str("id"); req.ID != "" {
		o.setErr(checkJobID(o.field("id"), req.ID))
	}
	req.Delay, req.At = o.delayOrAt()
	req.Priority = o.optUint32("priority")
	req.TTL = o.optDuration("ttl")
	req.TTR = o.optDuration("ttr")
	req.Tries = o.optUint32("tries")
	req.Key = o.str("key")
	o.setErr(checkKey(o.field("key"), req.Key))
	if tags, ok := o.strMap("tags"); ok && len(tags) > 0 {
		req.Tags = tags
		o.setErr(checkTags(o.field("tags"), tags))
	}
	if req.ReplyTo = o.str("reply_to"); req.ReplyTo != "" {
		o.setErr(checkQueue(o.field("reply_to"), req.ReplyTo))
	}
	req.Cron = o.str("cron")
	req.IdempotencyKey = o.str("idempotency_key")
	if req.Notify = o.str("notify"); req.Notify != "" {
		o.setErr(checkChannel(o.field("notify"), req.Notify))
	}
	return req
}

// decodePut reads a whole put body.
func decodePut(body []byte, lim limits) (engine.PutRequest, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.PutRequest{}, err
	}
	req := readPut(o, lim)
	return req, o.err
}

func decodeBatch(body []byte, lim limits) ([]engine.PutRequest, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return nil, err
	}
	o.allow("jobs")
	items, ok := o.list("jobs")
	switch {
	case o.err != nil:
		return nil, o.err
	case !ok || len(items) == 0:
		return nil, badField("jobs", "missing: give at least one job")
	case len(items) > engine.MaxBatch:
		return nil, badField("jobs", "at most %d jobs per batch, got %d", engine.MaxBatch, len(items))
	}
	reqs := make([]engine.PutRequest, len(items))
	for i, raw := range items {
		job, err := newObject(raw, indexPath("jobs", i))
		if err != nil {
			return nil, err
		}
		reqs[i] = readPut(job, lim)
		if job.err != nil {
			return nil, job.err
		}
	}
	return reqs, nil
}

// decodeCall reads a put body plus the time to wait for its result.
func decodeCall(body []byte, lim limits) (engine.PutRequest, time.Duration, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.PutRequest{}, 0, err
	}
	req := readPut(o, lim, "wait")
	wait := o.wait(lim.maxWait)
	return req, wait, o.err
}

func (o *object) wait(max time.Duration) time.Duration {
	d := o.optDuration("wait")
	if d == nil {
		return 0
	}
	if *d > max {
		o.fail("wait", "must be at most %s", max)
	}
	return *d
}

func decodeAck(body []byte, queue string, lim limits) (engine.AckRequest, error) {
	req, _, err := decodeAckTake(body, queue, lim)
	return req, err
}

// ackTake is the `take` of an ack body: the worker's next take, answered
// with the ack (docs/api.md).
type ackTake struct {
	req  engine.TakeRequest
	wait time.Duration
}

// decodeAckTake reads an ack body; take is nil unless the body asks for
// the next job.
func decodeAckTake(body []byte, queue string, lim limits) (engine.AckRequest, *ackTake, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.AckRequest{}, nil, err
	}
	o.allow("receipt", "result", "next", "reschedule", "take")
	var take *ackTake
	tk := new(object)
	if o.child("take", tk) {
		tr, wait := readTake(tk, true, false, lim)
		if tk.err == nil && len(tr.Queues) == 0 {
			tr.Queues = []string{queue} // by default the acked job's queue
		}
		o.setErr(tk.err)
		take = &ackTake{req: tr, wait: wait}
	}
	var req engine.AckRequest
	req.Receipt = o.str("receipt")
	if data, ok := o.anyJSON("result"); ok {
		req.HasResult, req.Result, req.ResultJSON = true, data, true
		if int64(len(data)) > lim.maxPayload {
			o.setErr(tooLarge(o.field("result"), "result is %d bytes, the limit is %d", len(data), lim.maxPayload))
		}
	}
	n := new(object)
	if o.child("next", n) {
		put := readPut(n, lim, "queue")
		// Without a queue the next job goes to the acked job's own queue,
		// which is what a multi-step job that re-enqueues itself wants.
		q := queue
		if nq := n.str("queue"); nq != "" {
			q = nq
			n.setErr(checkQueue(n.field("queue"), q))
		}
		o.setErr(n.err)
		req.Next = &engine.NextPut{Queue: q, Put: put}
	}
	rs := new(object)
	if o.child("reschedule", rs) {
		rs.allow("delay", "at")
		delay := rs.optDuration("delay")
		rs.setErr(checkDelay(rs.field("delay"), delay))
		at := rs.optTime("at")
		if delay != nil && at != nil {
			rs.fail("at", "delay and at are exclusive, give one")
		}
		o.setErr(rs.err)
		req.Reschedule = &engine.Reschedule{Delay: delay, At: at}
	}
	return req, take, o.err
}

// decodeAckBatch reads a batch ack: {"acks":[{"id":..,"receipt":..},..]}.
func decodeAckBatch(body []byte) ([]engine.AckItem, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return nil, err
	}
	o.allow("acks")
	items, ok := o.list("acks")
	switch {
	case o.err != nil:
		return nil, o.err
	case !ok || len(items) == 0:
		return nil, badField("acks", "missing: give at least one {\"id\",\"receipt\"}")
	case len(items) > engine.MaxAckBatch:
		return nil, badField("acks", "at most %d acks per batch, got %d", engine.MaxAckBatch, len(items))
	}
	out := make([]engine.AckItem, len(items))
	for i, raw := range items {
		it, err := newObject(raw, indexPath("acks", i))
		if err != nil {
			return nil, err
		}
		it.allow("id", "receipt")
		out[i] = engine.AckItem{ID: it.str("id"), Receipt: it.str("receipt")}
		if it.err == nil && out[i].ID == "" {
			it.fail("id", "missing: the job's id")
		}
		if it.err == nil && out[i].Receipt == "" {
			it.fail("receipt", "missing: the receipt from the take that reserved the job")
		}
		if it.err != nil {
			return nil, it.err
		}
	}
	return out, nil
}

// decodeObject reads a body that is one object of the given fields with
// read; read's result counts only when no field failed.
func decodeObject[T any](body []byte, fields []string, read func(o *object) T) (T, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		var zero T
		return zero, err
	}
	o.allow(fields...)
	v := read(o)
	return v, o.err
}

func decodeNack(body []byte) (engine.NackRequest, error) {
	return decodeObject(body, []string{"receipt", "delay", "error"}, func(o *object) engine.NackRequest {
		req := engine.NackRequest{
			Receipt: o.str("receipt"),
			Delay:   o.optDuration("delay"),
			Error:   o.str("error"),
		}
		o.setErr(checkDelay(o.field("delay"), req.Delay))
		return req
	})
}

func decodeTouch(body []byte) (engine.TouchRequest, error) {
	return decodeObject(body, []string{"receipt", "ttr"}, func(o *object) engine.TouchRequest {
		return engine.TouchRequest{Receipt: o.str("receipt"), TTR: o.optDuration("ttr")}
	})
}

func decodeBury(body []byte) (engine.BuryRequest, error) {
	return decodeObject(body, []string{"receipt", "reason"}, func(o *object) engine.BuryRequest {
		return engine.BuryRequest{Receipt: o.str("receipt"), Reason: o.str("reason")}
	})
}

// decodeTake reads a take body. multi is the namespace-wide form, which
// names its queues in the body.
func decodeTake(body []byte, multi bool, lim limits) (engine.TakeRequest, time.Duration, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.TakeRequest{}, 0, err
	}
	req, wait := readTake(o, multi, multi, lim)
	return req, wait, o.err
}

// readTake reads a take's fields: queues only when multi, and required
// then unless optional (an ack's take defaults to the acked job's queue).
func readTake(o *object, multi, required bool, lim limits) (engine.TakeRequest, time.Duration) {
	if multi {
		o.allow("queues", "max", "ttr", "wait")
	} else {
		o.allow("max", "ttr", "wait")
	}
	var req engine.TakeRequest
	if multi {
		qs, ok := o.strList("queues")
		if o.err == nil && (ok || required) && len(qs) == 0 {
			o.fail("queues", "missing: list at least one queue")
		}
		if o.err == nil && len(qs) > engine.MaxTakeQueues {
			o.fail("queues", "at most %d queues per take, got %d", engine.MaxTakeQueues, len(qs))
		}
		for i, q := range qs {
			o.setErr(checkQueue(indexPath(o.field("queues"), i), q))
		}
		req.Queues = qs
	}
	req.Max = o.intRange("max", 1, engine.MaxTake, 1)
	req.TTR = o.optDuration("ttr")
	wait := o.wait(lim.maxWait)
	return req, wait
}

func decodeUpdate(body []byte, lim limits) (engine.UpdateRequest, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.UpdateRequest{}, err
	}
	o.allow("receipt", "payload", "payload_base64", "delay", "at", "priority", "tags")
	var req engine.UpdateRequest
	req.Receipt = o.str("receipt")
	req.Payload, req.PayloadJSON, req.HasPayload = o.payload(lim.maxPayload, false)
	req.Delay, req.At = o.delayOrAt()
	req.Priority = o.optUint32("priority")
	req.Tags, req.HasTags = o.strMap("tags")
	if req.HasTags {
		o.setErr(checkTags(o.field("tags"), req.Tags))
	}
	return req, o.err
}

func decodeRespawn(body []byte) (engine.RespawnRequest, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.RespawnRequest{}, err
	}
	o.allow("limit", "ids")
	var req engine.RespawnRequest
	if u, ok := o.uintField("limit", maxIntField); ok {
		req.Limit = int(u)
	}
	ids, hasIDs := o.strList("ids")
	for i, id := range ids {
		o.setErr(checkJobID(indexPath(o.field("ids"), i), id))
	}
	if o.err == nil && hasIDs && req.Limit > 0 {
		o.fail("ids", "limit and ids are exclusive, give one")
	}
	req.IDs = ids
	return req, o.err
}

// maxIntField keeps counts inside int on every platform.
const maxIntField = 1<<31 - 1

func decodeQueuePatch(body []byte, lim limits) (engine.QueuePatch, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return engine.QueuePatch{}, err
	}
	o.allow("default_ttr", "default_tries", "default_ttl", "default_priority", "max_jobs",
		"max_payload", "dedup_window", "retain_results", "key_mode", "backoff")
	var p engine.QueuePatch
	p.DefaultTTR = o.optDuration("default_ttr")
	p.DefaultTries = o.optUint32("default_tries")
	p.DefaultTTL = o.optDuration("default_ttl")
	p.DefaultPriority = o.optUint32("default_priority")
	p.MaxJobs = o.optUint64("max_jobs")
	p.MaxPayload = o.optUint32("max_payload")
	// A queue limit above the server's would never take effect: every put
	// over the server's limit is refused before it reaches the queue.
	if capacity := min(lim.maxPayload, engine.MaxPayloadHard); p.MaxPayload != nil && int64(*p.MaxPayload) > capacity {
		o.fail("max_payload", "must be at most %d (the server's limit)", capacity)
	}
	p.DedupWindow = o.optDuration("dedup_window")
	p.RetainResults = o.optDuration("retain_results")
	if s, ok := o.get("key_mode"); ok {
		switch v, _ := rawString(s); v {
		case "strict":
			m := engine.KeyStrict
			p.KeyMode = &m
		case "exclusive":
			m := engine.KeyExclusive
			p.KeyMode = &m
		default:
			o.fail("key_mode", `must be "strict" or "exclusive"`)
		}
	}
	b := new(object)
	if o.child("backoff", b) {
		b.allow("initial", "max", "multiplier", "jitter")
		p.BackoffInitial = b.optDuration("initial")
		p.BackoffMax = b.optDuration("max")
		p.BackoffMult = b.optFloat("multiplier")
		if p.BackoffMult != nil && *p.BackoffMult < 1 {
			b.fail("multiplier", "must be at least 1")
		}
		p.BackoffJitter = b.optFloat("jitter")
		if p.BackoffJitter != nil && (*p.BackoffJitter < 0 || *p.BackoffJitter > 1) {
			b.fail("jitter", "must be between 0 and 1")
		}
		o.setErr(b.err)
	}
	return p, o.err
}

// decodeEmpty reads the body of a route that takes no fields; it exists so
// that a misdirected body (say, a config sent to pause) is refused rather
// than silently ignored.
func decodeEmpty(body []byte) error {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return err
	}
	o.allow()
	return o.err
}

func decodePublish(body []byte, lim limits) ([]byte, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return nil, err
	}
	o.allow("data")
	data, ok := o.anyJSON("data")
	if o.err == nil && !ok {
		o.fail("data", "missing: give the JSON value to publish")
	}
	if o.err == nil && int64(len(data)) > lim.maxPayload {
		o.setErr(tooLarge("data", "data is %d bytes, the limit is %d", len(data), lim.maxPayload))
	}
	return data, o.err
}

func decodeNamespace(body []byte) (string, engine.NamespaceConfig, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return "", engine.NamespaceConfig{}, err
	}
	o.allow("name", "auto_create_queues", "channel_history")
	name := o.str("name")
	cfg := engine.NamespaceConfig{AutoCreateQueues: true}
	readNamespace(o, &cfg)
	if o.err == nil {
		o.setErr(checkNamespace("name", name))
	}
	return name, cfg, o.err
}

// decodeNamespacePatch reads a PUT namespace body over the current
// configuration: fields left out keep their values.
func decodeNamespacePatch(body []byte, cfg engine.NamespaceConfig) (engine.NamespaceConfig, error) {
	o := new(object)
	err := o.parseBody(body)
	if err != nil {
		return cfg, err
	}
	o.allow("auto_create_queues", "channel_history")
	readNamespace(o, &cfg)
	return cfg, o.err
}

func readNamespace(o *object, cfg *engine.NamespaceConfig) {
	if b := o.optBool("auto_create_queues"); b != nil {
		cfg.AutoCreateQueues = *b
	}
	h := new(object)
	if !o.child("channel_history", h) {
		return
	}
	h.allow("size", "ttl", "durable")
	c := &cfg.Channels
	// -1 means "none" for size and "no expiry" for ttl
	if raw, ok := h.get("size"); ok {
		if string(raw) == "-1" {
			c.Size = -1
		} else {
			c.Size = h.intRange("size", 0, engine.MaxChannelHistory, 0)
		}
	}
	if raw, ok := h.get("ttl"); ok {
		if r := string(raw); r == "-1" || r == `"-1"` {
			c.TTL = -1
		} else if d := h.optDuration("ttl"); d != nil {
			c.TTL = *d
		}
	}
	if b := h.optBool("durable"); b != nil {
		c.Durable = *b
	}
	o.setErr(h.err)
}

func decodeToken(body []byte) (string, error) {
	return decodeObject(body, []string{"description"}, func(o *object) string { return o.str("description") })
}

// delayOrAt reads the first activation of a put or update: a delay (at
// most engine.MaxDelay) or a time, not both.
func (o *object) delayOrAt() (*time.Duration, *time.Time) {
	delay := o.optDuration("delay")
	o.setErr(checkDelay(o.field("delay"), delay))
	at := o.optTime("at")
	if delay != nil && at != nil {
		o.fail("at", "delay and at are exclusive, give one")
	}
	return delay, at
}
