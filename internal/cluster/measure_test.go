package cluster

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Measures the log, the raft storage and a restart after many puts, takes
// and acks with and without snapshots (CHRONOQ_SNAP_MEASURE=N jobs;
// skipped otherwise).
func TestMeasureLogSize(t *testing.T) {
	jobs, _ := strconv.Atoi(os.Getenv("CHRONOQ_SNAP_MEASURE"))
	if jobs <= 0 {
		t.Skip("set CHRONOQ_SNAP_MEASURE=50000 to measure")
	}
	for _, ent := range []uint64{^uint64(0), 0} {
		s := openSolo(t, t.TempDir(), ent)
		s.cfg.WAL.SegmentSize = 4 << 20
		s.cfg.SnapshotBytes = 0
		s.cfg.SnapshotCatchUp = 0
		s.n.Close()
		s.open()
		payload := bytes.Repeat([]byte("x"), 200)
		start := time.Now()
		for i := 0; i < jobs; i++ {
			s.exec(func(e *engine.Engine, now time.Time) (any, error) {
				return e.Put(now, "default", "q", engine.PutRequest{Payload: payload})
			})
			res := s.exec(func(e *engine.Engine, now time.Time) (any, error) {
				return e.Take(now, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1})
			})
			j := res.([]engine.Job)[0]
			s.exec(func(e *engine.Engine, now time.Time) (any, error) {
				return e.Ack(now, "default", "q", j.ID, engine.AckRequest{Receipt: j.Receipt})
			})
		}
		size, first := logBytes(s.n)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("snapshots %v: %d put+take+ack (200-byte payloads, 4 MiB segments, default thresholds): log %d bytes, first segment %d, raft storage holds %d entries, heap %d MB, %d snapshots, took %s",
			ent != ^uint64(0), jobs, size, first, len(s.n.store.ents), ms.HeapAlloc>>20, s.n.SnapshotStats().Taken, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		s.n.Close()
		s.open()
		t.Logf("restart took %s, applied %d entries", time.Since(start).Round(time.Millisecond), s.applied)
		s.n.Close()
	}
}
