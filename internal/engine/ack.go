package engine

import (
	"fmt"
	"time"
)

// Ack acknowledges a reservation: the job is deleted, kept as completed with
// its result (retaining queues, call), or re-armed (reschedule, cron). A
// `next` job is put in the same entry, so both happen or neither; a result
// goes to reply_to as a new job.
func (e *Engine) Ack(now time.Time, ns, qn, id string, req AckRequest) (AckResult, error) {
	e.begin(now)
	plan := putPlan{multi: true, ofAck: true}
	a, err := e.prepareAck(ns, qn, id, &req, &plan)
	if err != nil {
		return AckResult{}, err
	}
	if plan.n > 0 {
		e.stampCounters(uint64(plan.n), 0)
	}
	if err := e.commit(); err != nil {
		return AckResult{}, err
	}
	e.stats.Put += uint64(plan.n)
	return e.ackDone(&a), nil
}

// MaxAckBatch is the most reservations one batch ack may name.
const MaxAckBatch = 1000

// AckItem is one reservation of a batch ack.
type AckItem struct {
	ID, Receipt string
}

// AckBatch acknowledges many reservations of one queue in one log entry,
// all or none: a receipt that does not match (or an id listed twice) fails
// the whole batch, with the item's index in the error's field, and changes
// nothing, like a batch put (docs/api.md). Each job ends as a single ack
// without result, next or reschedule would leave it.
func (e *Engine) AckBatch(now time.Time, ns, qn string, items []AckItem) ([]AckResult, error) {
	e.begin(now)
	if len(items) == 0 {
		return nil, badf("acks", "name at least one reservation")
	}
	if len(items) > MaxAckBatch {
		return nil, badf("acks", "at most %d per batch, got %d", MaxAckBatch, len(items))
	}
	plan := putPlan{multi: true, ofAck: true}
	done := make([]ackPrepared, len(items))
	seen := make(map[string]int, len(items))
	for i, it := range items {
		field := fmt.Sprintf("acks[%d]", i)
		if j, dup := seen[it.ID]; dup {
			return nil, badf(field+".id", "job %q is listed twice (also acks[%d])", it.ID, j)
		}
		seen[it.ID] = i
		a, err := e.prepareAck(ns, qn, it.ID, &AckRequest{Receipt: it.Receipt}, &plan)
		if err != nil {
			return nil, prefixField(err, field)
		}
		done[i] = a
	}
	if plan.n > 0 {
		e.stampCounters(uint64(plan.n), 0)
	}
	if err := e.commit(); err != nil {
		return nil, err
	}
	e.stats.Put += uint64(plan.n)
	out := make([]AckResult, len(done))
	for i := range done {
		out[i] = e.ackDone(&done[i])
	}
	return out, nil
}

// AckAndTake acknowledges a reservation and then reserves the next jobs
// (the worker's next take) in the same loop turn: two log entries that the
// broker commits in one batch, so a worker needs one round trip per job.
// The take's request is checked first, so a bad one changes nothing; a
// failed ack takes nothing. An empty take is not an error.
func (e *Engine) AckAndTake(now time.Time, ns, qn, id string, req AckRequest, take TakeRequest) (AckResult, []Job, error) {
	if _, _, err := take.check(); err != nil {
		return AckResult{}, nil, prefixField(err, "take")
	}
	res, err := e.Ack(now, ns, qn, id, req)
	if err != nil {
		return AckResult{}, nil, err
	}
	jobs, err := e.Take(now, ns, take)
	if err != nil {
		return res, nil, prefixField(err, "take")
	}
	return res, jobs, nil
}

// ackPrepared is an ack whose records are in the scratch entry.
type ackPrepared struct {
	q       *queue
	slot    uint32
	rearm   bool
	res     AckResult
	hasNext bool
	nextOut planned
}

// ackDone counts a committed ack and completes its answer.
func (e *Engine) ackDone(a *ackPrepared) AckResult {
	e.stats.Acked++
	a.q.stats.Acked++
	res := a.res
	if a.rearm {
		res.State = e.jobs.get(a.slot).state.String()
	}
	if a.hasNext {
		switch {
		case a.nextOut.dupRes != nil:
			res.NextID = a.nextOut.dupRes.ID
		default:
			res.NextID = a.nextOut.id
		}
	}
	return res
}

