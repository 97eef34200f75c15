package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// shrinkMix fills f with jobs in every state and structure a move must
// rewrite — delayed, ready, blocked (strict and exclusive keys), reserved,
// dead, completed; client ids, tags, TTLs, results — then cancels most of
// them at random, leaving holes all over the slab. It returns the receipts
// of the jobs left reserved, by id.
func shrinkMix(t *testing.T, f *fixture, rng *rand.Rand, n int) map[string]string {
	t.Helper()
	ex, ret := KeyExclusive, time.Hour
	if _, _, err := f.e.PutQueue(f.now, "default", "x", QueuePatch{KeyMode: &ex}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.e.PutQueue(f.now, "default", "r", QueuePatch{RetainResults: &ret}); err != nil {
		t.Fatal(err)
	}
	queues := []string{"p", "x", "r", "s"}
	var ids []string
	for i := 0; i < n; i++ {
		q := queues[rng.IntN(len(queues))]
		req := PutRequest{Priority: u32(uint32(rng.IntN(3))), TTR: dur(24 * time.Hour)}
		if rng.IntN(3) == 0 {
			req.ID = fmt.Sprintf("c%d", i)
		}
		if q == "x" || q == "s" {
			req.Key = fmt.Sprintf("k%d", rng.IntN(5))
		}
		if rng.IntN(4) == 0 {
			req.Tags = map[string]string{"t": fmt.Sprint(rng.IntN(3))}
		}
		switch rng.IntN(4) {
		case 0:
			req.Delay = dur(time.Duration(1+rng.IntN(100)) * time.Minute)
		case 1:
			req.TTL = dur(time.Duration(1+rng.IntN(100)) * time.Hour)
		}
		res := f.put(q, req)
		ids = append(ids, q+"/"+res.ID)
	}
	receipts := map[string]string{}
	for _, q := range queues {
		for _, j := range f.take(40, q) {
			switch rng.IntN(4) {
			case 0:
				if _, err := f.e.Ack(f.now, "default", q, j.ID, AckRequest{Receipt: j.Receipt, HasResult: true, Result: []byte("r")}); err != nil {
					t.Fatal(err)
				}
			case 1:
				if err := f.e.Bury(f.now, "default", q, j.ID, BuryRequest{Receipt: j.Receipt, Reason: "b"}); err != nil {
					t.Fatal(err)
				}
			default:
				receipts[q+"/"+j.ID] = j.Receipt
			}
		}
	}
	for _, qid := range ids {
		var q, id string
		fmt.Sscanf(qid[:1], "%s", &q)
		id = qid[2:]
		if _, held := receipts[qid]; held || rng.IntN(10) < 3 {
			continue
		}
		if err := f.e.Cancel(f.now, "default", q, id, ""); err != nil && CodeOf(err) != CodeJobNotFound {
			t.Fatal(err)
		}
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	return receipts
}

// sameAsReplay checks the engine against one rebuilt from its log.
func sameAsReplay(t *testing.T, f *fixture) {
	t.Helper()
	r := f.sink.replay(t, false)
	r.Advance(f.now)
	read := func(b BlobRef) ([]byte, error) { return f.sink.blob(b), nil }
	ha, err := f.e.StateHash(read)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := r.StateHash(read)
	if err != nil {
		t.Fatal(err)
	}
	if ha != hb {
		t.Fatal("the shrunk engine's state differs from its log's replay")
	}
	compareEngines(t, f.e, r, f.now)
}

func TestShrinkMovesEveryKindOfJob(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			f := newFixture(t)
			receipts := shrinkMix(t, f, rng, 600)
			before := f.e.jobs.next
			f.e.beginShrink(uint32(f.e.jobs.live + 1 + rng.IntN(20)))
			if !f.e.Shrinking() {
				t.Fatalf("no shrink from %d slots for %d jobs", before, f.e.jobs.live)
			}
			moved := 0
			for i := 0; f.e.Shrinking(); i++ {
				moved += f.e.Shrink(1 + rng.IntN(8))
				// commands keep coming while it shrinks
				switch i % 3 {
				case 0:
					f.put("p", PutRequest{Tags: map[string]string{"t": "new"}})
				case 1:
					f.tick(time.Duration(rng.IntN(90)) * time.Second)
				}
				if err := f.e.checkInvariants(); err != nil {
					t.Fatalf("after %d moves: %v", moved, err)
				}
				if i > 10000 {
					t.Fatal("the shrink does not end")
				}
			}
			if moved == 0 || f.e.jobs.next >= before {
				t.Fatalf("moved %d, slots %d → %d", moved, before, f.e.jobs.next)
			}
			sameAsReplay(t, f)
			// a moved reservation answers to its receipt (TTRs are a day)
			for qid, rc := range receipts {
				if _, err := f.e.Ack(f.now, "default", qid[:1], qid[2:], AckRequest{Receipt: rc}); err != nil {
					t.Fatalf("ack %s after the shrink: %v", qid, err)
				}
			}
			// tags still find their jobs
			if _, err := f.e.CancelByFilter(f.now, "default", "p", Filter{Tags: map[string]string{"t": "1"}}); err != nil {
				t.Fatal(err)
			}
			if err := f.e.checkInvariants(); err != nil {
				t.Fatal(err)
			}
			sameAsReplay(t, f)
		})
	}
}

