package broker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

func openMembers(t *testing.T) *memNet {
	t.Helper()
	dir := t.TempDir()
	net := &memNet{members: map[uint64]*Broker{}, down: map[uint64]bool{}}
	for id := uint64(1); id <= 3; id++ {
		b := net.open(t, dir, id)
		t.Cleanup(func() { b.Close() })
	}
	return net
}

func memberID(b *Broker) uint64 { return b.opts.Cluster.ID }

// waitHistory polls b's hub until cond holds for the channel's history
// after since in epoch.
func waitHistory(t *testing.T, b *Broker, ns, ch string, since uint64, epoch string, what string, cond func(pubsub.HistoryResult) bool) pubsub.HistoryResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := b.Channels().History(ns, ch, since, epoch, 0)
		if err == nil && cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d: %s: history %+v, err %v", memberID(b), what, h, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// After the leader is cut off, a durable channel keeps its epoch and
// offsets on the new leader: a subscriber resuming there with its
// position gets what it missed, and the next publication continues the
// numbering. Followers' hubs follow the log meanwhile.
func TestClusterDurableChannelSurvivesFailover(t *testing.T) {
	net := openMembers(t)
	ctx := context.Background()
	lead := net.leader(t, 0)
	if _, _, err := lead.CreateNamespace(ctx, "web", engine.NamespaceConfig{AutoCreateQueues: true,
		Channels: engine.ChannelHistory{Size: 100, Durable: true}}); err != nil {
		t.Fatal(err)
	}
	var epoch string
	for i := 1; i <= 3; i++ {
		off, ep, err := lead.Publish(ctx, "web", "news", []byte(`"n`+string(rune('0'+i))+`"`))
		if err != nil || off != uint64(i) || epoch != "" && ep != epoch {
			t.Fatalf("publish %d: offset %d epoch %q (first %q) %v", i, off, ep, epoch, err)
		}
		epoch = ep
	}
	for id, b := range net.members {
		if id == memberID(lead) {
			continue
		}
		waitHistory(t, b, "web", "news", 1, epoch, "a follower's hub has the durable publications", func(h pubsub.HistoryResult) bool {
			return h.Recovered && len(h.Publications) == 2 && h.Offset == 3
		})
	}
	net.mu.Lock()
	net.down[memberID(lead)] = true
	net.mu.Unlock()
	next := net.leader(t, memberID(lead))
	h, err := next.History(ctx, "web", "news", 1, epoch, 0, 0)
	if err != nil || !h.Recovered || h.Epoch != epoch || len(h.Publications) != 2 || h.Publications[1].Offset != 3 {
		t.Fatalf("resume at (%s, 1) on the new leader %d: %+v %v", epoch, memberID(next), h, err)
	}
	off, ep, err := next.Publish(ctx, "web", "news", []byte(`"after"`))
	if err != nil || off != 4 || ep != epoch {
		t.Fatalf("publish on the new leader: offset %d epoch %q %v, want 4 in %q", off, ep, err, epoch)
	}
}

