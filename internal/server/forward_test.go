package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// fwdCA is a CA for the forwarding tests.
type fwdCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newFwdCA(t *testing.T) *fwdCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "forward test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fwdCA{cert: cert, key: key, file: file}
}

// member issues a certificate for 127.0.0.1 usable as server and client.
func (ca *fwdCA) member(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A follower forwards over https only to a leader whose certificate its
// peer CA verifies, and presents its own certificate to a leader that
// asks for one.
func TestForwardVerifiesLeader(t *testing.T) {
	ca, stranger := newFwdCA(t), newFwdCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	var clientSeen atomic.Bool
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clientSeen.Store(len(r.TLS.PeerCertificates) > 0)
		w.WriteHeader(http.StatusNoContent)
	}))
	leader.TLS = &tls.Config{Certificates: []tls.Certificate{ca.member(t)}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
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
			src.cur.Store(&tls.Config{Certificates: []tls.Certificate{ca.member(t)}})
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
