package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A ready-only listing walks the queue's priority heaps (listReady); it
// must page exactly as the scan of every job does (listScan), at every
// cursor and page size, whatever mix of priorities, activation times,
// keys, reservations and acks brought the jobs there.
func TestListReadyPagesAsTheScan(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		f := newFixture(t)
		rng := rand.New(rand.NewPCG(seed, 7))
		var taken []Job
		for i := 0; i < 400; i++ {
			req := PutRequest{Priority: u32(uint32(rng.IntN(4)))}
			if rng.IntN(3) == 0 {
				req.Delay = dur(time.Duration(rng.IntN(10000)) * time.Millisecond)
			}
			if rng.IntN(5) == 0 {
				req.Key = fmt.Sprintf("k%d", rng.IntN(6))
			}
			q := "q"
			if rng.IntN(4) == 0 {
				q = "other"
			}
			f.put(q, req)
			switch rng.IntN(10) {
			case 0:
				taken = append(taken, f.take(2, "q")...)
			case 1:
				if len(taken) > 0 {
					j := taken[0]
					taken = taken[1:]
					f.ack(j, AckRequest{})
				}
			}
			f.tick(time.Duration(rng.IntN(20)) * time.Millisecond)
		}
		f.tick(time.Second) // some of the delayed jobs ripen, some do not
		f.e.Advance(f.now)
		q, err := f.e.findQueue("default", "q")
		if err != nil {
			t.Fatal(err)
		}
		filt := Filter{States: []State{StateReady}}
		mask := stateMask(filt.States, allStates)
		want := f.e.listScan(q, &filt, mask, nil, listByServing)
		if len(want) < 50 {
			t.Fatalf("seed %d: only %d ready jobs: the test does not exercise paging", seed, len(want))
		}
		for _, limit := range []int{1, 3, 7, 50, 1000} {
			got := pageAll(limit, func(after *listKey) []listItem { return f.e.listReady(q, &filt, mask, after, limit, &walk{}) })
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, pages of %d: the heap walk listed %d jobs, the scan %d, or in another order", seed, limit, len(got), len(want))
			}
		}
		// Delayed jobs: the walk of the shared delayed heap pages as the
		// scan does, or gives up (other queues' jobs came first) and the
		// queue's own blocks are read.
		dfilt := Filter{States: []State{StateDelayed}}
		dmask := stateMask(dfilt.States, allStates)
		dwant := f.e.listScan(q, &dfilt, dmask, nil, listByActivation)
		if len(dwant) < 10 {
			t.Fatalf("seed %d: only %d delayed jobs", seed, len(dwant))
		}
		for _, limit := range []int{1, 4, 1000} {
			got := pageAll(limit, func(after *listKey) []listItem {
				page, _ := f.e.listWalk(q, &dfilt, dmask, after, limit, listByActivation, 0)
				return page
			})
			if !slices.Equal(got, dwant) {
				t.Fatalf("seed %d, delayed pages of %d: the heap walk listed %d jobs, the scan %d, or in another order", seed, limit, len(got), len(dwant))
			}
		}
		// The public call takes the walk and pages the same way.
		res, err := f.e.List(f.now, "default", "q", ListRequest{Limit: 5, Filter: filt})
		if err != nil || len(res.Jobs) != 5 || res.NextCursor == "" {
			t.Fatalf("seed %d: List: %d jobs, cursor %q, %v", seed, len(res.Jobs), res.NextCursor, err)
		}
		for i, j := range res.Jobs {
			if j.ID != f.e.jobID(want[i].slot) {
				t.Fatalf("seed %d: List job %d is %s, want %s", seed, i, j.ID, f.e.jobID(want[i].slot))
			}
		}
	}
}

// pageAll follows the cursor through every page of size limit; page
// answers up to limit+1 items after the cursor.
func pageAll(limit int, page func(after *listKey) []listItem) []listItem {
	var got []listItem
	var after *listKey
	for {
		p := page(after)
		if len(p) <= limit {
			return append(got, p...)
		}
		got = append(got, p[:limit]...)
		k := p[limit-1].k
		after = &k
	}
}

// The first page of a large queue's ready jobs reads about a page of
// jobs, not the queue: a dashboard lists it every few seconds.
func TestListReadyFirstPageReadsAboutAPage(t *testing.T) {
	f := newFixture(t)
	const n = 20000
	for i := range n {
		f.put("q", PutRequest{Priority: u32(uint32(i % 3))})
		f.tick(time.Millisecond)
	}
	f.tick(time.Second)
	before := f.e.visited
	res, err := f.e.List(f.now, "default", "q", ListRequest{Limit: 20, Filter: Filter{States: []State{StateReady}}})
	if err != nil || len(res.Jobs) != 20 {
		t.Fatalf("List: %d jobs, %v", len(res.Jobs), err)
	}
	// A best-first walk pops the page (plus one) and has looked at no more
	// than twice that many children.
	if got := f.e.visited - before; got > 21 {
		t.Fatalf("the first page of 20 read %d jobs of %d", got, n)
	}
}

// The delayed heap is shared by every queue: a queue whose jobs come after
// many others' gives up the walk within its budget and reads its own
// delayed jobs from its blocks, one whose jobs come first reads about a
// page.
func TestListDelayedWalkAndBudget(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 5000; i++ {
		f.put("big", PutRequest{Delay: dur(time.Hour + time.Duration(i)*time.Millisecond)})
	}
	for i := 0; i < 30; i++ {
		f.put("small", PutRequest{Delay: dur(2*time.Hour + time.Duration(i)*time.Millisecond)})
	}
	filt := Filter{States: []State{StateDelayed}}
	list := func(q string) (ListResult, uint64) {
		before := f.e.visited
		res, err := f.e.List(f.now, "default", q, ListRequest{Limit: 10, Filter: filt})
		if err != nil || len(res.Jobs) != 10 {
			t.Fatalf("List %s: %d jobs, %v", q, len(res.Jobs), err)
		}
		return res, f.e.visited - before
	}
	if _, n := list("big"); n > 11 {
		t.Fatalf("the first page of 10 of a queue whose jobs come first read %d jobs", n)
	}
	res, n := list("small")
	// its 30 jobs share their block of 4096 numbers with 5000-4096 of
	// the big queue's: those are read too, the big queue's other block not
	if budget := uint64(16*11 + 1024); n <= budget || n > budget+1+(5030-seqPageLen+1) {
		t.Fatalf("a queue behind 5000 others' jobs read %d jobs: want the walk's budget of %d, then its own block", n, budget)
	}
	q, _ := f.e.findQueue("default", "small")
	want := f.e.listScan(q, &filt, stateMask(filt.States, allStates), nil, listByActivation)
	for i, j := range res.Jobs {
		if j.ID != f.e.jobID(want[i].slot) {
			t.Fatalf("small job %d is %s, want %s", i, j.ID, f.e.jobID(want[i].slot))
		}
	}
}
