package engine

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// check validates a take request: how many jobs and the reservation's TTR
// in milliseconds (0: each job's own).
func (req *TakeRequest) check() (n int, ttr uint32, err error) {
	n = req.Max
	if n == 0 {
		n = 1
	}
	if n < 0 || n > MaxTake {
		return 0, 0, badf("max", "must be between 1 and %d, got %d", MaxTake, req.Max)
	}
	if len(req.Queues) == 0 {
		return 0, 0, badf("queues", "name at least one queue")
	}
	if len(req.Queues) > MaxTakeQueues {
		return 0, 0, badf("queues", "at most %d queues per take, got %d", MaxTakeQueues, len(req.Queues))
	}
	if req.TTR != nil {
		if *req.TTR < time.Millisecond || *req.TTR > MaxTTR {
			return 0, 0, badf("ttr", "must be between 1ms and %s, got %s", MaxTTR, *req.TTR)
		}
		ttr = uint32(req.TTR.Milliseconds())
	}
	for i, name := range req.Queues {
		if !ValidQueueName(name) {
			return 0, 0, badf(fmt.Sprintf("queues[%d]", i), "must match [A-Za-z0-9_.-]{1,%d}, got %q", MaxQueueNameLen, name)
		}
	}
	return n, ttr, nil
}

// Take reserves up to req.Max ready jobs, trying the listed queues in order
// and each queue in serving order. Missing queues are skipped (workers may
// start before producers); paused queues hand out nothing.
func (e *Engine) Take(now time.Time, ns string, req TakeRequest) ([]Job, error) {
	e.begin(now)
	n, ttr, err := req.check()
	if err != nil {
		return nil, err
	}
	nsObj, err := e.findNS(ns)
	if err != nil {
		return nil, err
	}
	picked := e.tmp[:0]
	var visited map[uint32]struct{} // queues already drawn from; a name listed twice counts once
	if len(req.Queues) > 1 {
		visited = make(map[uint32]struct{}, len(req.Queues))
	}
	for _, name := range req.Queues {
		if len(picked) >= n {
			break
		}
		qi, ok := nsObj.queues[name]
		if !ok {
			continue
		}
		if visited != nil {
			if _, dup := visited[qi]; dup {
				continue
			}
			visited[qi] = struct{}{}
		}
		q := e.queues[qi]
		if q.paused {
			continue
		}
		picked = e.rbest(&q.ready, n-len(picked), picked)
	}
	e.tmp = picked
	if len(picked) == 0 {
		return nil, nil
	}
	nonces, err := e.receiptNonces(len(picked))
	if err != nil {
		return nil, err
	}
	for i, slot := range picked {
		q := e.queues[e.jq(e.jobs.get(slot))]
		r := e.ent.add()
		r.Kind = KindJob
		r.Job = e.image(q, slot)
		img := &r.Job
		img.Phase = phaseReserved
		img.Attempt++
		img.Nonce = nonces[i]
		img.ResvTTR = img.TTR
		if ttr != 0 {
			img.ResvTTR = ttr
		}
		img.Until = e.resvBase + int64(img.ResvTTR)
	}
	e.stampCounters(0, uint64(len(picked)))
	if err := e.commit(); err != nil {
		return nil, err
	}
	e.stats.Taken += uint64(len(picked))
	out := make([]Job, len(picked))
	for i, slot := range picked {
		q := e.queues[e.jq(e.jobs.get(slot))]
		q.stats.Taken++
		out[i] = e.view(q, slot)
		if out[i].Attempt == 1 && e.onFirstTake != nil {
			e.onFirstTake(q.ns.name, q.name, fromMS(e.now).Sub(out[i].ActivateAt))
		}
	}
	return out, nil
}

// receiptNonces draws one random reservation nonce per job from the
// caller's entropy source (Options.Entropy). The nonce is the secret half of
// a receipt: with 64 random bits, a worker that knows its own receipts
// cannot derive another worker's. It goes into the job's log record, so
// replay never draws.
func (e *Engine) receiptNonces(n int) ([]uint64, error) {
	buf := e.nonceBuf[:0]
	buf = slices.Grow(buf, 8*n)[:8*n]
	e.nonceBuf = buf
	if _, err := io.ReadFull(e.random, buf); err != nil {
		return nil, fmt.Errorf("drawing receipt nonces: %w", err)
	}
	out := make([]uint64, n)
	for i := range out {
		v := binary.LittleEndian.Uint64(buf[8*i:])
		if v == 0 {
			v = 1 // 0 means "not reserved" in job images
		}
		out[i] = v
	}
	return out, nil
}

