package engine

import (
	"testing"
	"time"
)

func TestRehomeMovesOnlyTheCopiedReference(t *testing.T) {
	f := newFixture(t)
	a := f.put("q", PutRequest{Payload: []byte("payload-a"), RetainResult: time.Hour})
	b := f.put("q", PutRequest{Payload: []byte("payload-b")})
	pa, pb := f.peek("q", a.ID).Payload, f.peek("q", b.ID).Payload
	moved := BlobRef{Segment: 9, Offset: 100, Len: pa.Len}

	// A reference the job does not hold (another job's, or a wrong
	// length) changes nothing.
	if f.e.Rehome("default", "q", a.ID, pb, BlobRef{Segment: 9, Offset: 100, Len: pb.Len}) {
		t.Fatal("rehomed job a from job b's payload")
	}
	if f.e.Rehome("default", "q", a.ID, pa, BlobRef{Segment: 9, Offset: 100, Len: pa.Len + 1}) {
		t.Fatal("rehomed onto a copy of another length")
	}
	if f.e.Rehome("default", "q", "no-such-job", pa, moved) || f.e.Rehome("default", "nope", a.ID, pa, moved) {
		t.Fatal("rehomed a job that does not exist")
	}
	if got := f.peek("q", a.ID).Payload; got != pa {
		t.Fatalf("payload moved to %+v by a refused rehome", got)
	}

	if !f.e.Rehome("default", "q", a.ID, pa, moved) {
		t.Fatal("the payload the job holds was not rehomed")
	}
	if got := f.peek("q", a.ID).Payload; got != moved {
		t.Fatalf("payload at %+v, want %+v", got, moved)
	}
	if live := f.e.LiveBytes(); live[9] != int64(pa.Len) || live[1] != int64(pb.Len) {
		t.Fatalf("live bytes %v: want %d in segment 9 and %d (job b's) in segment 1", live, pa.Len, pb.Len)
	}
	// Once moved, the old reference no longer matches.
	if f.e.Rehome("default", "q", a.ID, pa, BlobRef{Segment: 10, Len: pa.Len}) {
		t.Fatal("rehomed from a reference the job left")
	}

	// A result.
	j := f.take1("q")
	if j.ID != a.ID {
		t.Fatalf("took %s, want %s", j.ID, a.ID)
	}
	f.ack(j, AckRequest{HasResult: true, Result: []byte("the result")})
	res := f.peek("q", a.ID).Result
	to := BlobRef{Segment: 11, Offset: 5, Len: res.Len}
	if !f.e.Rehome("default", "q", a.ID, res, to) {
		t.Fatal("the result was not rehomed")
	}
	if got := f.peek("q", a.ID); got.Result != to || got.Payload != moved {
		t.Fatalf("result at %+v payload at %+v, want %+v and %+v", got.Result, got.Payload, to, moved)
	}
	if live := f.e.LiveBytes(); live[11] != int64(res.Len) || live[1] != int64(pb.Len) {
		t.Fatalf("live bytes %v after moving the result", live)
	}
}
