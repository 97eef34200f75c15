package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// memNet connects brokers in one process; a member can be cut off.
type memNet struct {
	mu      sync.Mutex
	members map[uint64]*Broker
	down    map[uint64]bool
}

type memTransport struct {
	net *memNet
	id  uint64
}

func (t memTransport) Send(msgs []raftpb.Message) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.net.down[t.id] {
		return
	}
	for _, m := range msgs {
		if b := t.net.members[m.To]; b != nil && !t.net.down[m.To] {
			b.Receive(m)
		}
	}
}

func (n *memNet) open(t *testing.T, dir string, id uint64) *Broker {
	t.Helper()
	b, err := Open(Options{
		Dir: filepath.Join(dir, fmt.Sprint(id)), Logger: quiet,
		WAL:     wal.Options{Sync: wal.SyncNever, Logger: quiet},
		Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: memTransport{n, id}, TickInterval: 10 * time.Millisecond},
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

func (n *memNet) leader(t *testing.T, except uint64) *Broker {
	t.Helper()
	return waitLeader(t, 10*time.Second, &n.mu, n.members, n.down, except)
}

// waitLeader waits for a member other than except, not down, that leads
// and answers a read (it has committed an entry of its term); members and
// down are read under mu.
func waitLeader(t *testing.T, within time.Duration, mu *sync.Mutex, members map[uint64]*Broker, down map[uint64]bool, except uint64) *Broker {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		mu.Lock()
		var bs []*Broker
		for id, b := range members {
			if id != except && !down[id] {
				bs = append(bs, b)
			}
		}
		mu.Unlock()
		for _, b := range bs {
			if st, _ := b.ClusterStatus(); st.Role == "Leader" && b.Ready() == nil {
				if _, err := b.ListQueues(context.Background(), "default"); err == nil {
					return b
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %s", within)
	return nil
}

func TestClusterBrokersReplicateAndFailOver(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		b := net.open(t, dir, id)
		defer func() { b.Close() }()
	}
	ctx := context.Background()
	lead := net.leader(t, 0)
	st, _ := lead.ClusterStatus()
	var ids []string
	for i := 0; i < 20; i++ {
		r, err := lead.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(fmt.Sprintf("job-%d", i))})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		ids = append(ids, r.ID)
	}
	jobs, err := lead.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 1}, 0)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take: %v %v", jobs, err)
	}
	held := jobs[0]

	// A follower refuses to decide and names the leader.
	for id, b := range net.members {
		if id == st.ID {
			continue
		}
		_, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("x")})
		if engine.CodeOf(err) != cluster.CodeNotLeader {
			t.Fatalf("put on follower %d: %v, want not_leader", id, err)
		}
	}

	// The leader goes away; a new one has every acknowledged job, and the
	// reservation's receipt still works there.
	net.mu.Lock()
	net.down[st.ID] = true
	net.mu.Unlock()
	next := net.leader(t, st.ID)
	for _, id := range ids {
		j, err := next.Peek(ctx, "default", "q", id)
		if err != nil {
			t.Fatalf("acknowledged job %s missing on the new leader: %v", id, err)
		}
		if id == held.ID && j.State != engine.StateReserved {
			t.Fatalf("held job is %s on the new leader, want reserved", j.State)
		}
	}
	if _, err := next.Ack(ctx, "default", "q", held.ID, engine.AckRequest{Receipt: held.Receipt}); err != nil {
		t.Fatalf("ack with the old leader's receipt on the new leader: %v", err)
	}
	// The old leader, cut off, cannot commit: it answers no write, and
	// no read from the state the new leader has since changed.
	old := net.members[st.ID]
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	if j, err := old.Peek(rctx, "default", "q", held.ID); err == nil {
		t.Fatalf("a leader cut off from its peers answered a read: job %s is %s there, acked on the new leader", held.ID, j.State)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = old.Put(wctx, "default", "q", engine.PutRequest{Payload: []byte("lost")})
	if err == nil {
		t.Fatal("a leader cut off from its peers acknowledged a write")
	}
	var ee *engine.Error
	if !errors.As(err, &ee) {
		t.Fatalf("cut-off leader: %v, want an engine error", err)
	}

	// Healed, it rejoins and catches up.
	net.mu.Lock()
	net.down[st.ID] = false
	net.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := next.ClusterStatus()
		o, _ := old.ClusterStatus()
		if o.Applied == a.Applied && o.Leader == a.Leader && o.Leader != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old leader did not catch up: %+v vs %+v", o, a)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stopping the leader hands leadership over first: another member leads
// the moment Close returns, without waiting out an election timeout.
func TestClusterLeaderHandsOverOnClose(t *testing.T) {
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		b := net.open(t, dir, id)
		defer func() { b.Close() }()
	}
	lead := net.leader(t, 0)
	st, _ := lead.ClusterStatus()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	lead.TransferLeadership(ctx)
	if err := lead.Close(); err != nil {
		t.Fatal(err)
	}
	for id, b := range net.members {
		if id == st.ID {
			continue
		}
		if l, self := b.ClusterLeader(); self {
			return
		} else if l == st.ID {
			continue
		}
	}
	t.Fatalf("no other member leads right after the leader stopped")
}

// filterTransport sends what drop lets through.
type filterTransport struct {
	memTransport
	drop func(m raftpb.Message) bool
}

func (t filterTransport) Send(msgs []raftpb.Message) {
	var out []raftpb.Message
	for _, m := range msgs {
		if !t.drop(m) {
			out = append(out, m)
		}
	}
	t.memTransport.Send(out)
}

// A membership change sent to a leader that was just elected and has not
// committed an entry of its term yet waits for that, as a client request
// does (holdCatchUp), instead of being refused "catching up".
func TestClusterMemberChangeWaitsForNewLeaderCatchUp(t *testing.T) {
	dir := t.TempDir()
	n := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	var hold atomic.Bool
	// While hold is set, the answers to appends reach only member 1, so a
	// new leader elected then cannot commit; heartbeats still answer (it
	// keeps leading).
	drop := func(m raftpb.Message) bool {
		return hold.Load() && m.Type == raftpb.MsgAppResp && m.To != 1
	}
	for id := uint64(1); id <= 3; id++ {
		b, err := Open(Options{
			Dir: filepath.Join(dir, fmt.Sprint(id)), Logger: quiet,
			WAL:     wal.Options{Sync: wal.SyncNever, Logger: quiet},
			Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: filterTransport{memTransport{n, id}, drop}, TickInterval: 10 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		n.members[id] = b
		n.down[id] = false
		n.mu.Unlock()
		defer b.Close()
	}
	// Member 1 leads, then hands over while the new leader cannot commit.
	for {
		lead := n.leader(t, 0)
		if st, _ := lead.ClusterStatus(); st.ID == 1 {
			break
		}
		lead.TransferLeadership(context.Background())
	}
	hold.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.members[1].TransferLeadership(ctx)
	var nl *Broker
	for nl == nil && ctx.Err() == nil {
		for id := uint64(2); id <= 3; id++ {
			if st, _ := n.members[id].ClusterStatus(); st.Role == "Leader" {
				nl = n.members[id]
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if nl == nil {
		t.Fatal("no new leader")
	}
	done := make(chan error, 1)
	go func() {
		_, err := nl.RemoveMember(ctx, 1)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	hold.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("removing member 1 through the new leader that was catching up: %v", err)
	}
}
