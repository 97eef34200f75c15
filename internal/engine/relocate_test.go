package engine

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Blobs found by FindPinned and sorted by offset are read in log order
// whatever order the jobs sit in, so a frame of a batch put is checked once
// (wal.FrameReader), and every live payload and result in the segment is
// re-logged, across calls of a few slots and bytes each.
func TestRelocateReadsInLogOrder(t *testing.T) {
	f := newFixture(t)
	retain := time.Hour // acked jobs keep their results
	if _, _, err := f.e.PutQueue(f.now, "default", "q", QueuePatch{RetainResults: &retain}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 400; i++ {
		ids = append(ids, f.put("q", PutRequest{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), PayloadJSON: true}).ID)
	}
	for _, j := range f.take(50, "q") {
		if _, err := f.e.Ack(f.now, "default", "q", j.ID, AckRequest{Receipt: j.Receipt, HasResult: true, Result: []byte("done")}); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		if i%3 == 0 {
			if err := f.e.Cancel(f.now, "default", "q", id, ""); err != nil && CodeOf(err) != CodeJobNotFound {
				t.Fatal(err)
			}
		}
	}
	// scramble the slots: the jobs from the top move into the holes
	f.e.beginShrink(uint32(f.e.jobs.live + 1))
	for f.e.Shrinking() {
		f.e.Shrink(1000)
	}
	blobs := 0
	f.e.forEachJob(func(slot uint32, j *job) {
		if j.payload.Len > 0 {
			blobs++
		}
		if x, _ := f.e.ext(slot); x.result.Len > 0 {
			blobs++
		}
	})
	// a job's result comes right after its payload, so the payloads (JSON
	// objects; the results read "done") are the ones in log order
	found := findPinned(f.e, 1, 7)
	slices.SortFunc(found, func(a, b Pinned) int { return cmp.Compare(a.Off, b.Off) })
	f.sink.num = 2 // the re-logged copies go to a later segment
	var payloads []uint32
	reads := 0
	read := func(r BlobRef) ([]byte, error) {
		reads++
		b := f.sink.blob(r)
		if b[0] == '{' {
			payloads = append(payloads, r.Offset)
		}
		return b, nil
	}
	for at := 0; at < len(found); {
		n, err := f.e.Relocate(f.now, 1, found[at:], 64, read)
		if err != nil || n == 0 {
			t.Fatalf("relocate at %d of %d: %d, %v", at, len(found), n, err)
		}
		at += n
	}
	if live := f.e.LiveBytes()[1]; live != 0 {
		t.Fatalf("%d live bytes left in segment 1", live)
	}
	if reads != blobs || len(payloads) == 0 {
		t.Fatalf("read %d blobs (%d payloads), the jobs hold %d", reads, len(payloads), blobs)
	}
	for i := 1; i < len(payloads); i++ {
		if payloads[i] <= payloads[i-1] {
			t.Fatalf("payload %d read at offset %d after %d: not in log order", i, payloads[i], payloads[i-1])
		}
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	sameAsReplay(t, f)
}

// TestRelocateSkipsWhatChangedSinceTheScan: between FindPinned and
// Relocate jobs are cancelled, acked, their slots reused and their payloads
// replaced; Relocate re-logs only what still lives in the segment and
// leaves it empty.
func TestRelocateSkipsWhatChangedSinceTheScan(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := 0; i < 200; i++ {
		ids = append(ids, f.put("q", PutRequest{Payload: []byte(fmt.Sprintf("payload %d", i))}).ID)
	}
	found := findPinned(f.e, 1, 1<<20)
	if len(found) != 200 {
		t.Fatalf("found %d blobs in segment 1, want 200", len(found))
	}
	for i, id := range ids {
		switch i % 4 {
		case 0: // gone; its slot may be reused by the puts below
			if err := f.e.Cancel(f.now, "default", "q", id, ""); err != nil {
				t.Fatal(err)
			}
		case 1: // payload replaced: now in the segment the sink writes next
			f.sink.num = 2
			if _, err := f.e.Update(f.now, "default", "q", id, UpdateRequest{Payload: []byte("new"), HasPayload: true}); err != nil {
				t.Fatal(err)
			}
			f.sink.num = 1
		}
	}
	for i := 0; i < 50; i++ {
		f.sink.num = 2
		f.put("q", PutRequest{Payload: []byte("later")})
		f.sink.num = 1
	}
	reads := 0
	f.sink.num = 2
	n, err := f.e.Relocate(f.now, 1, found, 1<<30, func(r BlobRef) ([]byte, error) {
		reads++
		if r.Segment != 1 {
			t.Fatalf("read a blob of segment %d", r.Segment)
		}
		return f.sink.blob(r), nil
	})
	if err != nil || n != len(found) {
		t.Fatalf("relocate: %d of %d, %v", n, len(found), err)
	}
	if reads != 100 {
		t.Fatalf("re-logged %d blobs, want the 100 unchanged ones", reads)
	}
	if live := f.e.LiveBytes()[1]; live != 0 {
		t.Fatalf("%d live bytes left in segment 1", live)
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	sameAsReplay(t, f)
}

// findPinned scans the whole table for the blobs in seg, step slots a call.
func findPinned(e *Engine, seg uint32, step int) []Pinned {
	var found []Pinned
	for cursor, done := uint32(0), false; !done; {
		cursor, done, found = e.FindPinned(seg, cursor, step, found)
	}
	return found
}
