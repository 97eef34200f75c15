package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// TestMeasureSnapshotWritePause measures what a leader's raft snapshot of
// a large state costs the writers: CHRONOQ_FUZZY_MEASURE=1000000 fills an
// in-process 3-member cluster with that many jobs, then 8 writers put
// until the leader's first snapshot is written, and it reports the put
// latencies overlapping the snapshot (docs/cluster.md, "Snapshots and log
// compaction"). Skipped without the variable.
func TestMeasureSnapshotWritePause(t *testing.T) {
	jobs, _ := strconv.Atoi(os.Getenv("CHRONOQ_FUZZY_MEASURE"))
	if jobs <= 0 {
		t.Skip("set CHRONOQ_FUZZY_MEASURE=jobs")
	}
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	const batch = 1000
	batches := (jobs + batch - 1) / batch
	for id := uint64(1); id <= 3; id++ {
		b, err := Open(Options{
			Dir: filepath.Join(dir, fmt.Sprint(id)), Logger: quiet,
			WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet},
			Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: memTransport{net, id}, TickInterval: 10 * time.Millisecond,
				SnapshotEntries: uint64(batches + 200), SnapshotBytes: 1 << 40},
		})
		if err != nil {
			t.Fatal(err)
		}
		net.mu.Lock()
		net.members[id], net.down[id] = b, false
		net.mu.Unlock()
		defer b.Close()
	}
	ctx := context.Background()
	lead := net.leader(t, 0)
	start := time.Now()
	payload := make([]byte, 100)
	for i := 0; i < batches; i++ {
		reqs := make([]engine.PutRequest, batch)
		for k := range reqs {
			reqs[k].Payload = payload
		}
		if _, err := lead.PutBatch(ctx, "default", "q", reqs); err != nil {
			t.Fatalf("fill batch %d: %v", i, err)
		}
	}
	t.Logf("filled %d jobs in %s", batches*batch, time.Since(start).Round(time.Millisecond))

	type put struct {
		from, to time.Time
		err      error
	}
	var (
		mu   sync.Mutex
		puts []put
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				from := time.Now()
				_, err := lead.Put(ctx, "default", "w", engine.PutRequest{Payload: payload})
				mu.Lock()
				puts = append(puts, put{from, time.Now(), err})
				mu.Unlock()
			}
		}()
	}
	// The snapshot runs from the first turn it is seen busy until it is
	// counted as taken: the first one that begins once the writers run.
	var began, ended time.Time
	var took time.Duration
	baseTaken := ^uint64(0)
	deadline := time.Now().Add(10 * time.Minute)
	for ended.IsZero() && time.Now().Before(deadline) {
		var busy bool
		var taken uint64
		done := make(chan struct{})
		lead.cl.ctl <- func() {
			st := lead.cl.node.SnapshotStats()
			busy, taken, took = lead.cl.node.SnapshotBusy(), st.Taken, st.LastTook
			close(done)
		}
		<-done
		now := time.Now()
		switch {
		case baseTaken == ^uint64(0) && !busy:
			baseTaken = taken
		case baseTaken != ^uint64(0) && busy && taken == baseTaken && began.IsZero():
			began = now
		case !began.IsZero() && taken > baseTaken:
			ended = now
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if ended.IsZero() {
		t.Fatal("the leader wrote no snapshot in 10 minutes")
	}
	// Every put overlapping the snapshot counts, answered or failed (a
	// request held past the catch-up hold fails with 503 unavailable).
	var lat, base []time.Duration
	answered, failed := 0, 0
	for _, p := range puts {
		if p.to.Before(began) || p.from.After(ended) {
			if p.err == nil {
				base = append(base, p.to.Sub(p.from))
			}
			continue
		}
		lat = append(lat, p.to.Sub(p.from))
		if p.err != nil {
			if failed++; failed == 1 {
				t.Logf("a put failed: %v", p.err)
			}
			continue
		}
		if p.to.After(began) && p.to.Before(ended) {
			answered++
		}
	}
	pct := func(d []time.Duration) (p99, maxLat time.Duration) {
		slices.Sort(d)
		if len(d) == 0 {
			return 0, 0
		}
		return d[len(d)*99/100], d[len(d)-1]
	}
	p99, maxLat := pct(lat)
	bp99, bmax := pct(base)
	t.Logf("snapshot of %d jobs: %s (member's own count %s); puts overlapping it: %d, %d failed; answered while it ran: %d; latency p99 %s max %s (other puts: %d, p99 %s max %s)",
		batches*batch, ended.Sub(began).Round(time.Millisecond), took.Round(time.Millisecond), len(lat), failed, answered,
		p99.Round(time.Millisecond), maxLat.Round(time.Millisecond), len(base), bp99.Round(time.Millisecond), bmax.Round(time.Millisecond))
}
