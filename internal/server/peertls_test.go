package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
)

// syncBuf collects a server's log.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var peerSecret = []byte("peer-tls-test-secret-0123456789")

// peerTLSConfig is a cluster member with peer TLS from ca.
func peerTLSConfig(t *testing.T, ca *testCA, id uint64, peers map[uint64]string) server.Config {
	cfg := clusterConfig(t, id, peers)
	cfg.Cluster.Secret = peerSecret
	dir := t.TempDir()
	cert, key := ca.PeerPEM(t)
	cfg.TLS.Peer = server.TLSFiles{
		Cert:     writeFile(t, dir, "peer.pem", cert),
		Key:      writeFile(t, dir, "peer.key", key),
		ClientCA: writeFile(t, dir, "ca.pem", ca.PEM),
	}
	return cfg
}

// waitFor polls cond for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three members whose peer links are mutual TLS elect a leader and
// commit a put on every member.
func TestClusterPeerTLS(t *testing.T) {
	ca := newCA(t)
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	var members []*server.Server
	for id := uint64(1); id <= 3; id++ {
		s := start(t, peerTLSConfig(t, ca, id, peers))
		if !s.TLSEnabled("peer") {
			t.Fatalf("member %d: peer TLS is off", id)
		}
		members = append(members, s)
	}
	// The peer listener speaks TLS with a certificate from the peer CA to
	// a client holding one.
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", members[0].PeerAddr(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{ca.Peer(t)}})
	if err != nil {
		t.Fatalf("TLS to member 1's peer listener: %v", err)
	}
	c.Close()
	var leader *server.Server
	waitFor(t, "a leader", func() bool {
		for _, s := range members {
			if _, self := s.Broker().ClusterLeader(); self {
				leader = s
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := leader.Broker().Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("over TLS")})
	if err != nil {
		t.Fatalf("put on the leader: %v", err)
	}
	st, _ := leader.Broker().ClusterStatus()
	var follower uint64
	for i, s := range members {
		waitFor(t, "the put applied on every member", func() bool {
			m, ok := s.Broker().ClusterStatus()
			return ok && m.Applied >= st.Commit
		})
		if uint64(i+1) != st.ID {
			follower = uint64(i + 1)
		}
	}
	// Followers do not serve reads: move leadership to one, and read the
	// job there.
	if err := leader.Broker().TransferLeadershipTo(ctx, follower); err != nil {
		t.Fatalf("transfer leadership to %d: %v", follower, err)
	}
	waitFor(t, "the new leader", func() bool {
		_, self := members[follower-1].Broker().ClusterLeader()
		return self
	})
	if _, err := members[follower-1].Broker().Peek(ctx, "default", "q", res.ID); err != nil {
		t.Fatalf("member %d, leader after the put: peek %s: %v", follower, res.ID, err)
	}
}

// rogue is a transport posing as member 2: it knows the cluster secret,
// and tries to make member 1 follow it at term 100.
func rogue(t *testing.T, peers map[uint64]string, tlsCfg *tls.Config) *syncBuf {
	t.Helper()
	logs := &syncBuf{}
	cfg := cluster.TransportConfig{ID: 2, Peers: peers, Secret: peerSecret, Deliver: func(raftpb.Message) {},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tlsCfg != nil {
		cfg.TLS = func() *tls.Config { return tlsCfg }
	}
	tr, err := cluster.NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 100}})
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		tr.Close()
	})
	return logs
}