// A shrink that runs out of room (the jobs grew back meanwhile) stops and
// gives the empty slots above its limit back to the free list.
func TestShrinkStopsWhenJobsGrowBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	f := newFixture(t)
	shrinkMix(t, f, rng, 400)
	f.e.beginShrink(uint32(f.e.jobs.live + 2))
	f.e.Shrink(1)
	for i := 0; i < 50 && f.e.Shrinking(); i++ {
		f.put("p", PutRequest{})
		f.put("p", PutRequest{})
		f.e.Shrink(1)
		if err := f.e.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if f.e.Shrinking() {
		t.Fatal("the shrink went on without room")
	}
	sameAsReplay(t, f)
}

// Nothing moves under a snapshot walk, which visits jobs by slot.
func TestShrinkWaitsForSnapshotWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	f := newFixture(t)
	shrinkMix(t, f, rng, 300)
	it := f.e.Snapshot()
	it.Next(10)
	f.e.beginShrink(uint32(f.e.jobs.live + 1))
	if n := f.e.Shrink(1000); n != 0 {
		t.Fatalf("moved %d jobs during a snapshot walk", n)
	}
	it.Close()
	it.Close() // twice is once
	if n := f.e.Shrink(1000); n == 0 {
		t.Fatal("nothing moved after the walk closed")
	}
	// a walk that runs to its end ends by itself
	it = f.e.Snapshot()
	for it.Next(100) != nil {
	}
	if f.e.walks != 0 {
		t.Fatalf("%d walks open after the end", f.e.walks)
	}
}

