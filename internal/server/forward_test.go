package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"code":"not_leader","message":"this node is not the leader; the leader is node 2"}}`, "not_leader"},
		{`{"error":{"code":"no_quorum","message":"x"}}`, "no_quorum"},
		{`{"error":"service unavailable: this node is not the leader; the leader is node 3"}`, "not_leader"},
		{`{"error":"service unavailable: no leader is known: this node cannot reach a quorum"}`, "no_quorum"},
		{`{"error":"service unavailable: server is shutting down"}`, ""},
		{`{"error":{"code":"unknown_outcome"}}`, "unknown_outcome"},
		{`not json`, ""},
	} {
		if got := errorCode([]byte(tc.body)); got != tc.want {
			t.Errorf("errorCode(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// leaderSeq is a member's view of the leader, one answer per poll: the
// first n polls name this member (id 1), the rest name then.
func leaderSeq(n int, then uint64) func() (uint64, bool) {
	calls := 0
	return func() (uint64, bool) {
		if calls++; calls <= n {
			return 1, true
		}
		return then, then == 1
	}
}

// A leader that refused a request not_leader because it is handing
// leadership over still names itself leader until the transfer is done
// (which takes a while on a loaded machine): the request waits for the new
// leader instead of running here again — that run would be refused too,
// and after a few the client saw not_leader during a rolling restart.
func TestHandOverWaitsOutATransfer(t *testing.T) {
	deadline := time.Now().Add(handOverWait)
	lead, self, ok := handOverTarget(leaderSeq(40, 3), "not_leader", 1, deadline)
	if lead != 3 || self || !ok {
		t.Fatalf("refused not_leader while the transfer to node 3 ran: went to node %d (self %v, ok %v), want node 3", lead, self, ok)
	}
	// Also on a later attempt.
	lead, self, ok = handOverTarget(leaderSeq(40, 3), "not_leader", 2, deadline)
	if lead != 3 || self || !ok {
		t.Fatalf("attempt 2: went to node %d (self %v, ok %v), want node 3", lead, self, ok)
	}
}

func TestHandOverTarget(t *testing.T) {
	const soon = 100 * time.Millisecond
	for _, tc := range []struct {
		name     string
		leader   func() (uint64, bool)
		code     string
		attempt  int
		wait     time.Duration // the deadline is this far off
		lead     uint64
		self, ok bool
	}{
		{"no_quorum while this member leads: here again", leaderSeq(1<<30, 1), "no_quorum", 1, handOverWait, 1, true, true},
		{"no_quorum, another leader", leaderSeq(0, 2), "no_quorum", 1, handOverWait, 2, false, true},
		{"a transfer raft gave up: here again at the deadline", leaderSeq(1<<30, 1), "not_leader", 1, soon, 1, true, true},
		{"no leader known by the deadline", leaderSeq(0, 0), "not_leader", 1, soon, 0, false, false},
		{"no leader known by the deadline (no_quorum)", leaderSeq(0, 0), "no_quorum", 2, soon, 0, false, false},
	} {
		lead, self, ok := handOverTarget(tc.leader, tc.code, tc.attempt, time.Now().Add(tc.wait))
		if lead != tc.lead || self != tc.self || ok != tc.ok {
			t.Errorf("%s: (%d, %v, %v), want (%d, %v, %v)", tc.name, lead, self, ok, tc.lead, tc.self, tc.ok)
		}
	}
}

// fwdCA is a CA for the forwarding tests, with its certificate in a file.
type fwdCA struct {
	*testbin.CA
	file string
}

func newFwdCA(t *testing.T) *fwdCA {
	t.Helper()
	ca := testbin.NewCA(t)
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return &fwdCA{CA: ca, file: file}
}

// A follower forwards over https only to a leader whose certificate its
// peer CA verifies, and presents its own certificate to a leader that
// asks for one.
func TestForwardVerifiesLeader(t *testing.T) {
	ca, stranger := newFwdCA(t), newFwdCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	var clientSeen atomic.Bool
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clientSeen.Store(len(r.TLS.PeerCertificates) > 0)
		w.WriteHeader(http.StatusNoContent)
	}))
	leader.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Peer(t)}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	leader.StartTLS()
	defer leader.Close()

	for _, tc := range []struct {
		name    string
		trusted *fwdCA // the follower's peer CA
		want    string // "" or part of the error
	}{
		{"peer CA signed the leader", ca, ""},
		{"leader from another CA", stranger, "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientSeen.Store(false)
			src := &certSource{files: TLSFiles{ClientCA: tc.trusted.file}}
			src.cur.Store(&tls.Config{Certificates: []tls.Certificate{ca.Peer(t)}})
			s := &Server{certs: map[string]*certSource{peerLink: src}}
			p := &clusterPart{}
			hc := &http.Client{Transport: p.forwardTransport(s), Timeout: 5 * time.Second}
			resp, err := hc.Get(leader.URL)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("forward to a leader the peer CA signed: %v", err)
				}
				resp.Body.Close()
				if !clientSeen.Load() {
					t.Fatal("the follower presented no client certificate")
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatal("forwarded to a leader whose certificate the follower cannot verify")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// BenchmarkServeLocal measures what the hand-over wrapper adds to a
// request the leader serves itself (a put-sized body, read whole).
func BenchmarkServeLocal(b *testing.B) {
	body := strings.Repeat("x", 200)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"x"}`))
	})
	s := &Server{cfg: Config{MaxPayload: 1 << 20}}
	p := &clusterPart{}
	for _, wrapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "direct", true: "wrapped"}[wrapped], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest("POST", "/v1/ns/default/queues/q/jobs", strings.NewReader(body))
				w := httptest.NewRecorder()
				if wrapped {
					p.serveLocal(s, h, w, r, true)
				} else {
					h.ServeHTTP(w, r)
				}
			}
		})
	}
}
