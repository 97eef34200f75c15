package engine

import (
	"cmp"
	"slices"
	"time"
)

// Relocation is how storage frees a log segment that a few long-lived jobs
// pin (one job delayed for a year keeping gigabytes of
// log alive). Each live payload or result in the segment is written again,
// inline in a fresh job record through the normal write path, so the job
// now points at the new copy; once nothing live points into the segment it
// can be deleted. The record is an ordinary idempotent job image, so replay
// and snapshots need nothing special.

// Relocate scans up to maxSlots job slots from cursor and re-logs the
// payloads and results of those living in segment seg, up to about
// maxBytes. read fetches a blob's bytes (the caller's I/O). It returns the
// cursor to continue from; done means the whole table was scanned.
//
// The blobs are read in log order, not slot order: payloads of a batch put
// share a frame that a reader checks whole (wal.FrameReader keeps the last
// one), and slot order is put order only until jobs are moved (shrink.go)
// or loaded from a snapshot.
func (e *Engine) Relocate(now time.Time, seg uint32, cursor uint32, maxSlots int, maxBytes int, read func(BlobRef) ([]byte, error)) (next uint32, done bool, err error) {
	e.begin(now)
	type found struct {
		off                 uint32 // of the first blob in seg
		slot                uint32
		inPayload, inResult bool
		result              BlobRef
	}
	var todo []found
	bytes := 0
	end := e.jobs.next
	slot := cursor
	for ; slot < end && maxSlots > 0 && bytes < maxBytes; slot, maxSlots = slot+1, maxSlots-1 {
		j := e.jobs.get(slot)
		if j.state == StateNone {
			continue
		}
		// only a job completed with a result has a result blob: the others'
		// rare fields are not looked up (a cache miss each, most of a
		// relocation's time in a table of keyed, tagged jobs)
		var x jobExt
		if j.flags&fHasResult != 0 {
			x, _ = e.ext(slot)
		}
		f := found{slot: slot, inPayload: j.payload.Len > 0 && j.payload.Segment == seg, inResult: x.result.Len > 0 && x.result.Segment == seg, result: x.result}
		switch {
		case f.inPayload:
			f.off = j.payload.Offset
			bytes += int(j.payload.Len)
		case f.inResult:
			f.off = x.result.Offset
		default:
			continue
		}
		if f.inResult {
			bytes += int(x.result.Len)
		}
		todo = append(todo, f)
	}
	slices.SortFunc(todo, func(a, b found) int { return cmp.Compare(a.off, b.off) })
	for _, f := range todo {
		j := e.jobs.get(f.slot)
		img := e.image(e.queues[e.jq(j)], f.slot)
		if f.inPayload {
			data, err := read(j.payload)
			if err != nil {
				return cursor, false, err
			}
			img.Payload = inlineBlob(data)
		}
		if f.inResult {
			data, err := read(f.result)
			if err != nil {
				return cursor, false, err
			}
			img.Result = inlineBlob(data)
		}
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return cursor, false, err
	}
	return slot, slot >= e.jobs.next, nil
}