// prepareAck checks one ack and adds its records (and those of its next
// and reply jobs, to plan) to the scratch entry.
func (e *Engine) prepareAck(ns, qn, id string, reqp *AckRequest, plan *putPlan) (ackPrepared, error) {
	req := *reqp
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return ackPrepared{}, err
	}
	if err := e.checkReceipt(slot, id, req.Receipt, req.AnyReceipt); err != nil {
		return ackPrepared{}, err
	}
	if req.HasResult {
		if err := checkPayloadSize("result", len(req.Result), q.cfg.MaxPayload); err != nil {
			return ackPrepared{}, err
		}
	}
	img := e.image(q, slot)
	var rearm int64 = -1
	if rs := req.Reschedule; rs != nil {
		if rs.Delay != nil && rs.At != nil {
			return ackPrepared{}, badf("reschedule.at", "delay and at are exclusive")
		}
		rearm = e.now
		if rs.Delay != nil {
			if err := checkDuration("reschedule.delay", *rs.Delay, MaxDelay); err != nil {
				return ackPrepared{}, err
			}
			rearm += rs.Delay.Milliseconds()
		}
		if rs.At != nil {
			if ms(*rs.At)-e.now > MaxDelay.Milliseconds() {
				return ackPrepared{}, badf("reschedule.at", "must be at most %s from now", MaxDelay)
			}
			rearm = max(ms(*rs.At), 0)
		}
	} else if img.Cron != "" {
		sched, err := e.cronSchedule(img.Cron)
		if err == nil {
			if next := sched.Next(fromMS(e.now)); !next.IsZero() {
				rearm = ms(next)
			}
		}
	}

	var nextOut planned
	if req.Next != nil {
		t, err := e.resolveTarget(ns, req.Next.Queue, plan)
		if err != nil {
			return ackPrepared{}, prefixField(err, "next")
		}
		nextOut, err = e.preparePut(t, &req.Next.Put, plan)
		if err != nil {
			return ackPrepared{}, prefixField(err, "next")
		}
	}
	if img.ReplyTo != "" {
		// A reply is best effort: a reply queue that cannot be created
		// (namespace without auto-create) does not fail the ack.
		if t, err := e.resolveTarget(ns, img.ReplyTo, plan); err == nil {
			reply := PutRequest{Payload: []byte("null"), PayloadJSON: true, Tags: map[string]string{"reply_for": id}}
			if req.HasResult {
				reply.Payload, reply.PayloadJSON = req.Result, req.ResultJSON
			}
			if _, err := e.preparePut(t, &reply, plan); err != nil {
				return ackPrepared{}, prefixField(err, "result")
			}
		}
	}

	e.events.hint = EventCompleted
	e.events.hasResult, e.events.result, e.events.resultJSON = req.HasResult, req.Result, req.ResultJSON
	res := AckResult{ID: id}
	retain := max(q.cfg.RetainResults.Milliseconds(), img.RetainResult)
	switch {
	case rearm >= 0:
		img.Phase, img.At, img.Attempt, img.LastError = phasePending, rearm, 0, ""
		img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
	case retain > 0:
		img.Phase = phaseCompleted
		img.RetainUntil = e.now + retain
		img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
		img.Flags &^= fHasResult | fResultJSON
		img.Result = Blob{}
		if req.HasResult {
			img.Flags |= fHasResult
			if req.ResultJSON {
				img.Flags |= fResultJSON
			}
			img.Result = inlineBlob(nonNil(req.Result))
		}
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
		res.State = "completed"
	default:
		r := e.ent.add()
		r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, id
		res.State = "deleted"
	}
	return ackPrepared{q: q, slot: slot, rearm: rearm >= 0, res: res, hasNext: req.Next != nil, nextOut: nextOut}, nil
}

// Nack gives a reservation back: the job waits the given delay (or the
// queue's backoff) and runs again, or goes dead when its tries are used up.
// It answers the job's resulting state.
func (e *Engine) Nack(now time.Time, ns, qn, id string, req NackRequest) (State, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return 0, err
	}
	if err := e.checkReceipt(slot, id, req.Receipt, req.AnyReceipt); err != nil {
		return 0, err
	}
	if req.Delay != nil {
		if err := checkDuration("delay", *req.Delay, MaxDelay); err != nil {
			return 0, err
		}
	}
	if len(req.Error) > MaxErrorLen {
		return 0, badf("error", "must be at most %d bytes, got %d", MaxErrorLen, len(req.Error))
	}
	return e.giveBack(q, slot, ns, qn, id, giveBackRule{
		verb: "nacked", priority: req.Priority, lastError: req.Error, count: true,
		at: func(img *JobImage) int64 {
			if req.Delay != nil {
				return e.now + req.Delay.Milliseconds()
			}
			return e.now + e.backoff(q.cfg.Backoff, img.Attempt)
		},
	})
}

