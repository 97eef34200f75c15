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
	waitFor(t, "the unknown peer to be refused", func() bool { return strings.Contains(log2.String(), "node 3 is not among this node's peers") })
	if in2.count() != 0 {
		t.Fatalf("a message from an unknown node was delivered")
	}
}
