package broker

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// onLoop runs fn on a member's loop (whatever its role) and waits for it.
func onLoop(t *testing.T, b *Broker, fn func()) {
	t.Helper()
	done := make(chan struct{})
	select {
	case b.cl.ctl <- func() { fn(); close(done) }:
	case <-time.After(5 * time.Second):
		t.Fatal("member loop did not answer")
	}
	<-done
}

// memberHash is the member's engine state hash, its applied index and its
// first log segment.
func memberHash(t *testing.T, b *Broker) (h [32]byte, applied uint64, firstSeg uint32) {
	t.Helper()
	onLoop(t, b, func() {
		n := b.cl.node
		var err error
		if h, err = n.Engine().StateHash(n.ReadBlob); err != nil {
			t.Errorf("state hash: %v", err)
		}
		_, applied, _ = n.Status()
		firstSeg = n.Log().Segments()[0].Number
	})
	return h, applied, firstSeg
}

// membersDiffer says how members 2 and 3 differ from member 1 (applied
// entry or state hash), or "" when all three hold the same state at the
// same entry.
func membersDiffer(t *testing.T, members map[uint64]*Broker) string {
	t.Helper()
	want, at, _ := memberHash(t, members[1])
	for id := uint64(2); id <= 3; id++ {
		if h, applied, _ := memberHash(t, members[id]); applied != at || h != want {
			return fmt.Sprintf("member %d at entry %d hashes %x, member 1 at %d %x", id, applied, h[:6], at, want[:6])
		}
	}
	return ""
}

func (n *memNet) openSnap(t *testing.T, dir string, id uint64) *Broker {
	t.Helper()
	b, err := Open(Options{
		Dir: filepath.Join(dir, fmt.Sprint(id)), Logger: quiet,
		WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet, SegmentSize: 64 << 10},
		Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: memTransport{n, id}, TickInterval: 10 * time.Millisecond,
			SnapshotEntries: 40, SnapshotBytes: 32 << 10, SnapshotCatchUp: ^uint64(0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.members[id] = b
	n.down[id] = false
	n.mu.Unlock()
	return b
}

// A follower cut off while the others snapshot and drop the log it would
// need catches up from a snapshot the leader sends, and ends with the same
// state (payload bytes included, read from its own log).
func TestClusterLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		b := net.openSnap(t, dir, id)
		defer func() { b.Close() }()
	}
	ctx := context.Background()
	lead := net.leader(t, 0)
	st, _ := lead.ClusterStatus()
	lagger := st.ID%3 + 1
	net.mu.Lock()
	net.down[lagger] = true
	net.mu.Unlock()

	payload := bytes.Repeat([]byte("p"), 700)
	var ids []string
	for i := 0; i < 300; i++ {
		r, err := lead.Put(ctx, "default", "q", engine.PutRequest{Payload: append([]byte(fmt.Sprintf("job-%d-", i)), payload...)})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		ids = append(ids, r.ID)
		if i%3 == 0 {
			jobs, err := lead.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1}, 0)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("take: %v %v", jobs, err)
			}
			if i%2 == 0 {
				if _, err := lead.Ack(ctx, "default", "q", jobs[0].ID, engine.AckRequest{Receipt: jobs[0].Receipt, Result: []byte("done")}); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
		}
	}
	st, _ = lead.ClusterStatus()
	lagSt, _ := net.members[lagger].ClusterStatus()
	if st.Snapshot <= lagSt.Applied || st.SnapshotsTaken == 0 {
		t.Fatalf("the leader's snapshot (entry %d, %d taken) does not cover past the cut-off follower's applied %d", st.Snapshot, st.SnapshotsTaken, lagSt.Applied)
	}
	if _, _, seg := memberHash(t, lead); seg <= 1 {
		t.Fatalf("the leader kept its first log segment after %d snapshots", st.SnapshotsTaken)
	}

	net.mu.Lock()
	net.down[lagger] = false
	net.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a, _ := lead.ClusterStatus()
		o, _ := net.members[lagger].ClusterStatus()
		if o.Applied == a.Applied && o.Leader == a.Leader && o.SnapshotsInstalled > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off follower did not catch up from a snapshot: %+v vs leader %+v", o, a)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := membersDiffer(t, net.members); d != "" {
		t.Fatal(d)
	}
	// The follower's payload references point into its own files: it
	// serves every job once it leads.
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := lead.TransferLeadershipTo(ctx2, lagger); err != nil {
		t.Fatalf("transfer to the caught-up follower: %v", err)
	}
	nl := net.leader(t, 0)
	if got, _ := nl.ClusterStatus(); got.ID != lagger {
		t.Fatalf("leader is %d, want %d", got.ID, lagger)
	}
	for i, id := range ids {
		j, err := nl.Peek(ctx, "default", "q", id)
		if engine.CodeOf(err) == engine.CodeJobNotFound {
			continue // acked
		}
		if err != nil {
			t.Fatalf("peek %s on the follower that installed the snapshot: %v", id, err)
		}
		if want := append([]byte(fmt.Sprintf("job-%d-", i)), payload...); !bytes.Equal(j.Data, want) {
			t.Fatalf("job %s payload %q..., want %q...", id, j.Data[:min(12, len(j.Data))], want[:12])
		}
	}
}
