package broker

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// openFuzzy opens member id with a small snapshot walk per loop turn, so
// that a snapshot of a few thousand jobs spans many turns.
func (n *memNet) openFuzzy(t *testing.T, dir string, id uint64, down bool) *Broker {
	t.Helper()
	b, err := Open(Options{
		Dir: filepath.Join(dir, fmt.Sprint(id)), Logger: quiet,
		WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet, SegmentSize: 256 << 10},
		Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: memTransport{n, id}, TickInterval: 10 * time.Millisecond,
			SnapshotEntries: 200, SnapshotBytes: 256 << 10, SnapshotCatchUp: ^uint64(0), SnapshotTurnJobs: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.members[id] = b
	n.down[id] = down
	n.mu.Unlock()
	return b
}

// snapStats reads a member's snapshot stats on its loop (false: the loop
// did not answer in time); safe off the test's goroutine.
func snapStats(b *Broker) (st cluster.SnapshotStats, ok bool) {
	done := make(chan struct{})
	select {
	case b.cl.ctl <- func() { st = b.cl.node.SnapshotStats(); close(done) }:
	case <-time.After(5 * time.Second):
		return st, false
	}
	<-done
	return st, true
}

// A leader writing a raft snapshot keeps answering writes while the
// snapshot is written (it is fuzzy: internal/cluster/snapshot.go); the
// members end with equal states, each restarts from its snapshot to the
// same state, and a follower cut off past compaction catches up from one.
func TestClusterSnapshotDoesNotPauseWrites(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		net.openFuzzy(t, dir, id, false)
	}
	defer func() {
		for _, b := range net.members {
			b.Close()
		}
	}()
	ctx := context.Background()
	lead := net.leader(t, 0)
	st, _ := lead.ClusterStatus()
	lagger := st.ID%3 + 1
	net.mu.Lock()
	net.down[lagger] = true
	net.mu.Unlock()

	// A state of 4,000 jobs: at 20 jobs a turn, a walk of 200 turns.
	for i := 0; i < 10; i++ {
		reqs := make([]engine.PutRequest, 400)
		for k := range reqs {
			reqs[k].Payload = append([]byte(fmt.Sprintf("fill-%d-%d-", i, k)), bytes.Repeat([]byte("f"), 200)...)
		}
		if _, err := lead.PutBatch(ctx, "default", "q", reqs); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}

	// Writers at 8 connections, with payloads large enough that the log
	// soon grows by a snapshot's size; an observer notes when the
	// leader's snapshots run.
	type span struct{ from, to time.Time }
	var (
		mu      sync.Mutex
		answers []time.Time
		errs    []error
		runs    []span
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			payload := bytes.Repeat([]byte("w"), 2<<10)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := lead.Put(ctx, "default", "w", engine.PutRequest{Payload: append([]byte(fmt.Sprintf("w%d-%d-", w, i)), payload...)})
				at := time.Now()
				if err == nil && i%2 == 0 {
					// Half go again: the log grows, the state stays about
					// the same size, so snapshots keep coming.
					err = lead.Cancel(ctx, "default", "w", r.ID, "")
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					answers = append(answers, at)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(w)
	}
	observed := make(chan error, 1)
	go func() {
		var began time.Time
		var writing uint64
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			s, ok := snapStats(lead)
			now := time.Now()
			if !ok {
				observed <- fmt.Errorf("the leader's loop did not answer")
				return
			}
			switch {
			case writing == 0 && s.Writing != 0:
				began, writing = now, s.Writing
			case writing != 0 && s.Writing != writing:
				mu.Lock()
				runs = append(runs, span{began, now})
				n := len(runs)
				mu.Unlock()
				writing = s.Writing
				began = now
				if n >= 2 {
					observed <- nil
					return
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
		observed <- fmt.Errorf("fewer than 2 snapshots of the leader observed in 60 s")
	}()
	err := <-observed
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	during := 0
	for _, r := range runs {
		n := 0
		for _, a := range answers {
			if a.After(r.from) && a.Before(r.to) {
				n++
			}
		}
		t.Logf("leader snapshot over %s: %d puts answered while it ran", r.to.Sub(r.from).Round(time.Millisecond), n)
		during += n
	}
	if during == 0 {
		t.Fatalf("no put was answered while the leader wrote %d snapshots (%d puts in all): writes paused", len(runs), len(answers))
	}
	if len(errs) > 0 {
		t.Fatalf("%d writes failed while the leader snapshotted, the first: %v", len(errs), errs[0])
	}
	if s, _ := snapStats(lead); s.During == 0 {
		t.Fatalf("the leader's snapshots saw no entry commit while they were written: %+v", s)
	}

	// Equal states, the cut-off follower's from a snapshot.
	// equal waits for every member to hold the same state at the same
	// entry (a leader may still add an entry stamping its clock).
	equal := func(what string) {
		t.Helper()
		var last string
		deadline := time.Now().Add(20 * time.Second)
		for {
			if last = membersDiffer(t, net.members); last == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, last)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	net.mu.Lock()
	net.down[lagger] = false
	net.mu.Unlock()
	equal("all members at the same entry after the cut-off follower rejoined")
	if o, _ := net.members[lagger].ClusterStatus(); o.SnapshotsInstalled == 0 {
		t.Fatalf("the cut-off follower caught up without a snapshot: %+v", o)
	}

	// Each member restarts from its own snapshot, cut off: its snapshot
	// and its own log bring it to the state it had.
	for id := uint64(1); id <= 3; id++ {
		old := net.members[id]
		net.mu.Lock()
		net.down[id] = true
		net.mu.Unlock()
		time.Sleep(100 * time.Millisecond) // what was under way settles: cut off, it commits nothing more
		want, at, _ := memberHash(t, old)
		cs, _ := old.ClusterStatus()
		if cs.Snapshot == 0 {
			t.Fatalf("member %d has no snapshot to restart from", id)
		}
		old.Close()
		b := net.openFuzzy(t, dir, id, true)
		if o, _ := b.ClusterStatus(); o.Snapshot == 0 {
			t.Fatalf("member %d restarted without a snapshot (it had one at entry %d): %+v", id, cs.Snapshot, o)
		}
		waitUntil(t, fmt.Sprintf("member %d to apply its log up to entry %d after its restart", id, at), func() bool {
			o, _ := b.ClusterStatus()
			return o.Applied >= at
		})
		if h, applied, _ := memberHash(t, b); applied != at || h != want {
			t.Fatalf("member %d restarted from its snapshot: entry %d hash %x, before the restart entry %d hash %x", id, applied, h[:6], at, want[:6])
		}
		net.mu.Lock()
		net.down[id] = false
		net.mu.Unlock()
		equal(fmt.Sprintf("member %d back after its restart", id))
	}
}
