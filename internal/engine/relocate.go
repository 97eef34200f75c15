package engine

import (
	"time"
)

// Relocation is how storage frees a log segment that a few long-lived jobs
// pin (one job delayed for a year keeping gigabytes of
// log alive). Each live payload or result in the segment is written again,
// inline in a fresh job record through the normal write path, so the job
// now points at the new copy; once nothing live points into the segment it
// can be deleted. The record is an ordinary idempotent job image, so replay
// and snapshots need nothing special.
//
// It runs in two phases, each spread over many calls by the caller.
// FindPinned walks the job table and notes where each live blob of the
// segment is; it reads nothing. Relocate then re-logs them in log order.
// Reading in log order matters more than anything else here: a batch put
// stores a thousand payloads in one frame, which a reader checks whole
// (wal.FrameReader keeps the last one), and the slot order of the table is
// put order only until jobs move (shrink.go) or come from a snapshot.
// Relocating a slot range at a time read a different frame for almost
// every job (docs/benchmarks.md, "Log compaction and activation lateness").

// A Pinned is a blob FindPinned found in the segment: where, and which job
// holds it. The job is known by slot and sequence number both: by the time
// Relocate comes to it the job may be gone and its slot reused.
type Pinned struct {
	Off    uint32
	Slot   uint32
	Seq    uint64
	Result bool // the job's result, not its payload
}

// FindPinned scans up to maxSlots job slots from cursor and appends to
// found the payloads and results that live in segment seg. It returns the
// cursor to continue from; done means the whole table was scanned.
func (e *Engine) FindPinned(seg uint32, cursor uint32, maxSlots int, found []Pinned) (next uint32, done bool, out []Pinned) {
	end := e.jobs.next
	slot := cursor
	for ; slot < end && maxSlots > 0; slot, maxSlots = slot+1, maxSlots-1 {
		j := e.jobs.get(slot)
		if j.state == StateNone {
			continue
		}
		if j.payload.Len > 0 && j.payload.Segment == seg {
			found = append(found, Pinned{Off: j.payload.Offset, Slot: slot, Seq: j.seqNo()})
		}
		// only a job completed with a result has a result blob: the others'
		// rare fields are not looked up (a cache miss each, most of a
		// relocation's time in a table of keyed, tagged jobs)
		if j.flags&fHasResult != 0 {
			if x, _ := e.ext(slot); x.result.Len > 0 && x.result.Segment == seg {
				found = append(found, Pinned{Off: x.result.Offset, Slot: slot, Seq: j.seqNo(), Result: true})
			}
		}
	}
	return slot, slot >= end, found
}

// Relocate re-logs the blobs of todo, in its order (the caller sorts it by
// Off), whose job still holds them in segment seg; the others are skipped.
// It stops once about maxBytes of blobs are re-logged and returns how many
// entries of todo it went through. A job with both its payload and its
// result in the segment has both re-logged at its first entry. read
// fetches a blob's bytes (the caller's I/O).
func (e *Engine) Relocate(now time.Time, seg uint32, todo []Pinned, maxBytes int, read func(BlobRef) ([]byte, error)) (n int, err error) {
	e.begin(now)
	bytes := 0
	for ; n < len(todo) && bytes < maxBytes; n++ {
		p := todo[n]
		if p.Slot >= e.jobs.next {
			continue
		}
		j := e.jobs.get(p.Slot)
		if j.state == StateNone || j.seqNo() != p.Seq {
			continue
		}
		var x jobExt
		if j.flags&fHasResult != 0 {
			x, _ = e.ext(p.Slot)
		}
		inPayload := j.payload.Len > 0 && j.payload.Segment == seg
		inResult := x.result.Len > 0 && x.result.Segment == seg
		if !inPayload && !inResult {
			continue // relocated at its other entry, or changed since
		}
		img := e.image(e.queues[e.jq(j)], p.Slot)
		if inPayload {
			data, err := read(j.payload)
			if err != nil {
				return 0, err
			}
			img.Payload = inlineBlob(data)
			bytes += len(data)
		}
		if inResult {
			data, err := read(x.result)
			if err != nil {
				return 0, err
			}
			img.Result = inlineBlob(data)
			bytes += len(data)
		}
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	return n, nil
}
