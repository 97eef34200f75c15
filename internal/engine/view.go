package engine

import "time"

// view copies a job out of the engine for an answer.
func (e *Engine) view(q *queue, slot uint32) Job {
	j := e.jobs.get(slot)
	v := Job{
		ID:          e.jobID(slot),
		Seq:         j.seqNo(),
		Namespace:   q.ns.name,
		Queue:       q.name,
		State:       j.state,
		Payload:     j.payload,
		PayloadJSON: j.flags&fPayloadJSON != 0,
		Priority:    e.jprio(j),
		Key:         e.keys.keys[j.key],
		CreatedAt:   fromMS(e.created(slot)),
		ActivateAt:  fromMS(e.activateAt(slot)),
		TTR:         time.Duration(e.jttr(j)) * time.Millisecond,
		Tries:       uint32(j.tries),
		Attempt:     e.attempt(slot),
		Buried:      j.flags&fBuried != 0,
	}
	if r, ok := e.resv[slot]; ok {
		v.Receipt = formatReceipt(j.seqNo(), r.nonce)
		v.ReservedUntil = fromMS(r.until)
		v.TTR = time.Duration(r.ttr) * time.Millisecond
	}
	if x, ok := e.ext(slot); ok {
		cloneExtStrings(&x)
		if x.expire != 0 {
			v.ExpireAt = fromMS(x.expire)
		}
		if len(x.tags) > 0 {
			v.Tags = make(map[string]string, len(x.tags)/2)
			for i := 0; i+1 < len(x.tags); i += 2 {
				v.Tags[x.tags[i]] = x.tags[i+1]
			}
		}
		v.LastError, v.ReplyTo, v.Cron, v.Notify = x.lastError, x.replyTo, x.cron, x.notify
		v.Timeouts, v.Releases, v.Buries, v.Kicks = x.timeouts, x.releases, x.buries, x.kicks
		if j.state == StateCompleted {
			v.HasResult = true
			v.Result = x.result
			v.ResultJSON = j.flags&fResultJSON != 0
			if j.flags&fHasResult == 0 {
				v.Result = BlobRef{}
				v.ResultJSON = true
			}
		}
	}
	return v
}

// HasStoredResult reports whether a completed job view carries result bytes
// in the log (false: its result is JSON null).
func (j *Job) HasStoredResult() bool { return j.State == StateCompleted && j.Result != (BlobRef{}) }
