package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

type inbox struct {
	mu   sync.Mutex
	msgs []raftpb.Message
}

func (b *inbox) deliver(m raftpb.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
}

func (b *inbox) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startTransport(t *testing.T, id uint64, peers map[uint64]string, secret string, in *inbox, lg io.Writer) *Transport {
	t.Helper()
	if lg == nil {
		lg = io.Discard
	}
	tr, err := NewTransport(TransportConfig{ID: id, Peers: peers, Secret: []byte(secret), Advertise: "http://node-" + string(rune('0'+id)),
		Deliver: in.deliver, Logger: slog.New(slog.NewTextHandler(lg, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTransportDeliversBetweenPeers(t *testing.T) {
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t)}
	var in1, in2 inbox
	t1 := startTransport(t, 1, peers, "s3cret-s3cret", &in1, nil)
	startTransport(t, 2, peers, "s3cret-s3cret", &in2, nil)
	big := bytes.Repeat([]byte("x"), 3<<20)
	deadline := time.Now().Add(5 * time.Second)
	for in2.count() < 1 && time.Now().Before(deadline) {
		t1.Send([]raftpb.Message{{Type: raftpb.MsgApp, From: 1, To: 2, Term: 3, Entries: []raftpb.Entry{{Index: 1, Term: 3, Data: big}}}})
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "a message", func() bool { return in2.count() > 0 })
	in2.mu.Lock()
	m := in2.msgs[0]
	in2.mu.Unlock()
	if m.From != 1 || m.Term != 3 || len(m.Entries) != 1 || !bytes.Equal(m.Entries[0].Data, big) {
		t.Fatalf("delivered %s from %d term %d with %d entries", m.Type, m.From, m.Term, len(m.Entries))
	}
	waitFor(t, "node 2's advertised address", func() bool { return t1.Advertised(2) == "http://node-2" })
}

func TestTransportRefusesWrongSecretAndStrangers(t *testing.T) {
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t)}
	var in1, in2 inbox
	var log2 logBuf
	t1 := startTransport(t, 1, peers, "the-right-secret", &in1, nil)
	startTransport(t, 2, peers, "another-secret!!", &in2, &log2)
	for i := 0; i < 20; i++ {
		t1.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 1}})
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the refusal to be logged", func() bool { return strings.Contains(log2.String(), "wrong cluster secret") })
	// A stranger speaking garbage, and one that claims to be an unknown
	// node with no secret.
	c, err := net.Dial("tcp", peers[2])
	if err != nil {
		t.Fatal(err)
	}
	c.Write(bytes.Repeat([]byte{0xff}, 4096))
	c.Close()
	if in2.count() != 0 || in1.count() != 0 {
		t.Fatalf("messages delivered without the secret: %d, %d", in1.count(), in2.count())
	}
	// A third transport claiming id 3 with the right secret is not a peer.
	peers3 := map[uint64]string{2: peers[2], 3: freeAddr(t)}
	var in3 inbox
	var log3 logBuf
	t3 := startTransport(t, 3, peers3, "another-secret!!", &in3, &log3)
	for i := 0; i < 20; i++ {
		t3.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 3, To: 2, Term: 1}})
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the unknown peer to be refused", func() bool { return strings.Contains(log2.String(), "node 3 is not a member of this cluster") })
	if in2.count() != 0 {
		t.Fatalf("a message from an unknown node was delivered")
	}
}

// The peer table follows the membership: a member added later is sent to
// and accepted; a removed one is dropped, refused as removed (and told
// so), and a retired member refuses everyone.
func TestTransportPeerTableChanges(t *testing.T) {
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t)}
	addr3 := freeAddr(t)
	var in1, in2, in3 inbox
	t1 := startTransport(t, 1, peers, "the-right-secret", &in1, nil)
	t2 := startTransport(t, 2, peers, "the-right-secret", &in2, nil)
	// Node 3 joins knowing every member; 1 and 2 learn it from the log.
	all := map[uint64]string{1: peers[1], 2: peers[2], 3: addr3}
	removed := make(chan string, 1)
	var log3 logBuf
	t3, err := NewTransport(TransportConfig{ID: 3, Peers: all, Secret: []byte("the-right-secret"), Deliver: in3.deliver,
		OnRemoved: func(why string) { removed <- why }, Logger: slog.New(slog.NewTextHandler(&log3, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t3.Close() })
	send := func(tr *Transport, from, to uint64) {
		tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: from, To: to, Term: 1}})
	}
	for i := 0; i < 20; i++ {
		send(t3, 3, 1)
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "node 3 told it is not a member", func() bool { return strings.Contains(log3.String(), "node 3 is not a member of this cluster") })
	if in1.count() != 0 {
		t.Fatal("node 1 accepted a message from node 3 before it was a member")
	}
	t1.UpdatePeers(all, nil)
	t2.UpdatePeers(all, nil)
	if got := t1.Peers(); got[3] != addr3 || len(got) != 2 {
		t.Fatalf("node 1's peer table %v", got)
	}
	waitFor(t, "node 3's message delivered", func() bool { send(t3, 3, 1); time.Sleep(10 * time.Millisecond); return in1.count() > 0 })
	waitFor(t, "node 1's message to node 3 delivered", func() bool { send(t1, 1, 3); time.Sleep(10 * time.Millisecond); return in3.count() > 0 })

	// Node 3 is removed: its connections close, and on redial it hears
	// that it was removed.
	t1.UpdatePeers(peers, []uint64{3})
	t2.UpdatePeers(peers, []uint64{3})
	if _, ok := t1.Peers()[3]; ok {
		t.Fatal("node 1 still sends to removed node 3")
	}
	n1 := in1.count()
	var why string
	waitFor(t, "node 3 told it was removed", func() bool {
		send(t3, 3, 1)
		time.Sleep(10 * time.Millisecond)
		select {
		case why = <-removed:
			return true
		default:
			return false
		}
	})
	if !strings.Contains(why, "node 3 was removed") {
		t.Fatalf("removal reason %q", why)
	}
	if in1.count() != n1 {
		t.Fatal("node 1 accepted a message from removed node 3")
	}
	// Retired, node 3 refuses everyone.
	t3.Retire("test")
	if len(t3.Peers()) != 0 {
		t.Fatalf("a retired transport still sends to %v", t3.Peers())
	}
}
