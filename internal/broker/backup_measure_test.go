package broker

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// TestBackupMeasure measures an online backup of a big server:
// CHRONOQ_BACKUP_JOBS=N fills N jobs (100-byte payloads), then takes a
// backup into a directory while one client puts continuously, and reports
// the backup's time and size and that client's put latencies during the
// backup next to those of the same period without one. Not run by
// default: it is a measurement, not a check.
func TestBackupMeasure(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CHRONOQ_BACKUP_JOBS"))
	if n == 0 {
		t.Skip("set CHRONOQ_BACKUP_JOBS=N to measure a backup of N jobs")
	}
	dir := t.TempDir()
	b, err := Open(Options{Dir: dir, Logger: quiet, WAL: wal.Options{Sync: wal.SyncAlways, Logger: quiet}, SnapshotBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	payload := make([]byte, 100)
	batch := make([]engine.PutRequest, 1000)
	for i := range batch {
		batch[i] = engine.PutRequest{Payload: payload}
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	for put := 0; put < n; put += len(batch) {
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("filled %d jobs in %s", n, time.Since(start).Round(time.Millisecond))
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	t.Logf("memory: %d bytes of heap per job (Go heap in use after GC), log %d bytes per job",
		(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/int64(n), dirSize(t, filepath.Join(dir, "wal"))/int64(n))

	probe := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		for {
			select {
			case <-stop:
				return lat
			default:
			}
			s := time.Now()
			if _, err := b.Put(ctx, "default", "probe", engine.PutRequest{Payload: payload}); err != nil {
				t.Error(err)
				return lat
			}
			lat = append(lat, time.Since(s))
		}
	}
	summary := func(lat []time.Duration) string {
		slices.Sort(lat)
		if len(lat) == 0 {
			return "no samples"
		}
		return "n=" + strconv.Itoa(len(lat)) + " p50=" + lat[len(lat)/2].String() + " p99=" + lat[len(lat)*99/100].String() + " max=" + lat[len(lat)-1].String()
	}
	run := func(d time.Duration, work func()) []time.Duration {
		stop := make(chan struct{})
		var lat []time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); lat = probe(stop) }()
		if work != nil {
			work()
		} else {
			time.Sleep(d)
		}
		close(stop)
		wg.Wait()
		return lat
	}
	base := run(3*time.Second, nil)
	var took, snapTook time.Duration
	var size int64
	during := run(0, func() {
		s := time.Now()
		set, err := b.Backup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snapTook = set.Took
		pr, pw := io.Pipe()
		go func() { _, err := set.WriteTo(pw); pw.CloseWithError(err) }()
		m, err := ReceiveBackup(pr, filepath.Join(t.TempDir(), "bk"))
		set.Release()
		if err != nil {
			t.Fatal(err)
		}
		took = time.Since(s)
		for _, f := range m.Files {
			size += f.Size
		}
	})
	t.Logf("backup of %d jobs: %s total (snapshot %s), %d MiB (snapshot %d bytes per job)", n, took.Round(time.Millisecond), snapTook.Round(time.Millisecond), size>>20,
		dirSize(t, filepath.Join(dir, "snap"))/int64(n))
	t.Logf("put latency without backup: %s", summary(base))
	t.Logf("put latency during backup:  %s", summary(during))
}
