package engine

import (
	"strings"
	"testing"
	"unsafe"
)

func TestJobRecordPacking(t *testing.T) {
	if s := unsafe.Sizeof(job{}); s != 56 {
		t.Fatalf("job record is %d bytes, want 56", s)
	}
	var j job
	for _, v := range []uint64{0, 1, 1<<32 - 1, 1 << 32, MaxSeq} {
		j.setSeq(v)
		if j.seqNo() != v {
			t.Fatalf("seq %d came back as %d", v, j.seqNo())
		}
	}
	for _, v := range []int64{0, -1, 1<<31 - 1, 1 << 31, 1<<32 + 5, 1<<47 - 1, -(1 << 47)} {
		j.setAt(v)
		if j.atMS() != v {
			t.Fatalf("at %d came back as %d", v, j.atMS())
		}
	}
}

// The last sequence number a record can hold is handed out; the next put
// is refused with a clear error and changes nothing.
func TestPutBeyondLastSequenceNumberRefused(t *testing.T) {
	f := newFixture(t)
	f.e.seq = MaxSeq - 1
	r := f.put("q", PutRequest{})
	if r.Seq != MaxSeq {
		t.Fatalf("seq %d, want %d", r.Seq, uint64(MaxSeq))
	}
	if j, err := f.e.JobBySeq(f.now, "default", MaxSeq); err != nil || j.ID != r.ID {
		t.Fatalf("by seq: %+v %v", j, err)
	}
	_, err := f.e.Put(f.now, "default", "q", PutRequest{})
	wantCode(t, err, CodeUnavailable, "")
	if n := f.e.Jobs(); n != 1 {
		t.Fatalf("%d jobs after the refused put", n)
	}
}

// A node-wide job budget refuses the put that would exceed it — alone, in
// a batch, or as an ack's next job — with a clear error and no change, and
// frees up as jobs leave.
func TestMaxJobsRefusesPutsBeyondTheBudget(t *testing.T) {
	f := newFixture(t)
	f.e.SetMaxJobs(3)
	f.put("a", PutRequest{})
	f.put("b", PutRequest{})
	_, err := f.e.PutBatch(f.now, "default", "a", []PutRequest{{}, {}})
	wantCode(t, err, CodeQueueFull, "")
	if !strings.Contains(err.Error(), "maximum of 3 jobs") {
		t.Fatalf("error does not name the limit: %v", err)
	}
	if n := f.e.Jobs(); n != 2 {
		t.Fatalf("%d jobs after a refused batch, want 2", n)
	}
	f.put("a", PutRequest{})
	_, err = f.e.Put(f.now, "default", "b", PutRequest{})
	wantCode(t, err, CodeQueueFull, "")

	// an ack's next job is not refused (it replaces the acked one)
	j := f.take1("a")
	f.ack(j, AckRequest{Next: &NextPut{Queue: "c", Put: PutRequest{}}})
	if n := f.e.Jobs(); n != 3 {
		t.Fatalf("%d jobs after ack+next, want 3", n)
	}
	// raising the limit (or lifting it) lets puts in again
	f.e.SetMaxJobs(0)
	f.put("b", PutRequest{})
}
