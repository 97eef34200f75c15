package broker

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/memhint"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// TestRestartTime measures recovery: CHRONOQ_RESTART_JOBS=N fills N jobs
// (100-byte payloads, half delayed; with CHRONOQ_RESTART_MIX=1 also a
// tenth keyed and a twentieth tagged, BenchmarkMemoryPerJob's mix; with
// CHRONOQ_RESTART_MIX=keyed every job keyed over 50 000 keys and half of
// them tagged, what stays in memory after a far drain), and
// reports the time to reopen from the shutdown snapshot alone and from
// snapshot + log tail (CHRONOQ_RESTART_TAIL=0 stops after the first).
// CHRONOQ_RESTART_DIR=D instead reopens the existing data directory D
// (e.g. what `KEEP=1 bench/scale.sh` leaves) without writing a snapshot,
// so it can be timed again and again (CHRONOQ_RESTART_KEEP=D fills D and
// leaves it); CHRONOQ_RESTART_CPUPROFILE=F writes
// a CPU profile of the (first) reopening to F, and CHRONOQ_RESTART_HINTS=M loads
// with the slab memory hints M (memhint.Mode: 0 none, 1 huge pages, 2
// pre-fault, 3 both, the default above 2 GiB) at any size.
// Not run by default: it is a measurement, not a check.
func TestRestartTime(t *testing.T) {
	if dir := os.Getenv("CHRONOQ_RESTART_DIR"); dir != "" {
		reopenForTiming(t, dir)
		return
	}
	n, _ := strconv.Atoi(os.Getenv("CHRONOQ_RESTART_JOBS"))
	if n == 0 {
		t.Skip("set CHRONOQ_RESTART_JOBS=N to measure restart time with N jobs")
	}
	mix := os.Getenv("CHRONOQ_RESTART_MIX") == "1"
	allKeyed := os.Getenv("CHRONOQ_RESTART_MIX") == "keyed"
	dir := t.TempDir()
	if keep := os.Getenv("CHRONOQ_RESTART_KEEP"); keep != "" {
		dir = keep // left behind for CHRONOQ_RESTART_DIR
	}
	opts := Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}, SnapshotBytes: 1 << 40}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	hour := time.Hour
	batch := make([]engine.PutRequest, 1000)
	start := time.Now()
	for put := 0; put < n; put += len(batch) {
		for i := range batch {
			batch[i] = engine.PutRequest{Payload: payload}
			if i%2 == 0 {
				batch[i].Delay = &hour
			}
			if mix {
				if k := put + i; k%10 == 0 {
					batch[i].Key = "user:" + strconv.Itoa(k%50000)
				}
				if k := put + i; k%20 == 0 {
					batch[i].Tags = map[string]string{"tenant": strconv.Itoa(k % 100)}
				}
			}
			if allKeyed {
				k := put + i
				batch[i].Key = "user:" + strconv.Itoa(k%50000)
				if k%2 == 0 {
					batch[i].Tags = map[string]string{"tenant": strconv.Itoa(k % 100)}
				}
			}
		}
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("filled %d jobs in %s", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := b.Close(); err != nil { // final snapshot
		t.Fatal(err)
	}
	t.Logf("shutdown with snapshot: %s", time.Since(start).Round(time.Millisecond))
	logBytes := dirSize(t, dir+"/wal")
	snapBytes := dirSize(t, dir+"/snap")

	runtime.GC()
	stopProfile := profileIfAsked(t)
	start = time.Now()
	b, err = Open(opts)
	stopProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restart from snapshot (%d MiB snapshot, %d MiB log): %s, %d jobs",
		snapBytes>>20, logBytes>>20, time.Since(start).Round(time.Millisecond), b.eng.Jobs())
	if os.Getenv("CHRONOQ_RESTART_TAIL") == "0" {
		b.Close()
		return
	}
	// now a log tail after the snapshot: churn 10% of the jobs, crash-close
	// without a snapshot, reopen
	jobs, _ := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1000}, 0)
	for len(jobs) > 0 && time.Since(start) < time.Minute {
		for _, j := range jobs {
			b.Ack(ctx, "default", "q", j.ID, engine.AckRequest{Receipt: j.Receipt})
		}
		if b.sink.written > int64(n)*20 {
			break
		}
		jobs, _ = b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1000}, 0)
	}
	tail := b.sink.written
	b.skipFinalSnapshot = true // as after a crash: the tail must be replayed
	b.Close()
	start = time.Now()
	b, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restart from snapshot + %d MiB of log: %s, %d jobs", tail>>20, time.Since(start).Round(time.Millisecond), b.eng.Jobs())
	b.Close()
}

