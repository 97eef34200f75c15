package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/testbin"
	"github.com/chronoq/chronoq/internal/wal"
)

// tcpNet connects brokers through real peer transports on 127.0.0.1,
// each refusing messages larger than maxMsg; a member can be cut off.
type tcpNet struct {
	mu      sync.Mutex
	members map[uint64]*Broker
	trs     map[uint64]*cluster.Transport
	down    map[uint64]bool
	addrs   map[uint64]string
	maxMsg  int
	// items, when set, wraps a member's snapshot source (to break a
	// transfer off).
	items func(id uint64, index uint64, fn func([]byte) error) error
}

type tcpTransport struct {
	net *tcpNet
	id  uint64
}

func (t tcpTransport) Send(msgs []raftpb.Message) {
	t.net.mu.Lock()
	tr := t.net.trs[t.id]
	if tr == nil || t.net.down[t.id] {
		t.net.mu.Unlock()
		return
	}
	var out []raftpb.Message
	for _, m := range msgs {
		if !t.net.down[m.To] {
			out = append(out, m)
		}
	}
	t.net.mu.Unlock()
	tr.Send(out)
}

func newTCPNet(t *testing.T, maxMsg int) *tcpNet {
	n := &tcpNet{members: map[uint64]*Broker{}, trs: map[uint64]*cluster.Transport{}, down: map[uint64]bool{}, addrs: map[uint64]string{}, maxMsg: maxMsg}
	for id := uint64(1); id <= 3; id++ {
		n.addrs[id] = testbin.FreeAddr(t)
	}
	return n
}

