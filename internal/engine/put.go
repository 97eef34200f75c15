package engine

import (
	"fmt"
	"slices"
	"time"
)

// target is a queue a put goes to, which may not exist yet (auto-create
// puts its creation record into the same entry).
type target struct {
	ns   string
	name string
	q    *queue       // nil: created by this entry
	cfg  *QueueConfig // the queue's own (q.cfg), or the planned one
}

// resolveTarget finds the queue for a put, or plans its creation when the
// namespace allows it. Planned creations are remembered in plan so a batch
// or an ack with several puts creates each queue once.
func (e *Engine) resolveTarget(nsName, qName string, plan *putPlan) (*target, error) {
	if err := checkNames(nsName, qName); err != nil {
		return nil, err
	}
	ns, err := e.findNS(nsName)
	if err != nil {
		return nil, err
	}
	if qi, ok := ns.queues[qName]; ok {
		return e.queues[qi].target(), nil
	}
	for _, t := range plan.created {
		if t.ns == nsName && t.name == qName {
			return t, nil
		}
	}
	if !ns.cfg.AutoCreateQueues {
		return nil, errf(CodeQueueNotFound, "queue %q not found in namespace %q (auto_create_queues is off)", qName, nsName)
	}
	cfg := DefaultQueueConfig()
	t := &target{ns: nsName, name: qName, cfg: &cfg}
	plan.created = append(plan.created, t)
	r := e.ent.add()
	r.Kind, r.NS, r.Queue, r.QConfig, r.QCreated = KindQueue, nsName, qName, cfg, e.now
	return t, nil
}

// putPlan tracks what the entry being built already puts, so that a later
// job of the same entry sees the earlier ones (dedup, max_jobs, seq).
type putPlan struct {
	created []*target
	ids     map[string]int // target|id → index in results
	idems   map[string]int
	count   map[string]int // target → jobs this entry adds
	n       int
	multi   bool // the entry may put more than one job: track them
	// ofAck: the jobs follow from an ack (next, reply) and are not held to
	// the node's job budget — they mostly replace the acked job, and
	// refusing them would stall a pipeline at capacity.
	ofAck bool
}

// target is the queue as a put sees it, kept in the queue so that a put
// into an existing queue allocates none.
func (q *queue) target() *target {
	if q.tgt.q == nil {
		q.tgt = target{ns: q.ns.name, name: q.name, q: q, cfg: &q.cfg}
	}
	return &q.tgt
}

func (t *target) key() string { return t.ns + "\x00" + t.name + "\x00" }

// planned is the outcome of preparing one put.
type planned struct {
	dupOf  int    // ≥0: duplicate of the plan's job at this index
	dupID  string // duplicate of an existing job (or idempotency entry)
	dupAt  int64
	dupRes *PutResult
	id     string
	t      *target
}

