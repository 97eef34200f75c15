package engine

import (
	"testing"

	"github.com/oklog/ulid/v2"
)

// Server ids carry the job's sequence number and are found through the
// sequence index, without an id-table slot; ids that do not carry their
// own job's number (client ids, ULIDs from before, a client id copying
// another job's server id) are in the id table, and every one of them is
// found in its own queue only.
func TestServerIDsCarryTheirSequenceNumber(t *testing.T) {
	f := newFixture(t)
	var prev string
	var first PutResult
	for i := 0; i < 5; i++ { // same millisecond: the number orders them
		r := f.put("a", PutRequest{})
		u, err := ulid.ParseStrict(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := ulidSeq((*[16]byte)(&u)); got != r.Seq {
			t.Fatalf("id %s carries seq %d, job has %d", r.ID, got, r.Seq)
		}
		if r.ID <= prev {
			t.Fatalf("id %s after %s: not in put order", r.ID, prev)
		}
		prev = r.ID
		if i == 0 {
			first = r
		}
	}
	if f.e.ids.n != 0 {
		t.Fatalf("id table holds %d entries for server ids", f.e.ids.n)
	}
	// a client id spelled as the first job's id, in another queue
	copyID := f.put("b", PutRequest{ID: first.ID})
	f.put("b", PutRequest{ID: "client-1"})
	// a ULID that does not carry its job's number (as made before)
	old := ulid.MustNew(ulid.Now(), nil).String()
	f.put("b", PutRequest{ID: old})
	if f.e.ids.n != 3 {
		t.Fatalf("id table holds %d entries, want the 3 ids that do not carry their number", f.e.ids.n)
	}
	for _, c := range []struct {
		q, id string
		seq   uint64
	}{{"a", first.ID, first.Seq}, {"b", first.ID, copyID.Seq}} {
		j, err := f.e.Peek(f.now, "default", c.q, c.id)
		if err != nil || j.Seq != c.seq {
			t.Fatalf("%s/%s: seq %d, %v; want seq %d", c.q, c.id, j.Seq, err, c.seq)
		}
	}
	if err := f.e.Cancel(f.now, "default", "a", first.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.Peek(f.now, "default", "a", first.ID); err == nil {
		t.Fatal("cancelled job still found")
	}
	if j, err := f.e.Peek(f.now, "default", "b", first.ID); err != nil || j.Seq != copyID.Seq {
		t.Fatalf("the copy in b: %+v, %v", j, err)
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