// TTL deadlines and far-store candidates hold a slot they do not update:
// a moved job is found by its sequence number.
func TestShrinkTTLAndFarFindMovedJobs(t *testing.T) {
	f := newFixture(t)
	f.e.SetFarHorizon(time.Hour)
	var ids []string
	for i := 0; i < 50; i++ {
		ids = append(ids, f.put("p", PutRequest{}).ID)
	}
	ttl := f.put("p", PutRequest{TTL: dur(time.Minute)}).ID
	far := f.put("p", PutRequest{Delay: dur(48 * time.Hour)}).ID
	for _, id := range ids {
		if err := f.e.Cancel(f.now, "default", "p", id, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.e.beginShrink(4)
	for f.e.Shrinking() {
		f.e.Shrink(10)
	}
	if f.e.jobs.next > 4 {
		t.Fatalf("slots %d after the shrink", f.e.jobs.next)
	}
	offered := f.e.FarOffer(f.now, 10)
	if len(offered) != 1 || offered[0].ID != far {
		t.Fatalf("far offer after the move: %+v", offered)
	}
	if n := f.e.FarTake(offered); n != 1 {
		t.Fatalf("far take of the moved job: %d", n)
	}
	f.tick(2 * time.Minute)
	f.e.Advance(f.now)
	if s := f.state("p", ttl); s != StateNone {
		t.Fatalf("moved TTL job is %s after its TTL", s)
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// The policy: a table at least half empty by at least four chunks
// shrinks to what its jobs need plus a quarter, and frees the rest.
func TestShrinkFreesChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 5 chunks")
	}
	f := newFixture(t)
	n := 5 * chunkSize
	var ids []string
	for i := 0; i < n; i++ {
		req := PutRequest{Payload: []byte("x")}
		if i%10 == 0 {
			req.Tags = map[string]string{"t": "a"}
		}
		ids = append(ids, f.put("p", req).ID)
	}
	if f.e.Shrink(1<<20) != 0 || f.e.Shrinking() {
		t.Fatal("a full table shrank")
	}
	for i, id := range ids {
		if i%10 != 0 {
			if err := f.e.Cancel(f.now, "default", "p", id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := f.e.SlabBytes()
	for f.e.Shrink(4096) > 0 || f.e.Shrinking() {
	}
	after := f.e.SlabBytes()
	if want := int64(chunkSize * jobSize); after != want {
		t.Fatalf("job table %d bytes after the shrink (was %d), want one chunk, %d", after, before, want)
	}
	if err := f.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := f.counts("p").Ready; got != uint64(n/10) {
		t.Fatalf("%d ready after the shrink, want %d", got, n/10)
	}
	sameAsReplay(t, f)
	if f.e.Shrink(1<<20) != 0 || f.e.Shrinking() {
		t.Fatal("a table that fits shrank again")
	}
}

// BenchmarkShrinkAfterFarDrain fills the engine the way the scale run
// does with a far horizon (docs/benchmarks.md): a tenth of the jobs keyed
// (they stay in memory), a twentieth tagged, delays spread over a year,
// so ~90 % go out to the far store. It hands them all out (FarOut), then
// shrinks, and reports the heap in use after the drain and after the
// shrink, per job put, and the time per job moved; fresh-bytes/job is a
// new engine holding only the jobs left, as after a restart. CHRONOQ_BENCH_JOBS sets
// the count (default 2M).
func BenchmarkShrinkAfterFarDrain(b *testing.B) {
	n := 2_000_000
	if v := benchJobs(); v > 0 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		e := New(Options{Sink: &encodeSink{}, Seed: 1})
		e.SetFarHorizon(time.Hour)
		now := t0
		for k := 0; k < n; k++ {
			d := time.Duration(k%8760)*time.Hour + 2*time.Hour
			req := PutRequest{Payload: benchPayload, Delay: &d}
			if k%10 == 0 {
				req.Key = fmt.Sprintf("user:%d", k%50000)
			}
			if k%20 == 1 {
				req.Tags = map[string]string{"tenant": fmt.Sprint(k % 100)}
			}
			if _, err := e.Put(now, "default", "q", req); err != nil {
				b.Fatal(err)
			}
		}
		for e.FarOut(now, 1<<16, func(*FarJob) bool { return true }) > 0 {
		}
		heap := func() float64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapInuse - base.HeapInuse)
		}
		drained := heap()
		left := e.Jobs()
		if left != n/10 {
			b.Fatalf("%d jobs left in memory, want the %d keyed", left, n/10)
		}
		start := time.Now()
		moved := 0
		var longest time.Duration
		for {
			t := time.Now()
			m := e.Shrink(4096)
			longest = max(longest, time.Since(t))
			moved += m
			if m == 0 && !e.Shrinking() {
				break
			}
		}
		took := time.Since(start)
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest-call-ms")
		shrunk := heap()
		runtime.KeepAlive(e)
		// what a restart gives: a new engine holding only the jobs left
		runtime.GC()
		runtime.ReadMemStats(&base)
		fresh := New(Options{Sink: &encodeSink{}, Seed: 1})
		for k := 0; k < n; k += 10 {
			d := time.Duration(k%8760)*time.Hour + 2*time.Hour
			req := PutRequest{Payload: benchPayload, Delay: &d, Key: fmt.Sprintf("user:%d", k%50000)}
			if _, err := fresh.Put(now, "default", "q", req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(heap()/float64(n), "fresh-bytes/job")
		runtime.KeepAlive(fresh)
		b.ReportMetric(drained/float64(n), "drained-bytes/job")
		b.ReportMetric(shrunk/float64(n), "shrunk-bytes/job")
		b.ReportMetric(float64(left), "jobs-left")
		b.ReportMetric(float64(moved), "moved")
		if moved > 0 {
			b.ReportMetric(float64(took.Nanoseconds())/float64(moved), "ns/move")
		}
	}
}

// A snapshot taken after a shrink can list a key's later job first; a
// bulk load appends it and sorts the chain at the end, and the key's head
// is then the earlier job again, as in the engine the snapshot came from.
func TestBulkLoadSortsChainsOutOfOrder(t *testing.T) {
	f := newFixture(t)
	filler := f.put("q", PutRequest{}).ID
	first := f.put("q", PutRequest{Key: "k"}).ID
	second := f.put("q", PutRequest{Key: "k"}).ID
	if err := f.e.Cancel(f.now, "default", "q", filler, ""); err != nil {
		t.Fatal(err)
	}
	f.e.beginShrink(2) // the second job moves into the filler's slot, before the first
	for f.e.Shrinking() {
		f.e.Shrink(10)
	}
	if f.e.seqLookup(f.e.jobs.get(0).seqNo()) != 0 || f.e.jobID(0) != second {
		t.Fatalf("slot 0 holds %s, want the key's second job", f.e.jobID(0))
	}
	it := f.e.Snapshot()
	var items [][]byte
	for {
		item, ok := it.NextItem(nil, 1)
		if !ok {
			break
		}
		items = append(items, item)
	}
	r := New(Options{Seed: 3})
	r.StartBulkLoad()
	for _, item := range items {
		if err := r.LoadItem(item); err != nil {
			t.Fatal(err)
		}
	}
	r.FinishBulkLoad()
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	compareEngines(t, f.e, r, f.now)
	jobs, err := r.Take(f.now, "default", TakeRequest{Queues: []string{"q"}, Max: 2})
	if err != nil || len(jobs) != 1 || jobs[0].ID != first {
		t.Fatalf("take after the load: %+v, %v; want only %s", jobs, err, first)
	}
}
