package engine

import (
	"fmt"
	"testing"
	"time"
)

// Relocate reads a turn's blobs in log order whatever order the jobs sit
// in, so a frame of a batch put is checked once (wal.FrameReader), and
// re-logs every live payload and result in the segment.
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
	var payloads []uint32
	reads := 0
	_, done, err := f.e.Relocate(f.now, 1, 0, 1<<20, 1<<30, func(r BlobRef) ([]byte, error) {
		reads++
		b := f.sink.blob(r)
		if b[0] == '{' {
			payloads = append(payloads, r.Offset)
		}
		return b, nil
	})
	if err != nil || !done {
		t.Fatalf("relocate: done %v, %v", done, err)
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