// giveBackRule is what differs between the ways a reservation is given
// back (Nack, Release); giveBack is the rule they share.
type giveBackRule struct {
	verb      string  // "nacked", "released": for a dead job's last error
	priority  *uint32 // nil keeps the job's priority
	lastError string  // "" keeps the job's last error
	count     bool    // count a release (beanstalkd's stats-job)
	// at is when the job runs again, given its image.
	at func(img *JobImage) int64
}

// giveBack ends the reservation of the job in slot: the job goes if its TTL
// passed while it ran (docs/api.md, the job object: ttl), goes dead when
// its tries are used up, and otherwise waits until rule.at to run again.
// It answers the job's resulting state (StateGone when it went).
func (e *Engine) giveBack(q *queue, slot uint32, ns, qn, id string, rule giveBackRule) (State, error) {
	img := e.image(q, slot) // At is the activation time the reservation began from
	img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
	if rule.count {
		img.Releases++
	}
	e.events.hint = EventExpired // the only delete a give-back makes
	if rule.priority != nil {
		img.Prio = *rule.priority
	}
	if rule.lastError != "" {
		img.LastError = rule.lastError
	}
	r := e.ent.add()
	switch {
	case img.Expire != 0 && img.Expire <= e.now:
		r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, id
	case img.Tries > 0 && img.Attempt >= img.Tries:
		img.Phase = phaseDead
		img.Flags &^= fBuried
		if img.LastError == "" {
			img.LastError = fmt.Sprintf("%s on the last of %d tries", rule.verb, img.Tries)
		}
		r.Kind, r.Job = KindJob, img
	default:
		img.Phase = phasePending
		img.At = rule.at(&img)
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	e.stats.Nacked++
	q.stats.Nacked++
	if e.ent.Records[0].Kind == KindJobDelete {
		e.stats.Expired++
		q.stats.Expired++
		return StateGone, nil
	}
	st := e.jobs.get(slot).state
	if st == StateDead {
		e.stats.Dead++
		q.stats.Dead++
	}
	return st, nil
}

// Touch extends a reservation by ttr (or the reservation's TTR).
func (e *Engine) Touch(now time.Time, ns, qn, id string, req TouchRequest) (time.Time, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return time.Time{}, err
	}
	if err := e.checkReceipt(slot, id, req.Receipt, req.AnyReceipt); err != nil {
		return time.Time{}, err
	}
	img := e.image(q, slot)
	ext := int64(img.ResvTTR)
	if req.TTR != nil {
		if *req.TTR < time.Millisecond || *req.TTR > MaxTTR {
			return time.Time{}, badf("ttr", "must be between 1ms and %s, got %s", MaxTTR, *req.TTR)
		}
		ext = req.TTR.Milliseconds()
	}
	img.Until = e.resvBase + ext
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	if err := e.commit(); err != nil {
		return time.Time{}, err
	}
	return fromMS(img.Until), nil
}

// Bury moves a reserved job to dead with a reason.
func (e *Engine) Bury(now time.Time, ns, qn, id string, req BuryRequest) error {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return err
	}
	if err := e.checkReceipt(slot, id, req.Receipt, req.AnyReceipt); err != nil {
		return err
	}
	if len(req.Reason) > MaxErrorLen {
		return badf("reason", "must be at most %d bytes, got %d", MaxErrorLen, len(req.Reason))
	}
	img := e.image(q, slot)
	img.Phase = phaseDead
	img.Flags |= fBuried
	img.Buries++
	img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
	if req.Reason != "" {
		img.LastError = req.Reason
	}
	if req.Priority != nil {
		img.Prio = *req.Priority
	}
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	if err := e.commit(); err != nil {
		return err
	}
	e.stats.Dead++
	q.stats.Dead++
	return nil
}