// formatReceipt writes a receipt: the job's sequence number and the
// reservation's random nonce, both in base 36 (at most 13 + 1 + 13 bytes).
func formatReceipt(seq, nonce uint64) string {
	return strconv.FormatUint(seq, 36) + "-" + strconv.FormatUint(nonce, 36)
}

// checkReceipt verifies that the job is reserved and, unless any is set,
// that receipt names its current reservation.
func (e *Engine) checkReceipt(slot uint32, id, receipt string, any bool) error {
	j := e.jobs.get(slot)
	if j.state != StateReserved {
		return errf(CodeConflict, "job %q is not reserved (it is %s)", id, j.state)
	}
	if any {
		return nil
	}
	if receipt == "" {
		return badf("receipt", "required: the receipt from the take that reserved the job")
	}
	if receipt != formatReceipt(j.seqNo(), e.resv[slot].nonce) {
		return errf(CodeConflict, "receipt does not match the current reservation of job %q (it expired or the job was taken again)", id)
	}
	return nil
}

// backoff computes the queue's retry delay for the given attempt.
func (e *Engine) backoff(b Backoff, attempt uint32) int64 {
	d := float64(b.Initial.Milliseconds())
	if attempt > 1 {
		d *= math.Pow(b.Multiplier, float64(attempt-1))
	}
	if maxMS := float64(b.Max.Milliseconds()); d > maxMS || math.IsInf(d, 0) || math.IsNaN(d) {
		d = maxMS
	}
	if b.Jitter > 0 {
		d *= 1 - b.Jitter + 2*b.Jitter*e.rng.Float64()
	}
	return int64(math.Round(d))
}

// ReserveJob reserves one particular job, whatever its state but reserved
// (beanstalkd reserve-job), bypassing order and pauses.
func (e *Engine) ReserveJob(now time.Time, ns, qn, id string, ttr *time.Duration) (Job, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	switch e.jobs.get(slot).state {
	case StateReserved:
		return Job{}, errf(CodeConflict, "job %q is already reserved", id)
	case StateCompleted:
		return Job{}, errf(CodeConflict, "job %q is completed", id)
	}
	img := e.image(q, slot)
	img.Phase = phaseReserved
	img.Flags &^= fBuried
	img.Attempt++
	nonces, err := e.receiptNonces(1)
	if err != nil {
		return Job{}, err
	}
	img.Nonce = nonces[0]
	img.ResvTTR = img.TTR
	if ttr != nil {
		if *ttr < time.Millisecond || *ttr > MaxTTR {
			return Job{}, badf("ttr", "must be between 1ms and %s, got %s", MaxTTR, *ttr)
		}
		img.ResvTTR = uint32(ttr.Milliseconds())
	}
	img.Until = e.resvBase + int64(img.ResvTTR)
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	e.stampCounters(0, 1)
	if err := e.commit(); err != nil {
		return Job{}, err
	}
	e.stats.Taken++
	q.stats.Taken++
	return e.view(q, slot), nil
}

// TakeBest reserves the single most urgent ready job across the listed
// queues (serving order compared across queues, as beanstalkd compares the
// heads of all watched tubes), or nothing. Take instead drains the queues
// in the order given, which would hand out a less urgent job from an
// earlier tube.
func (e *Engine) TakeBest(now time.Time, ns string, queues []string) ([]Job, error) {
	e.Advance(now)
	nsObj, err := e.findNS(ns)
	if err != nil {
		return nil, err
	}
	best, bestName := noSlot, ""
	var bestQ *queue
	for _, name := range queues {
		qi, ok := nsObj.queues[name]
		if !ok {
			continue
		}
		q := e.queues[qi]
		if q.paused || q.ready.n == 0 {
			continue
		}
		// Heaps of different queues share one order, so comparing their
		// heads with either heap's order is sound.
		if head := q.ready.head(); best == noSlot || e.lessBy(byServing, head, best) {
			best, bestName, bestQ = head, name, q
		}
	}
	if bestQ == nil {
		return nil, nil
	}
	return e.Take(now, ns, TakeRequest{Queues: []string{bestName}, Max: 1})
}