func (e *Engine) preparePut(t *target, req *PutRequest, plan *putPlan) (planned, error) {
	now := e.now
	out := planned{dupOf: -1, t: t}
	if err := checkPayloadSize("payload", len(req.Payload), t.cfg.MaxPayload); err != nil {
		return out, err
	}
	if req.ID != "" && !ValidJobID(req.ID) {
		return out, badf("id", "must match [A-Za-z0-9_.:-]{1,%d}, got %q", MaxIDLen, req.ID)
	}
	if req.Delay != nil && req.At != nil {
		return out, badf("at", "delay and at are exclusive")
	}
	at := now
	if req.Delay != nil {
		if err := checkDuration("delay", *req.Delay, MaxDelay); err != nil {
			return out, err
		}
		at = now + req.Delay.Milliseconds()
	}
	if req.At != nil {
		a := ms(*req.At)
		if a-now > MaxDelay.Milliseconds() {
			return out, badf("at", "must be at most %s from now, got %s", MaxDelay, req.At.UTC().Format(time.RFC3339))
		}
		at = max(a, 0)
	}
	ttl := t.cfg.DefaultTTL
	if req.TTL != nil {
		if err := checkDuration("ttl", *req.TTL, MaxDelay); err != nil {
			return out, err
		}
		ttl = *req.TTL
	}
	ttr := t.cfg.DefaultTTR
	if req.TTR != nil {
		if *req.TTR < time.Millisecond || *req.TTR > MaxTTR {
			return out, badf("ttr", "must be between 1ms and %s, got %s", MaxTTR, *req.TTR)
		}
		ttr = *req.TTR
	}
	tries := t.cfg.DefaultTries
	if req.Tries != nil {
		tries = *req.Tries
	}
	if tries > MaxTries {
		return out, badf("tries", "must be at most %d, got %d", MaxTries, tries)
	}
	prio := t.cfg.DefaultPriority
	if req.Priority != nil {
		prio = *req.Priority
	}
	if err := checkKey(req.Key); err != nil {
		return out, err
	}
	if err := checkTags(req.Tags); err != nil {
		return out, err
	}
	if req.ReplyTo != "" && !ValidQueueName(req.ReplyTo) {
		return out, badf("reply_to", "must be a queue name matching [A-Za-z0-9_.-]{1,%d}, got %q", MaxQueueNameLen, req.ReplyTo)
	}
	if req.Notify != "" && !ValidChannel(req.Notify) {
		return out, badf("notify", "must be a channel name: [A-Za-z0-9_.-]{1,200}, optionally followed by #user[,user...], at most %d bytes; got %q", MaxChannelNameLen, req.Notify)
	}
	if req.Cron != "" {
		sched, err := e.cronSchedule(req.Cron)
		if err != nil {
			return out, badf("cron", "invalid cron spec %q: %v", req.Cron, err)
		}
		if req.Delay == nil && req.At == nil {
			next := sched.Next(fromMS(now))
			if next.IsZero() {
				return out, badf("cron", "spec %q never fires", req.Cron)
			}
			at = ms(next)
		}
	}
	if len(req.IdempotencyKey) > MaxIdemKeyLen {
		return out, badf("idempotency_key", "must be at most %d bytes, got %d", MaxIdemKeyLen, len(req.IdempotencyKey))
	}
	var expire int64
	if ttl > 0 {
		expire = now + ttl.Milliseconds()
		if expire <= at {
			return out, badf("ttl", "must be longer than the delay: the job would expire (%s) before it activates (%s)",
				fromMS(expire).Format(time.RFC3339Nano), fromMS(at).Format(time.RFC3339Nano))
		}
	}

	// Duplicates: a client id of a job that exists, or an idempotency key
	// within the window — in the log or earlier in this same entry.
	var tk string
	if plan.multi {
		tk = t.key()
	}
	if req.ID != "" {
		if i, ok := plan.ids[tk+req.ID]; ok && plan.multi {
			out.dupOf = i
			return out, nil
		}
		if t.q != nil {
			k := makeIDKey(req.ID)
			if slot := e.idLookup(t.q.idx, &k); slot != noSlot {
				r := e.putResultOf(t.q, slot, true)
				out.dupRes = &r
				return out, nil
			}
		}
	}
	if req.IdempotencyKey != "" {
		if i, ok := plan.idems[tk+req.IdempotencyKey]; ok && plan.multi {
			out.dupOf = i
			return out, nil
		}
		if ie, ok := e.idem[idemMapKey(t.ns, t.name, req.IdempotencyKey)]; ok && ie.expire > now {
			r := e.dupByID(t, ie)
			out.dupRes = &r
			return out, nil
		}
	}
	if t.cfg.MaxJobs > 0 {
		n := uint64(plan.count[t.key()])
		if !plan.multi {
			n = 0
		}
		if t.q != nil {
			n += t.q.counts.Total() - t.q.counts.Completed
		}
		if n >= t.cfg.MaxJobs {
			return out, &Error{Code: CodeQueueFull, Message: fmt.Sprintf("queue %q is full: max_jobs is %d", t.name, t.cfg.MaxJobs)}
		}
	}

	// jobs in the far store count: the budget is the node's (far.go)
	if e.maxJobs > 0 && !plan.ofAck && uint64(e.jobs.live)+e.far.total+uint64(plan.n) >= e.maxJobs {
		return out, &Error{Code: CodeQueueFull, Message: fmt.Sprintf("the server is full: it holds its maximum of %d jobs (--max-jobs)", e.maxJobs)}
	}

	if e.seq+uint64(plan.n) >= MaxSeq {
		// a job record holds 48 bits of sequence number (slab.go)
		return out, errf(CodeUnavailable, "the server has handed out its last job sequence number (%d)", uint64(MaxSeq))
	}
	id := req.ID
	if id == "" {
		// the id carries the sequence number, so it needs no id-table
		// entry (idtable.go)
		id = newULID(now, e.seq+uint64(plan.n)+1, e.rng.Uint32()).String()
	}
	plan.n++
	r := e.ent.add()
	r.Kind = KindJob
	r.Job = JobImage{
		NS: t.ns, Queue: t.name, ID: id,
		Seq:          e.seq + uint64(plan.n),
		Phase:        phasePending,
		At:           at,
		Created:      now,
		Expire:       expire,
		Prio:         prio,
		TTR:          uint32(ttr.Milliseconds()),
		Tries:        tries,
		Key:          req.Key,
		Tags:         sortTags(req.Tags),
		ReplyTo:      req.ReplyTo,
		Cron:         req.Cron,
		Notify:       req.Notify,
		RetainResult: req.RetainResult.Milliseconds(),
		Payload:      inlineBlob(nonNil(req.Payload)),
	}
	if req.PayloadJSON {
		r.Job.Flags |= fPayloadJSON
	}
	if req.IdempotencyKey != "" && t.cfg.DedupWindow > 0 {
		ir := e.ent.add()
		ir.Kind, ir.NS, ir.Queue = KindIdem, t.ns, t.name
		ir.IdemKey, ir.IdemID, ir.IdemExpire, ir.IdemAt = req.IdempotencyKey, id, now+t.cfg.DedupWindow.Milliseconds(), at
	}
	if plan.ids == nil && plan.multi {
		plan.ids, plan.idems, plan.count = map[string]int{}, map[string]int{}, map[string]int{}
	}
	out.id = id
	return out, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (e *Engine) putResultOf(q *queue, slot uint32, dup bool) PutResult {
	j := e.jobs.get(slot)
	return PutResult{ID: e.jobID(slot), Seq: j.seqNo(), State: j.state, ActivateAt: fromMS(e.activateAt(slot)), Duplicate: dup}
}

// activateAt is the job's activation time as the API shows it (a reserved
// job keeps the activation time it had before the reservation).
func (e *Engine) activateAt(slot uint32) int64 {
	if r, ok := e.resv[slot]; ok {
		return r.origAt
	}
	return e.jobs.get(slot).atMS()
}

// dupByID answers a duplicate idempotency key: the original job if it still
// exists, else what the key remembers.
func (e *Engine) dupByID(t *target, ie idemEnt) PutResult {
	if t.q != nil {
		k := makeIDKey(ie.id)
		if slot := e.idLookup(t.q.idx, &k); slot != noSlot {
			return e.putResultOf(t.q, slot, true)
		}
	}
	return PutResult{ID: ie.id, State: StateGone, ActivateAt: fromMS(ie.at), Duplicate: true}
}

// Put enqueues one job.
func (e *Engine) Put(now time.Time, ns, q string, req PutRequest) (PutResult, error) {
	var one [1]PutResult
	res, err := e.putMany(now, ns, q, []PutRequest{req}, "", one[:0])
	if err != nil {
		return PutResult{}, err
	}
	return res[0], nil
}

// PutBatch enqueues up to MaxBatch jobs atomically: one invalid job rejects
// the whole batch with an error naming it (jobs[3].delay).
func (e *Engine) PutBatch(now time.Time, ns, q string, reqs []PutRequest) ([]PutResult, error) {
	if len(reqs) == 0 {
		return nil, badf("jobs", "must hold at least one job")
	}
	if len(reqs) > MaxBatch {
		return nil, badf("jobs", "at most %d jobs per batch, got %d", MaxBatch, len(reqs))
	}
	return e.putMany(now, ns, q, reqs, "jobs", make([]PutResult, 0, len(reqs)))
}

// putMany appends the results to res.
func (e *Engine) putMany(now time.Time, ns, qn string, reqs []PutRequest, listField string, res []PutResult) ([]PutResult, error) {
	e.begin(now)
	plan := putPlan{multi: len(reqs) > 1}
	t, err := e.resolveTarget(ns, qn, &plan)
	if err != nil {
		return nil, err
	}
	// The plans live in the engine between calls: a put allocates none.
	outs := slices.Grow(e.plans[:0], len(reqs))[:len(reqs)]
	defer func() {
		clear(outs)
		e.plans = outs[:0]
	}()
	for i := range reqs {
		p, err := e.preparePut(t, &reqs[i], &plan)
		if err != nil {
			if listField != "" {
				err = prefixField(err, fmt.Sprintf("%s[%d]", listField, i))
			}
			return nil, err
		}
		if p.id != "" && plan.multi {
			tk := t.key()
			if reqs[i].ID != "" {
				plan.ids[tk+reqs[i].ID] = i
			}
			if reqs[i].IdempotencyKey != "" {
				plan.idems[tk+reqs[i].IdempotencyKey] = i
			}
			plan.count[tk]++
		}
		outs[i] = p
	}
	if plan.n > 0 {
		e.stampCounters(uint64(plan.n), 0)
	}
	if err := e.commit(); err != nil {
		return nil, err
	}
	e.stats.Put += uint64(plan.n)
	if q := e.lookupQueue(ns, qn); q != nil {
		q.stats.Put += uint64(plan.n)
	}
	return e.putResults(outs, res), nil
}

// stampCounters records the counters the entry moves, so a log whose job
// records were all deleted later still restores them.
func (e *Engine) stampCounters(seqs, nonces uint64) {
	r := e.ent.add()
	r.Kind, r.Seq, r.Nonce = KindCounters, e.seq+seqs, e.nonce+nonces
}

// putResults appends the results of outs to res.
func (e *Engine) putResults(outs []planned, res []PutResult) []PutResult {
	base := len(res)
	res = slices.Grow(res, len(outs))[:base+len(outs)]
	for i, p := range outs {
		i := base + i
		switch {
		case p.dupRes != nil:
			res[i] = *p.dupRes
		case p.dupOf >= 0:
			res[i] = res[base+p.dupOf]
			res[i].Duplicate = true
		default:
			q := e.lookupQueue(p.t.ns, p.t.name)
			k := makeIDKey(p.id)
			slot := e.idLookup(q.idx, &k)
			j := e.jobs.get(slot)
			res[i] = PutResult{ID: p.id, Seq: j.seqNo(), State: j.state, ActivateAt: fromMS(j.atMS())}
		}
	}
	return res
}