func reopenForTiming(t *testing.T, dir string) {
	if h := os.Getenv("CHRONOQ_RESTART_HINTS"); h != "" {
		// 0 none, 1 huge pages, 2 pre-fault, 3 both (memhint.Mode)
		m, err := strconv.Atoi(h)
		if err != nil {
			t.Fatal(err)
		}
		defer func(old memhint.Mode, min int) { slabHints, slabHintsMin = old, min }(slabHints, slabHintsMin)
		slabHints, slabHintsMin = memhint.Mode(m), 0
	}
	opts := Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}, SnapshotBytes: 1 << 40}
	stopProfile := profileIfAsked(t)
	start := time.Now()
	b, err := Open(opts)
	stopProfile()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("reopened %s in %s: %d jobs, %d log records replayed", dir, took.Round(time.Millisecond), b.eng.Jobs(), b.recovered.Records)
	// what the loaded engine holds (the load's buffers collected)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use after the load: %.1f bytes/job (live %.1f)", float64(ms.HeapInuse)/float64(max(b.eng.Jobs(), 1)), float64(ms.HeapAlloc)/float64(max(b.eng.Jobs(), 1)))
	b.skipFinalSnapshot = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// profileIfAsked starts a CPU profile into CHRONOQ_RESTART_CPUPROFILE, if
// set, and returns what stops it.
func profileIfAsked(t *testing.T) (stop func()) {
	path := os.Getenv("CHRONOQ_RESTART_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func dirSize(t *testing.T, dir string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// A snapshot load with the memory hints on (at any size here) gives the
// same jobs back: the hints run beside the copy and change no byte.
func TestReopenWithMemoryHints(t *testing.T) {
	defer func(old memhint.Mode, min int) { slabHints, slabHintsMin = old, min }(slabHints, slabHintsMin)
	slabHints, slabHintsMin = memhint.HugePages|memhint.Populate, 0
	dir := t.TempDir()
	opts := Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hour := time.Hour
	var ids []string
	for put := 0; put < 5000; put += 500 {
		batch := make([]engine.PutRequest, 500)
		for i := range batch {
			batch[i] = engine.PutRequest{Payload: []byte(strconv.Itoa(put + i)), Tags: map[string]string{"n": strconv.Itoa(i % 3)}}
			if i%2 == 0 {
				batch[i].Delay = &hour
			}
		}
		res, err := b.PutBatch(ctx, "default", "q", batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.recovered.Records != 0 || b.eng.Jobs() != len(ids) {
		t.Fatalf("%d jobs (%d log records replayed), want %d from the snapshot alone", b.eng.Jobs(), b.recovered.Records, len(ids))
	}
	for i, id := range ids {
		j, err := b.Peek(ctx, "default", "q", id)
		if err != nil || j.Tags["n"] != strconv.Itoa(i%500%3) {
			t.Fatalf("job %d: %+v, %v", i, j, err)
		}
	}
}

// A snapshot load reads blocks into buffers it recycles once every job
// chunk of a block is applied: with a pool of two and small chunks, most
// buffers are reused many times, and the engine loaded is the one that
// wrote the snapshot (under -race, a buffer reused while a chunk in it was
// still being applied is also a data race).
func TestSnapshotLoadRecyclesBlocks(t *testing.T) {
	defer func(p, c int) { blockPool, snapChunk = p, c }(blockPool, snapChunk)
	blockPool, snapChunk = 2, 16
	dir := t.TempDir()
	opts := Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet}}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hour := time.Hour
	for put := 0; put < 40000; put += 1000 {
		batch := make([]engine.PutRequest, 1000)
		for i := range batch {
			n := put + i
			batch[i] = engine.PutRequest{Payload: []byte(strconv.Itoa(n))}
			if n%3 == 0 {
				batch[i].Key = "k" + strconv.Itoa(n%101)
			}
			if n%4 == 0 {
				batch[i].Tags = map[string]string{"t": strconv.Itoa(n % 7)}
			}
			if n%2 == 0 {
				batch[i].Delay = &hour
			}
		}
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(b *Broker) (h [32]byte) {
		_, err := b.do(ctx, func(time.Time) (any, error) { // on the loop, which owns the engine
			var err error
			h, err = b.eng.StateHash(func(r engine.BlobRef) ([]byte, error) { return b.log.ReadAt(r.Segment, r.Offset, r.Len) })
			return nil, err
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	want := hash(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir + "/snap"); err != nil || dirSize(t, dir+"/snap") < 8*snapshot.BlockSize {
		t.Fatalf("snapshot of %d bytes (%v, %v): too few blocks to recycle", dirSize(t, dir+"/snap"), fi, err)
	}
	b, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.recovered.Records != 0 || b.eng.Jobs() != 40000 {
		t.Fatalf("%d jobs (%d log records replayed), want 40000 from the snapshot alone", b.eng.Jobs(), b.recovered.Records)
	}
	if got := hash(b); got != want {
		t.Fatal("the engine loaded with recycled block buffers differs from the one that wrote the snapshot")
	}
}
