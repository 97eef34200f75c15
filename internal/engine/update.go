package engine

import (
	"time"
)

// Update patches a job in place (docs/api.md, PATCH of a job).
func (e *Engine) Update(now time.Time, ns, qn, id string, req UpdateRequest) (Job, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	switch e.jobs.get(slot).state {
	case StateCompleted:
		return Job{}, errf(CodeConflict, "job %q is completed and can no longer change", id)
	case StateReserved:
		if req.Receipt == "" {
			return Job{}, errf(CodeConflict, "job %q is reserved: pass its receipt to change it", id)
		}
		if err := e.checkReceipt(slot, id, req.Receipt, false); err != nil {
			return Job{}, err
		}
	}
	img := e.image(q, slot)
	if req.HasPayload {
		if err := checkPayloadSize("payload", len(req.Payload), q.cfg.MaxPayload); err != nil {
			return Job{}, err
		}
		img.Payload = inlineBlob(nonNil(req.Payload))
		img.Flags &^= fPayloadJSON
		if req.PayloadJSON {
			img.Flags |= fPayloadJSON
		}
	}
	if req.Delay != nil && req.At != nil {
		return Job{}, badf("at", "delay and at are exclusive")
	}
	if req.Delay != nil {
		if err := checkDuration("delay", *req.Delay, MaxDelay); err != nil {
			return Job{}, err
		}
		img.At = e.now + req.Delay.Milliseconds()
	}
	if req.At != nil {
		if ms(*req.At)-e.now > MaxDelay.Milliseconds() {
			return Job{}, badf("at", "must be at most %s from now", MaxDelay)
		}
		img.At = max(ms(*req.At), 0)
	}
	if req.Priority != nil {
		img.Prio = *req.Priority
	}
	if req.HasTags {
		if err := checkTags(req.Tags); err != nil {
			return Job{}, err
		}
		img.Tags = sortTags(req.Tags)
	}
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	if err := e.commit(); err != nil {
		return Job{}, err
	}
	return e.view(q, slot), nil
}