func (n *tcpNet) open(t *testing.T, dir string, id uint64) *Broker {
	t.Helper()
	mdir := filepath.Join(dir, fmt.Sprint(id))
	b, err := Open(Options{
		Dir: mdir, Logger: quiet,
		WAL: wal.Options{Sync: wal.SyncNever, Logger: quiet, SegmentSize: 256 << 10},
		Cluster: &ClusterOptions{ID: id, Peers: []uint64{1, 2, 3}, Transport: tcpTransport{n, id}, TickInterval: 10 * time.Millisecond,
			SnapshotEntries: 40, SnapshotBytes: 256 << 10, SnapshotCatchUp: ^uint64(0), StreamSnapshots: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cluster.NewTransport(cluster.TransportConfig{
		ID: id, Peers: n.addrs, Secret: []byte("bigsnap-secret-0123"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Deliver: func(m raftpb.Message) {
			n.mu.Lock()
			down := n.down[id]
			n.mu.Unlock()
			if down {
				cluster.DiscardMessage(m)
				return
			}
			b.Receive(m)
		},
		SnapshotItems: func(index uint64, fn func([]byte) error) error {
			if n.items != nil {
				return n.items(id, index, fn)
			}
			return b.SnapshotItems(index, fn)
		},
		SnapshotDir: mdir, MaxMessage: n.maxMsg, OnSnapshotFailed: b.SnapshotFailed,
	})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	n.mu.Lock()
	n.members[id], n.trs[id], n.down[id] = b, tr, false
	n.mu.Unlock()
	t.Cleanup(func() { tr.Close(); b.Close() })
	return b
}

func (n *tcpNet) setDown(id uint64, down bool) {
	n.mu.Lock()
	n.down[id] = down
	n.mu.Unlock()
}

func (n *tcpNet) leader(t *testing.T, except uint64) *Broker {
	t.Helper()
	return waitLeader(t, 15*time.Second, &n.mu, n.members, n.down, except)
}

// fillBehind cuts off a follower of lead and writes until the live state
// (about 2 MiB of payloads) is well past the transports' message limit
// and the leader's snapshot covers past the follower. A put that fails
// (a leader change on the loaded test machine) is sent again to the
// leader then.
func fillBehind(t *testing.T, n *tcpNet, lead *Broker) (lagger uint64) {
	t.Helper()
	st, _ := lead.ClusterStatus()
	lagger = st.ID%3 + 1
	n.setDown(lagger, true)
	ctx := context.Background()
	payload := bytes.Repeat([]byte("p"), 8<<10)
	for i, failed := 0, 0; i < 260; i++ {
		if _, err := lead.Put(ctx, "default", "q", engine.PutRequest{Payload: append([]byte(fmt.Sprintf("job-%d-", i)), payload...)}); err != nil {
			if failed++; failed > 5 {
				t.Fatalf("put %d: %v", i, err)
			}
			lead = n.leader(t, lagger)
			i--
		}
	}
	lagSt, _ := n.members[lagger].ClusterStatus()
	waitUntil(t, "a leader snapshot past the cut-off follower", func() bool {
		st, _ := n.leader(t, lagger).ClusterStatus()
		return st.Snapshot > lagSt.Applied
	})
	return lagger
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// caughtUp waits for lagger to install a snapshot and match the leader's
// state hash.
func caughtUp(t *testing.T, n *tcpNet, lead *Broker, lagger uint64) {
	t.Helper()
	lb := n.members[lagger]
	waitUntil(t, "the cut-off follower to catch up from a snapshot", func() bool {
		a, _ := lead.ClusterStatus()
		o, _ := lb.ClusterStatus()
		return o.Applied == a.Applied && o.SnapshotsInstalled > 0
	})
	// The two hashes are taken one after the other, each on its member's
	// loop: an entry can commit in between (on a loaded machine the 10 ms
	// ticks cost a leader change now and then, and a new leader appends an
	// empty entry), so they are compared once both were taken at the same
	// applied index.
	var h1, h2 [32]byte
	var a1, a2 uint64
	waitUntil(t, "the leader and the caught-up follower hashed at the same entry", func() bool {
		h1, a1, _ = memberHash(t, lead)
		h2, a2, _ = memberHash(t, lb)
		return a1 == a2
	})
	if h1 != h2 {
		t.Fatalf("follower at entry %d hashes %x, the leader at %d %x", a2, h2[:6], a1, h1[:6])
	}
	files, _ := filepath.Glob(filepath.Join(lb.opts.Dir, "raft-snapshot-*.recv"))
	if len(files) != 0 {
		t.Fatalf("received snapshot files left behind: %v", files)
	}
}

// A follower that lags past compaction catches up from a snapshot larger
// than the largest message the transports accept: its items are streamed.
func TestClusterSnapshotLargerThanAMessageReachesFollower(t *testing.T) {
	dir := t.TempDir()
	n := newTCPNet(t, 1100<<10)
	for id := uint64(1); id <= 3; id++ {
		n.open(t, dir, id)
	}
	lagger := fillBehind(t, n, n.leader(t, 0))
	n.setDown(lagger, false)
	caughtUp(t, n, n.leader(t, lagger), lagger)
}

// The leader dies while it streams a snapshot: the follower applies
// nothing of it, and catches up from the new leader's snapshot.
func TestClusterSnapshotLeaderDiesMidTransfer(t *testing.T) {
	dir := t.TempDir()
	n := newTCPNet(t, 1100<<10)
	for id := uint64(1); id <= 3; id++ {
		n.open(t, dir, id)
	}
	// The first member to stream a snapshot dies after three items.
	var dead atomic.Uint64
	n.items = func(id, index uint64, fn func([]byte) error) error {
		b := n.members[id]
		if !dead.CompareAndSwap(0, id) && dead.Load() != id {
			return b.SnapshotItems(index, fn)
		}
		sent := 0
		return b.SnapshotItems(index, func(item []byte) error {
			if sent == 3 {
				n.setDown(id, true)
				return errors.New("leader gone")
			}
			sent++
			return fn(item)
		})
	}
	lagger := fillBehind(t, n, n.leader(t, 0))
	n.setDown(lagger, false)
	waitUntil(t, "the broken-off transfer", func() bool { return dead.Load() != 0 })
	if o, _ := n.members[lagger].ClusterStatus(); o.SnapshotsInstalled != 0 {
		t.Fatalf("the follower installed %d snapshots from a transfer that broke off", o.SnapshotsInstalled)
	}
	nl := n.leader(t, dead.Load())
	caughtUp(t, n, nl, lagger)
}

// A transfer that breaks off while the leader lives is reported failed and
// sent again: the follower catches up from the same leader, having
// installed nothing of the broken one.
func TestClusterSnapshotTransferRetried(t *testing.T) {
	dir := t.TempDir()
	n := newTCPNet(t, 1100<<10)
	for id := uint64(1); id <= 3; id++ {
		n.open(t, dir, id)
	}
	var calls atomic.Int32
	n.items = func(id, index uint64, fn func([]byte) error) error {
		b := n.members[id]
		if calls.Add(1) > 1 {
			return b.SnapshotItems(index, fn)
		}
		sent := 0
		return b.SnapshotItems(index, func(item []byte) error {
			if sent == 2 {
				return errors.New("disk hiccup")
			}
			sent++
			return fn(item)
		})
	}
	lagger := fillBehind(t, n, n.leader(t, 0))
	n.setDown(lagger, false)
	caughtUp(t, n, n.leader(t, lagger), lagger)
	if c := calls.Load(); c < 2 {
		t.Fatalf("%d snapshot transfers, want the broken one and a retry", c)
	}
	if o, _ := n.members[lagger].ClusterStatus(); o.SnapshotsInstalled != 1 {
		t.Fatalf("the follower installed %d snapshots, want 1", o.SnapshotsInstalled)
	}
}
