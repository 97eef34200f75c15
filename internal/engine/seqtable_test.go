package engine

import (
	"testing"
)

// The sequence index pages runs of sequence numbers and moves the jobs of
// pages that empty out to its overflow table: every job stays findable by
// number and id through puts, deletes in any pattern, new puts after
// pages were dissolved, and a snapshot load (which inserts out of order).
func TestSeqIndexPagesAndOverflow(t *testing.T) {
	f := newFixture(t)
	const n = 12 * seqPageLen
	var ids []PutResult
	for i := 0; i < n; i++ {
		ids = append(ids, f.put("q", PutRequest{Payload: []byte("x")}))
	}
	if got := len(f.e.seqs.pages); got != 12 && got != 13 {
		t.Fatalf("%d jobs in %d pages", n, got)
	}
	gone := map[uint64]bool{}
	cancel := func(r PutResult) {
		if err := f.e.Cancel(f.now, "default", "q", r.ID, ""); err != nil {
			t.Fatal(err)
		}
		gone[r.Seq] = true
	}
	// the first pages keep one job in ten: below a quarter, dissolved;
	// the next keep half: paged still
	for i, r := range ids[:4*seqPageLen] {
		if i%10 != 0 {
			cancel(r)
		}
	}
	for i, r := range ids[4*seqPageLen : 8*seqPageLen] {
		if i%2 != 0 {
			cancel(r)
		}
	}
	x := &f.e.seqs
	if x.over.n == 0 || x.floor == 0 {
		t.Fatalf("no page dissolved: %d in overflow, floor %d", x.over.n, x.floor)
	}
	if x.paged+x.over.n != f.e.Jobs() {
		t.Fatalf("index holds %d+%d, engine %d jobs", x.paged, x.over.n, f.e.Jobs())
	}
	for i := 0; i < 3*seqPageLen; i++ { // new pages on top
		ids = append(ids, f.put("q", PutRequest{Payload: []byte("y")}))
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	for _, r := range ids {
		_, err := f.e.JobBySeq(f.now, "default", r.Seq)
		if gone[r.Seq] != (err != nil) {
			t.Fatalf("seq %d (gone %v): %v", r.Seq, gone[r.Seq], err)
		}
	}
	// a snapshot load inserts in slot order, and the slots of cancelled
	// jobs were reused by later puts
	r := New(Options{Seed: 7})
	for i, item := range chunkItems(t, f.e, 1000) {
		if err := r.LoadItem(item); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	compareEngines(t, f.e, r, f.now)

	// a load of jobs sparse in number (one in ten left everywhere) does
	// not keep a page per 410 jobs: pages cost at most 16 bytes a job
	// on average
	for i, r := range ids[4*seqPageLen:] {
		if i%10 != 0 && !gone[r.Seq] {
			cancel(r)
		}
	}
	r = New(Options{Seed: 7})
	for i, item := range chunkItems(t, f.e, 1000) {
		if err := r.LoadItem(item); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	compareEngines(t, f.e, r, f.now)
	if rx := &r.seqs; rx.paged < (len(rx.pages)-1)*seqPageMin {
		t.Fatalf("%d jobs in %d pages after the load", rx.paged, len(rx.pages))
	}
}
