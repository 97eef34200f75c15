package engine

import "time"

// DeadLetterDamaged moves every job whose payload or result lies (even in
// part) in bytes [from, to) of log segment seg to dead, because storage
// found those bytes damaged. The damaged blobs are dropped from the job
// (they cannot be served, and keeping the reference would pin the segment
// forever), and reason, which should name the file and offset, becomes the
// job's last error. Like every change it is one logged entry of ordinary
// job images, so replay and snapshots reproduce it. It returns how many
// jobs it changed; jobs already dead are changed too (their blobs go).
func (e *Engine) DeadLetterDamaged(now time.Time, seg, from, to uint32, reason string) (int, error) {
	e.begin(now)
	if len(reason) > MaxErrorLen {
		reason = reason[:MaxErrorLen]
	}
	in := func(r BlobRef) bool {
		return r.Len > 0 && r.Segment == seg && r.Offset < to && uint64(r.Offset)+uint64(r.Len) > uint64(from)
	}
	n, dead := 0, 0
	var queues []*queue
	for slot := uint32(0); slot < e.jobs.next; slot++ {
		j := e.jobs.get(slot)
		if j.state == StateNone {
			continue
		}
		x, ok := e.ext(slot)
		inPayload := in(j.payload)
		inResult := ok && in(x.result)
		if !inPayload && !inResult {
			continue
		}
		q := e.queues[e.jq(j)]
		img := e.image(q, slot)
		if inPayload {
			img.Payload = inlineBlob(nil)
		}
		if inResult {
			img.Result = inlineBlob(nil)
		}
		if j.state != StateDead {
			dead++
			queues = append(queues, q)
		}
		img.Phase = phaseDead
		img.Nonce, img.Until, img.ResvTTR = 0, 0, 0
		img.LastError = reason
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
		n++
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	e.stats.Dead += uint64(dead)
	for _, q := range queues {
		q.stats.Dead++
	}
	return n, nil
}
