package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// listFixture is a random engine for listing tests: queues of very
// different sizes (big, mid, small), one with strict keys, one with
// exclusive keys, one retaining results; server and client ids mixed
// (client ids sorting before, among and after the ULIDs, some spelled as
// ULIDs); jobs in every state; enough puts and acks that the sequence
// index has several pages and has dissolved some into its overflow table.
type listFixture struct {
	*fixture
	rng  *rand.Rand
	held []Job
	n    int
}

var listQueues = []string{"big", "mid", "small", "keyed", "excl", "keep"}

func newListFixture(t *testing.T, seed uint64) *listFixture {
	f := &listFixture{fixture: newFixture(t), rng: rand.New(rand.NewPCG(seed, 11))}
	excl := KeyExclusive
	if _, _, err := f.e.PutQueue(f.now, "default", "excl", QueuePatch{KeyMode: &excl}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.e.PutQueue(f.now, "default", "keep", QueuePatch{RetainResults: dur(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// first a busy time: most jobs go soon after they came, so the old
	// pages of the sequence index thin out and dissolve; then a backlog
	for i := 0; i < 18000; i++ {
		f.step(f.pickQueue())
		if i < 9000 {
			f.held = append(f.held, f.take(1, f.pickQueue())...)
			if j, ok := f.pop(); ok {
				_, _ = f.e.Ack(f.now, "default", j.Queue, j.ID, AckRequest{Receipt: j.Receipt})
			}
		}
	}
	return f
}

func (f *listFixture) pickQueue() string {
	switch r := f.rng.IntN(100); {
	case r < 55:
		return "big"
	case r < 70:
		return "mid"
	case r < 72:
		return "small"
	case r < 82:
		return "keyed"
	case r < 90:
		return "excl"
	}
	return "keep"
}

// step puts a job into q and does one random thing to the engine.
func (f *listFixture) step(q string) {
	rng := f.rng
	f.n++
	req := PutRequest{Priority: u32(uint32(rng.IntN(3)))}
	if rng.IntN(3) == 0 {
		req.Delay = dur(time.Duration(rng.IntN(4000)) * time.Millisecond)
	}
	if q == "keyed" || q == "excl" || rng.IntN(10) == 0 {
		req.Key = fmt.Sprintf("k%d", rng.IntN(8))
	}
	switch rng.IntN(10) {
	case 0:
		req.ID = fmt.Sprintf("0c%06d", f.n) // before every ULID
	case 1:
		req.ID = fmt.Sprintf("zc%06d", f.n) // after every ULID
	case 2:
		// among the ULIDs: their time prefix, then anything
		req.ID = fmt.Sprintf("%s-c%06d", ulid.MustNew(uint64(f.now.UnixMilli()), nil).String()[:10], f.n)
	case 3:
		// a client id spelled as a ULID is kept as its 16 bytes
		var u ulid.ULID
		_ = u.SetTime(uint64(f.now.UnixMilli()) - uint64(rng.IntN(1000)))
		for i := 6; i < 16; i++ {
			u[i] = byte(rng.IntN(256))
		}
		req.ID = u.String()
	}
	if rng.IntN(4) == 0 {
		req.Tags = map[string]string{"t": []string{"a", "b"}[rng.IntN(2)]}
		if rng.IntN(3) == 0 {
			req.Tags["u"] = "x"
		}
	}
	req.Payload, req.PayloadJSON = []byte(`1`), true
	if _, err := f.e.Put(f.now, "default", q, req); err != nil {
		f.t.Fatalf("put: %v", err)
	}
	switch rng.IntN(12) {
	case 0, 1, 2, 3:
		f.held = append(f.held, f.take(1+rng.IntN(3), f.pickQueue())...)
	case 4, 5, 6, 7, 8:
		if j, ok := f.pop(); ok {
			_, _ = f.e.Ack(f.now, "default", j.Queue, j.ID, AckRequest{Receipt: j.Receipt})
		}
	case 9:
		if j, ok := f.pop(); ok {
			_, _ = f.e.Nack(f.now, "default", j.Queue, j.ID, NackRequest{Receipt: j.Receipt, Delay: dur(time.Duration(rng.IntN(2000)) * time.Millisecond)})
		}
	case 10:
		if j, ok := f.pop(); ok {
			_ = f.e.Bury(f.now, "default", j.Queue, j.ID, BuryRequest{Receipt: j.Receipt})
		}
	}
	f.tick(time.Duration(rng.IntN(3)) * time.Millisecond)
}

// pop hands out a random reserved job (oldest most often, as workers do).
func (f *listFixture) pop() (Job, bool) {
	if len(f.held) == 0 {
		return Job{}, false
	}
	i := 0
	if f.rng.IntN(3) == 0 {
		i = f.rng.IntN(len(f.held))
	}
	j := f.held[i]
	f.held = slices.Delete(f.held, i, i+1)
	return j, true
}

var listFilters = []Filter{
	{},
	{States: []State{StateReady}},
	{States: []State{StateDelayed}},
	{States: []State{StateBlocked}},
	{States: []State{StateReserved}},
	{States: []State{StateDead}},
	{States: []State{StateCompleted}},
	{States: []State{StateReady, StateDelayed}},
	{States: []State{StateReserved, StateDead, StateCompleted}},
	{States: []State{StateBlocked, StateReady}},
	{Key: "k3", HasKey: true},
	{States: []State{StateBlocked}, Key: "k1", HasKey: true},
	{States: []State{StateReady}, Key: "k2", HasKey: true},
	{States: []State{StateReserved, StateDelayed}, Key: "k5", HasKey: true},
	{States: []State{StateDead}, Key: "k4", HasKey: true},
	{States: []State{StateReady}, Key: "", HasKey: true}, // jobs without a key
	{Key: "k6", HasKey: true, Tags: map[string]string{"t": "a"}},
	{Tags: map[string]string{"t": "a"}},
	{Tags: map[string]string{"t": "a", "u": "x"}},
	{States: []State{StateReady}, Tags: map[string]string{"t": "b"}},
	{States: []State{StateDelayed}, Tags: map[string]string{"t": "a"}},
	{States: []State{StateReserved}, Tags: map[string]string{"u": "x"}},
	{States: []State{StateDead, StateReady}, Tags: map[string]string{"t": "b"}},
}

// Every listing walks an index (listWalk) and must page exactly as the
// scan of every job does (listScan): at every cursor, for every page size,
// every order and filter, in queues of very different sizes — and while
// jobs are put, taken, acked, nacked and buried between the pages.
func TestListWalksPageAsTheScan(t *testing.T) {
	listed := make([]int, len(listFilters))
	for seed := uint64(1); seed <= 3; seed++ {
		f := newListFixture(t, seed)
		t.Logf("seed %d: %d jobs, %d pages, %d in the overflow table, %d held", seed, f.e.jobs.live, len(f.e.seqs.pages), f.e.seqs.over.n, len(f.held))
		if f.e.seqs.over.n == 0 || len(f.e.seqs.pages) < 2 {
			t.Fatalf("seed %d: %d pages, %d jobs in the overflow table: the test does not exercise the sequence walk", seed, len(f.e.seqs.pages), f.e.seqs.over.n)
		}
		for _, qn := range listQueues {
			q, err := f.e.findQueue("default", qn)
			if err != nil {
				t.Fatal(err)
			}
			for fi := range listFilters {
				filt := listFilters[fi]
				mask := stateMask(filt.States, allStates)
				ord := listOrderOf(filt.States)
				limits := []int{4, 1000}
				if qn == "big" {
					limits[0] = 40
				}
				for _, limit := range limits {
					var after *listKey
					for page := 0; ; page++ {
						f.e.Advance(f.now)
						want := f.e.listScan(q, &filt, mask, after, ord)
						want = want[:min(len(want), limit+1)]
						got := f.e.listPage(q, &filt, mask, after, limit, ord)
						walked, ok := f.e.listWalk(q, &filt, mask, after, limit, ord, 0)
						if !slices.Equal(got, want) || !ok || !slices.Equal(walked, want) {
							t.Fatalf("seed %d, queue %s, filter %+v, pages of %d, page %d: listed %v (walk %v, done %v), the scan %v",
								seed, qn, filt, limit, page, got, walked, ok, want)
						}
						listed[fi] += len(want)
						if len(want) <= limit {
							break
						}
						after = &want[limit-1].k
						if f.rng.IntN(4) == 0 {
							f.step(qn)
						}
					}
				}
			}
		}
		if err := f.e.checkInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	for fi, n := range listed {
		if n < 20 {
			t.Fatalf("filter %+v listed only %d jobs: the test does not exercise it", listFilters[fi], n)
		}
	}
}

// The public call pages through its cursors as the scan does, in every
// order.
func TestListCursorsPageAsTheScan(t *testing.T) {
	f := newListFixture(t, 9)
	for _, qn := range []string{"mid", "small", "keep"} {
		q, _ := f.e.findQueue("default", qn)
		for _, filt := range listFilters {
			want := f.e.listScan(q, &filt, stateMask(filt.States, allStates), nil, listOrderOf(filt.States))
			got := listIDs(t, f.e, f.now, qn, filt, 7)
			if len(got) != len(want) {
				t.Fatalf("queue %s, filter %+v: listed %d jobs, the scan %d", qn, filt, len(got), len(want))
			}
			for i, it := range want {
				if id := f.e.jobID(it.slot); got[i] != id {
					t.Fatalf("queue %s, filter %+v: job %d is %s, the scan's %s", qn, filt, i, got[i], id)
				}
			}
		}
	}
}

// The first page of a large queue reads about a page of jobs on every
// path, where the scan read every job. Each case builds one big queue
// (and a small one behind it) and lists the first page of 20.
func TestListFirstPageReadsAboutAPage(t *testing.T) {
	const n = 20000
	cases := []struct {
		name  string
		setup func(f *fixture)
		queue string
		filt  Filter
		max   uint64
	}{
		{"mixed states", func(f *fixture) {}, "q", Filter{}, 21},
		{"two states", func(f *fixture) {}, "q", Filter{States: []State{StateReady, StateDead}}, 21},
		// the small queue's jobs share the last block with the big one's:
		// at most that block (4096 numbers) is read beyond the page
		{"a small queue behind a big one", func(f *fixture) {
			for i := 0; i < 30; i++ {
				f.put("small", PutRequest{})
			}
		}, "small", Filter{}, 21 + seqPageLen},
		{"reserved", func(f *fixture) { f.take(1000, "q"); f.take(1000, "q") }, "q", Filter{States: []State{StateReserved}}, 21},
		{"dead", func(f *fixture) {
			for _, j := range f.take(500, "q") {
				if err := f.e.Bury(f.now, "default", "q", j.ID, BuryRequest{Receipt: j.Receipt}); err != nil {
					f.t.Fatal(err)
				}
			}
		}, "q", Filter{States: []State{StateDead}}, 21},
		{"completed", func(f *fixture) {
			for _, j := range f.take(500, "keep") {
				f.ack(j, AckRequest{})
			}
		}, "keep", Filter{States: []State{StateCompleted}}, 21},
		{"blocked", func(f *fixture) {}, "keyed", Filter{States: []State{StateBlocked}}, 21},
		// a tag on half the jobs: the walk finds the page among the first
		// forty or so
		{"common tag", func(f *fixture) {}, "q", Filter{Tags: map[string]string{"half": "yes"}}, 60},
		// a rare tag: the walk gives up after the tag set's size plus a
		// page, then the tag set is read
		{"rare tag", func(f *fixture) {}, "q", Filter{Tags: map[string]string{"rare": "yes"}}, 2 * (10 + 21)},
		// a rare key: the same with the key's chain (and the queue's dead
		// and completed jobs, none here)
		{"rare key", func(f *fixture) {}, "q", Filter{Key: "rare", HasKey: true}, 2 * (10 + 21)},
		{"rare key, ready", func(f *fixture) {}, "q", Filter{Key: "rare", HasKey: true, States: []State{StateReady}}, 2 * (10 + 21)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			if _, _, err := f.e.PutQueue(f.now, "default", "keep", QueuePatch{RetainResults: dur(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				req := PutRequest{Priority: u32(uint32(i % 3))}
				if i%2 == 0 {
					req.Tags = map[string]string{"half": "yes"}
				}
				if i%2000 == 1999 {
					req.Tags = map[string]string{"rare": "yes"}
				}
				if i%2000 == 1000 {
					req.Key = "rare"
				}
				f.put("q", req)
				if i%100 == 0 {
					f.tick(time.Millisecond)
				}
			}
			for i := range n {
				f.put("keep", PutRequest{})
				f.put("keyed", PutRequest{Key: fmt.Sprintf("k%d", i%10)})
			}
			c.setup(f)
			f.tick(time.Second)
			f.e.Advance(f.now)
			before := f.e.visited
			res, err := f.e.List(f.now, "default", c.queue, ListRequest{Limit: 20, Filter: c.filt})
			if err != nil || len(res.Jobs) == 0 {
				t.Fatalf("List: %d jobs, %v", len(res.Jobs), err)
			}
			if got := f.e.visited - before; got > c.max {
				t.Fatalf("the first page of %d read %d jobs, want at most %d", len(res.Jobs), got, c.max)
			}
		})
	}
}

// BenchmarkListPage lists the first page of 100 of a queue of
// CHRONOQ_BENCH_JOBS jobs (default 1 M; a tenth reserved, some with a
// tag) through its index and through the scan it replaced.
func BenchmarkListPage(b *testing.B) {
	n := 1_000_000
	if v := benchJobs(); v > 0 {
		n = v
	}
	e := New(Options{Sink: &encodeSink{}, Seed: 1})
	now := t0
	for k := 0; k < n; k++ {
		req := PutRequest{Payload: benchPayload}
		if k%1000 == 0 {
			req.Tags = map[string]string{"rare": "yes"}
			now = now.Add(time.Millisecond)
		}
		if _, err := e.Put(now, "default", "q", req); err != nil {
			b.Fatal(err)
		}
	}
	for taken := 0; taken < n/10; taken += 1000 {
		if _, err := e.Take(now, "default", TakeRequest{Queues: []string{"q"}, Max: 1000, TTR: dur(time.Hour)}); err != nil {
			b.Fatal(err)
		}
	}
	q, _ := e.findQueue("default", "q")
	for _, c := range []struct {
		name string
		f    Filter
	}{
		{"mixed", Filter{}},
		{"reserved", Filter{States: []State{StateReserved}}},
		{"tag", Filter{Tags: map[string]string{"rare": "yes"}}},
	} {
		mask, ord := stateMask(c.f.States, allStates), listOrderOf(c.f.States)
		b.Run(c.name+"/index", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if len(e.listPage(q, &c.f, mask, nil, 100, ord)) == 0 {
					b.Fatal("empty page")
				}
			}
		})
		b.Run(c.name+"/scan", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if len(e.listScan(q, &c.f, mask, nil, ord)) == 0 {
					b.Fatal("empty page")
				}
			}
		})
	}
}