// Memory-only channels take a new epoch when leadership comes back to a
// member: what another leader published never reached its hub, so an old
// position must not claim a recovery.
func TestClusterMemoryChannelNewEpochOnTakeOver(t *testing.T) {
	net := openMembers(t)
	ctx := context.Background()
	lead := net.leader(t, 0)
	off, epoch, err := lead.Publish(ctx, "default", "live", []byte(`1`))
	if err != nil || off != 1 {
		t.Fatalf("publish: %d %v", off, err)
	}
	first := memberID(lead)
	to := first%3 + 1
	if err := lead.TransferLeadershipTo(ctx, to); err != nil {
		t.Fatalf("transfer to %d: %v", to, err)
	}
	other := net.leader(t, first)
	if _, _, err := other.Publish(ctx, "default", "live", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if err := other.TransferLeadershipTo(ctx, first); err != nil {
		t.Fatalf("transfer back to %d: %v", first, err)
	}
	back := net.leader(t, to)
	if memberID(back) != first {
		t.Fatalf("leader %d, want %d", memberID(back), first)
	}
	h, err := back.History(ctx, "default", "live", 1, epoch, 0, 0)
	if err != nil || h.Recovered || h.Epoch == epoch {
		t.Fatalf("member %d leads again: history at (%s, 1) = %+v %v, want a new epoch and recovered false", first, epoch, h, err)
	}
}

type eventCollector struct {
	mu  sync.Mutex
	got []string
}

func (c *eventCollector) Deliver(p *pubsub.Publication) bool {
	var ev struct{ Event string }
	json.Unmarshal(p.Data, &ev)
	c.mu.Lock()
	c.got = append(c.got, ev.Event)
	c.mu.Unlock()
	return true
}

func (c *eventCollector) events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// A job put with notify on a member tells its channel what happens to
// it, as on a single node, and keeps doing so on a new leader.
func TestClusterJobNotifications(t *testing.T) {
	net := openMembers(t)
	ctx := context.Background()
	lead := net.leader(t, 0)
	run := func(b *Broker, id string) {
		t.Helper()
		c := &eventCollector{}
		sub, err := b.Channels().Subscribe("default", "jobs-"+id, c, pubsub.SubscribeOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if _, err := b.Put(ctx, "default", "nq", engine.PutRequest{ID: id, Payload: []byte("x"), Notify: "jobs-" + id}); err != nil {
			t.Fatalf("put: %v", err)
		}
		jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"nq"}, Max: 1}, 0)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("take: %v %v", jobs, err)
		}
		if _, err := b.Ack(ctx, "default", "nq", jobs[0].ID, engine.AckRequest{Receipt: jobs[0].Receipt}); err != nil {
			t.Fatalf("ack: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := c.events()
			if len(got) == 2 && got[0] == engine.EventReserved && got[1] == engine.EventCompleted {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d: job events %v, want [reserved completed]", memberID(b), got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	run(lead, "first")
	first := memberID(lead)
	if err := lead.TransferLeadershipTo(ctx, first%3+1); err != nil {
		t.Fatal(err)
	}
	run(net.leader(t, first), "second")
}

// A payload that fails its checksum on the leader is refused and its job
// dead-lettered through the log: every member then holds the job dead,
// with the damaged file named, and a new leader serves it so.
func TestClusterDamagedPayloadDeadLettered(t *testing.T) {
	net := openMembers(t)
	ctx := context.Background()
	lead := net.leader(t, 0)
	var ids []string
	for i := 0; i < 5; i++ {
		r, err := lead.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(`{"pad":"` + strings.Repeat("x", 300) + `"}`), PayloadJSON: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	victim, err := lead.Peek(ctx, "default", "q", ids[2])
	if err != nil {
		t.Fatal(err)
	}
	path := flipPayloadByte(t, lead.opts.Dir, victim.Payload)
	if _, err := lead.Peek(ctx, "default", "q", ids[2]); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("peek of a damaged payload on the leader: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := lead.Peek(ctx, "default", "q", ids[2])
		if err == nil && j.State == engine.StateDead && strings.Contains(j.LastError, path) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not dead-lettered on the leader: %v %v %q", j.State, err, j.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := memberID(lead)
	if err := lead.TransferLeadershipTo(ctx, first%3+1); err != nil {
		t.Fatal(err)
	}
	next := net.leader(t, first)
	j, err := next.Peek(ctx, "default", "q", ids[2])
	if err != nil || j.State != engine.StateDead || !strings.Contains(j.LastError, path) {
		t.Fatalf("member %d, the next leader: %v %v %q, want dead naming %s", memberID(next), j.State, err, j.LastError, path)
	}
	if j, err := next.Peek(ctx, "default", "q", ids[3]); err != nil || j.State != engine.StateReady {
		t.Fatalf("an intact job on the next leader: %v %v", j.State, err)
	}
}