// A peer without a certificate from the peer CA is refused in the TLS
// handshake, secret or not, and nothing it sends reaches raft. The
// control case shows the probe works: without peer TLS the same rogue
// (which knows the secret) moves member 1 to its term.
func TestClusterPeerTLSRefusesStrangers(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		name    string
		tls     *tls.Config // the rogue's; nil: plain TCP
		plain   bool        // member 1 without peer TLS (control)
		refusal string      // in member 1's log
	}{
		{name: "no client certificate", tls: &tls.Config{RootCAs: pool, ClientCAs: pool}, refusal: "certificate"},
		{name: "certificate from another CA", tls: &tls.Config{RootCAs: pool, ClientCAs: pool,
			Certificates: []tls.Certificate{other.Peer(t)}}, refusal: "certificate"},
		{name: "plain TCP", refusal: "TLS handshake"},
		{name: "control: no peer TLS", plain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
			cfg := peerTLSConfig(t, ca, 1, peers)
			if tc.plain {
				cfg.TLS.Peer = server.TLSFiles{}
			}
			logs := &syncBuf{}
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			s := start(t, cfg)
			rogue(t, peers, tc.tls)
			followed := func() bool {
				st, _ := s.Broker().ClusterStatus()
				return st.Term >= 100 || st.Leader == 2
			}
			if tc.plain {
				waitFor(t, "the rogue's heartbeat to reach raft", followed)
				return
			}
			waitFor(t, "member 1 to refuse the rogue", func() bool {
				l := logs.String()
				return strings.Contains(l, "refused a peer connection") && strings.Contains(l, tc.refusal)
			})
			if followed() {
				st, _ := s.Broker().ClusterStatus()
				t.Fatalf("a refused peer's message reached raft: %+v", st)
			}
			if strings.Contains(logs.String(), "wrong cluster secret") {
				t.Fatal("the HMAC handshake ran on a connection TLS should have refused")
			}
		})
	}
}

func TestPeerTLSConfigErrors(t *testing.T) {
	ca := newCA(t)
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	for _, tc := range []struct {
		name    string
		edit    func(c *server.Config)
		cluster bool
		want    string
	}{
		{"cert without key", func(c *server.Config) { c.TLS.Peer.Key = "" }, true, "--peer-tls-key"},
		{"key without cert", func(c *server.Config) { c.TLS.Peer.Cert = "" }, true, "--peer-tls-cert"},
		{"no CA", func(c *server.Config) { c.TLS.Peer.ClientCA = "" }, true, "--peer-tls-ca"},
		{"global cert, no CA", func(c *server.Config) {
			c.TLS.Cert, c.TLS.Key = c.TLS.Peer.Cert, c.TLS.Peer.Key
			c.TLS.Peer = server.TLSFiles{}
		}, true, "--peer-tls-ca"},
		{"peer flags without a cluster", func(c *server.Config) { c.Cluster = nil }, false, "--node-id and --peers"},
		{"unreadable CA", func(c *server.Config) { c.TLS.Peer.ClientCA = c.TLS.Peer.Cert + ".missing" }, true, "peer TLS"},
	} {
		cfg := peerTLSConfig(t, ca, 1, peers)
		tc.edit(&cfg)
		s, err := server.New(cfg)
		if err == nil {
			s.Shutdown(context.Background())
			t.Errorf("%s: started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want it to name %q", tc.name, err, tc.want)
		}
	}
}

// ReloadTLS (SIGHUP) re-reads the peer certificate: the next peer
// connection gets the new one.
func TestPeerTLSReload(t *testing.T) {
	ca := newCA(t)
	peers := map[uint64]string{1: freePort(t), 2: freePort(t), 3: freePort(t)}
	cfg := peerTLSConfig(t, ca, 1, peers)
	s := start(t, cfg)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	client := ca.Peer(t)
	served := func() *big.Int {
		t.Helper()
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", s.PeerAddr(), &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}})
		if err != nil {
			t.Fatalf("TLS to the peer listener: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	before := served()
	cert, key := ca.PeerPEM(t)
	writeFile(t, filepath.Dir(cfg.TLS.Peer.Cert), filepath.Base(cfg.TLS.Peer.Cert), cert)
	writeFile(t, filepath.Dir(cfg.TLS.Peer.Key), filepath.Base(cfg.TLS.Peer.Key), key)
	if got := served(); got.Cmp(before) != 0 {
		t.Fatalf("certificate changed before the reload: %v → %v", before, got)
	}
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got.Cmp(before) == 0 {
		t.Fatalf("still serving certificate %v after the reload", got)
	}
}
