package engine

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"testing"
	"time"
)

// encodeSink encodes every entry into a reused buffer, as the real log
// does, and forgets it.
type encodeSink struct {
	buf []byte
	off uint32
}

func (s *encodeSink) Append(ent *Entry) error {
	s.buf = ent.Encode(s.buf[:0])
	ent.Locate(1, s.off)
	s.off += uint32(len(s.buf))
	return nil
}

var benchPayload = make([]byte, 100)

func BenchmarkPut(b *testing.B) {
	e := New(Options{Sink: &encodeSink{}, Seed: 1})
	now := t0
	req := PutRequest{Payload: benchPayload}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
		}
		if _, err := e.Put(now, "default", "q", req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTakeAck(b *testing.B) {
	e := New(Options{Sink: &encodeSink{}, Seed: 1})
	now := t0
	for i := 0; i < 10000; i++ {
		e.Put(now, "default", "q", PutRequest{Payload: benchPayload})
	}
	take := TakeRequest{Queues: []string{"q"}, Max: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		jobs, err := e.Take(now, "default", take)
		if err != nil || len(jobs) != 1 {
			b.Fatal(err)
		}
		if _, err := e.Ack(now, "default", "q", jobs[0].ID, AckRequest{Receipt: jobs[0].Receipt}); err != nil {
			b.Fatal(err)
		}
		e.Put(now, "default", "q", PutRequest{Payload: benchPayload})
	}
}

// BenchmarkDelayedActivation measures the cost of one delayed job becoming
// ready as time passes (heap pop + ready push), per job.
func BenchmarkDelayedActivation(b *testing.B) {
	e := New(Options{Sink: &encodeSink{}, Seed: 1})
	for i := 0; i < b.N; i++ {
		d := time.Duration(i%100000) * time.Millisecond
		e.Put(t0, "default", "q", PutRequest{Payload: benchPayload, Delay: &d})
	}
	b.ReportAllocs()
	b.ResetTimer()
	e.Advance(t0.Add(100 * time.Second))
	b.StopTimer()
	if c := e.queues[0].counts; c.Ready != uint64(b.N) {
		b.Fatalf("ready %d of %d", c.Ready, b.N)
	}
}

// BenchmarkMemoryPerJob fills the engine with jobs (100-byte payload
// references, half delayed, a tenth with keys, a twentieth with tags) and
// reports heap bytes per job and the worst GC pause while operating at
// that size. Set CHRONOQ_BENCH_JOBS to change the count (default 10M).
func BenchmarkMemoryPerJob(b *testing.B) {
	n := 10_000_000
	if v := benchJobs(); v > 0 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		e := New(Options{Sink: &encodeSink{}, Seed: 1})
		now := t0
		for k := 0; k < n; k++ {
			req := PutRequest{Payload: benchPayload}
			if k%2 == 0 {
				d := time.Duration(k%3600) * time.Second
				req.Delay = &d
			}
			if k%10 == 0 {
				req.Key = fmt.Sprintf("user:%d", k%50000)
			}
			if k%20 == 0 {
				req.Tags = map[string]string{"tenant": fmt.Sprint(k % 100)}
			}
			if k%1000 == 0 {
				now = now.Add(time.Millisecond)
			}
			if _, err := e.Put(now, "default", "q", req); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perJob := float64(after.HeapInuse-before.HeapInuse) / float64(n)
		b.ReportMetric(perJob, "bytes/job")
		// live objects alone; the difference to bytes/job is fragmentation
		// (spans kept in use by a few live small objects)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "live-bytes/job")
		if path := getenv("CHRONOQ_BENCH_HEAPPROFILE"); path != "" {
			// where the bytes go, taken while the engine is alive
			writeHeapProfile(b, path)
		}

		// operate at that size: take/ack/put churn with forced GCs, and
		// record the worst stop-the-world pause
		debug.FreeOSMemory()
		var gc debug.GCStats
		debug.ReadGCStats(&gc)
		startGC := gc.NumGC
		for k := 0; k < 200_000; k++ {
			jobs, _ := e.Take(now, "default", TakeRequest{Queues: []string{"q"}, Max: 1})
			if len(jobs) == 1 {
				e.Ack(now, "default", "q", jobs[0].ID, AckRequest{Receipt: jobs[0].Receipt})
			}
			e.Put(now, "default", "q", PutRequest{Payload: benchPayload})
			if k%50_000 == 0 {
				runtime.GC()
			}
		}
		debug.ReadGCStats(&gc)
		var worst time.Duration
		for k := 0; k < int(gc.NumGC-startGC) && k < len(gc.Pause); k++ {
			worst = max(worst, gc.Pause[k])
		}
		b.ReportMetric(float64(worst.Microseconds()), "worst-gc-pause-µs")
		runtime.KeepAlive(e)
	}
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

func benchJobs() int {
	var n int
	fmt.Sscan(getenv("CHRONOQ_BENCH_JOBS"), &n)
	return n
}

// BenchmarkSnapshotLoad measures the engine's share of a restart: loading
// the job chunks of a snapshot of CHRONOQ_BENCH_JOBS jobs (default 1M;
// 100-byte payload references, half delayed) into an empty engine. The
// file reading and block checks (internal/snapshot) are not included.
func BenchmarkSnapshotLoad(b *testing.B) {
	n := 1_000_000
	if v := benchJobs(); v > 0 {
		n = v
	}
	e := New(Options{Sink: &encodeSink{}, Seed: 1})
	hour := time.Hour
	for k := 0; k < n; k++ {
		req := PutRequest{Payload: benchPayload}
		if k%2 == 0 {
			req.Delay = &hour
		}
		if _, err := e.Put(t0, "default", "q", req); err != nil {
			b.Fatal(err)
		}
	}
	var items [][]byte
	it := e.Snapshot()
	for {
		item, ok := it.NextItem(nil, 1024)
		if !ok {
			break
		}
		items = append(items, item)
	}
	e = nil
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := New(Options{Seed: 1})
		for _, item := range items {
			if err := r.LoadItem(item); err != nil {
				b.Fatal(err)
			}
		}
		if r.Jobs() != n {
			b.Fatalf("%d jobs loaded of %d", r.Jobs(), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
}
