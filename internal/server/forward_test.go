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
