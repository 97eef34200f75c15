package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/testbin"
)

// testCA is the tests' certificate authority (internal/testbin/ca.go).
type testCA = testbin.CA

func newCA(t *testing.T) *testCA { return testbin.NewCA(t) }

// issue signs a leaf certificate (server: for 127.0.0.1; client: for
// client auth) and returns its PEM certificate and key and its serial.
func issue(t *testing.T, ca *testCA, server bool) (certPEM, keyPEM []byte, sn *big.Int) {
	t.Helper()
	if server {
		return ca.Sign(t, x509.ExtKeyUsageServerAuth)
	}
	return ca.Sign(t, x509.ExtKeyUsageClientAuth)
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsSetup writes a CA and a server certificate and returns the config
// with TLS on every listener (beanstalkd included), and the CA file.
func tlsSetup(t *testing.T, ca *testCA) (server.Config, string, *big.Int) {
	dir := t.TempDir()
	cert, key, sn := issue(t, ca, true)
	cfg := testConfig(t)
	cfg.TLS.Cert = writeFile(t, dir, "server.pem", cert)
	cfg.TLS.Key = writeFile(t, dir, "server.key", key)
	cfg.TLS.Beanstalk = true
	return cfg, writeFile(t, dir, "ca.pem", ca.PEM), sn
}

func caPool(ca *testCA) *x509.CertPool { return ca.Pool() }

// TestTLSEveryListener: the Go client over https on the main and admin
// listeners, and the beanstalkd protocol over TLS.
func TestTLSEveryListener(t *testing.T) {
	ca := newCA(t)
	cfg, caFile, _ := tlsSetup(t, ca)
	s := start(t, cfg)
	ctx := context.Background()
	c := client.New("https://"+s.Addr(server.HTTP), client.WithAdminURL("https://"+s.Addr(server.Admin)), client.WithCAFile(caFile))
	if _, err := c.CreateNamespace(ctx, "tls", true); err != nil {
		t.Fatalf("admin over TLS: %v", err)
	}
	if _, err := c.Put(ctx, "q", client.PutOptions{Payload: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}
	jobs, err := c.Take(ctx, "q", client.TakeOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("take over TLS: %v %v", jobs, err)
	}
	// plain HTTP to a TLS listener gets no API answer
	if resp, err := http.Get("http://" + s.Addr(server.HTTP) + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on a TLS listener")
		}
	}

	conn, err := tls.Dial("tcp", s.Addr(server.Beanstalk), &tls.Config{RootCAs: caPool(ca)})
	if err != nil {
		t.Fatalf("beanstalkd over TLS: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	conn.Write([]byte("put 0 0 60 2\r\nhi\r\n"))
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "INSERTED") {
		t.Fatalf("beanstalkd put over TLS: %q", line)
	}
}

// TestTLSWrongCARefused: a client trusting another CA does not connect.
func TestTLSWrongCARefused(t *testing.T) {
	cfg, _, _ := tlsSetup(t, newCA(t))
	s := start(t, cfg)
	other := newCA(t)
	c := client.New("https://"+s.Addr(server.HTTP), client.WithCAFile(writeFile(t, t.TempDir(), "other.pem", other.PEM)), client.WithRetries(0, 0))
	_, err := c.Put(context.Background(), "q", client.PutOptions{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("put with the wrong CA: %v, want a certificate error", err)
	}
	if _, err := tls.Dial("tcp", s.Addr(server.Beanstalk), &tls.Config{RootCAs: caPool(other)}); err == nil {
		t.Fatal("beanstalkd TLS with the wrong CA connected")
	}
}

// TestTLSModernOnly: TLS 1.1 and a non-forward-secret suite are refused.
func TestTLSModernOnly(t *testing.T) {
	ca := newCA(t)
	cfg, _, _ := tlsSetup(t, ca)
	s := start(t, cfg)
	for name, tc := range map[string]*tls.Config{
		"TLS 1.1":   {RootCAs: caPool(ca), MaxVersion: tls.VersionTLS11},
		"RSA kex":   {RootCAs: caPool(ca), MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256}},
		"CBC suite": {RootCAs: caPool(ca), MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
	} {
		if c, err := tls.Dial("tcp", s.Addr(server.HTTP), tc); err == nil {
			c.Close()
			t.Errorf("%s: handshake succeeded", name)
		}
	}
	c, err := tls.Dial("tcp", s.Addr(server.Admin), &tls.Config{RootCAs: caPool(ca), MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS 1.2 with default suites: %v", err)
	}
	c.Close()
}

// TestMutualTLS: with a client CA, a client without a certificate is
// refused on every listener and one with a certificate it signed is served.
func TestMutualTLS(t *testing.T) {
	ca := newCA(t)
	cfg, caFile, _ := tlsSetup(t, ca)
	clientCA := newCA(t)
	dir := t.TempDir()
	cfg.TLS.ClientCA = writeFile(t, dir, "clientca.pem", clientCA.PEM)
	s := start(t, cfg)
	ctx := context.Background()

	bare := client.New("https://"+s.Addr(server.HTTP), client.WithCAFile(caFile), client.WithRetries(0, 0))
	if _, err := bare.Put(ctx, "q", client.PutOptions{}); err == nil {
		t.Fatal("mTLS: a client without a certificate was served")
	}
	cert, key, _ := issue(t, clientCA, false)
	tc, err := client.TLSFiles(caFile, writeFile(t, dir, "c.pem", cert), writeFile(t, dir, "c.key", key))
	if err != nil {
		t.Fatal(err)
	}
	good := client.New("https://"+s.Addr(server.HTTP), client.WithAdminURL("https://"+s.Addr(server.Admin)), client.WithTLS(tc))
	if _, err := good.Put(ctx, "q", client.PutOptions{}); err != nil {
		t.Fatalf("mTLS with a client certificate: %v", err)
	}
	if _, err := good.ListNamespaces(ctx); err != nil {
		t.Fatalf("mTLS admin with a client certificate: %v", err)
	}
	// a certificate from the server's CA is not one the client CA signed
	wrongCert, wrongKey, _ := issue(t, ca, false)
	wc, err := tls.X509KeyPair(wrongCert, wrongKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{server.Admin, server.Beanstalk} {
		for name, certs := range map[string][]tls.Certificate{"none": nil, "other CA": {wc}} {
			conn, err := tls.Dial("tcp", s.Addr(l), &tls.Config{RootCAs: caPool(ca), Certificates: certs})
			if err == nil {
				// TLS 1.3 reports the refusal on the first read
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				conn.Write([]byte("stats\r\n"))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil {
				t.Errorf("%s listener: client certificate %s was served", l, name)
			}
		}
	}
}

// TestTLSReload: ReloadTLS (SIGHUP in chronoq serve) swaps the certificate
// while a long-poll is open: the long-poll survives and gets its job, new
// connections see the new certificate.
func TestTLSReload(t *testing.T) {
	ca := newCA(t)
	cfg, caFile, oldSN := tlsSetup(t, ca)
	s := start(t, cfg)
	ctx := context.Background()
	// the long-poll's connection records the certificate it was served
	dialed := make(chan *big.Int, 1)
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&tls.Dialer{Config: &tls.Config{RootCAs: caPool(ca)}}).DialContext(ctx, network, addr)
		if err == nil {
			dialed <- conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
		}
		return conn, err
	}}
	c := client.New("https://"+s.Addr(server.HTTP), client.WithHTTPClient(&http.Client{Transport: tr}))

	got := make(chan []*client.Job, 1)
	errc := make(chan error, 1)
	go func() {
		jobs, err := c.Take(ctx, "lp", client.TakeOptions{Wait: 30 * time.Second})
		got <- jobs
		errc <- err
	}()
	if sn := <-dialed; sn.Cmp(oldSN) != 0 {
		t.Fatalf("long-poll connection: serial %v, want the first certificate's %v", sn, oldSN)
	}

	cert, key, newSN := issue(t, ca, true)
	os.WriteFile(cfg.TLS.Cert, cert, 0o600)
	os.WriteFile(cfg.TLS.Key, key, 0o600)
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if sn := peerSerial(t, s.Addr(server.HTTP), ca); sn.Cmp(newSN) != 0 {
		t.Fatalf("after reload: serial %v, want the new %v", sn, newSN)
	}
	fresh := client.New("https://"+s.Addr(server.HTTP), client.WithCAFile(caFile))
	if _, err := fresh.Put(ctx, "lp", client.PutOptions{Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case jobs := <-got:
		if err := <-errc; err != nil || len(jobs) != 1 {
			t.Fatalf("long-poll across the reload: %v %v", jobs, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("long-poll did not get the job put after the reload")
	}

	// a bad file keeps the current certificate
	os.WriteFile(cfg.TLS.Key, []byte("garbage"), 0o600)
	if err := s.ReloadTLS(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if sn := peerSerial(t, s.Addr(server.HTTP), ca); sn.Cmp(newSN) != 0 {
		t.Fatalf("after a failed reload: serial %v, want %v still", sn, newSN)
	}
}

func peerSerial(t *testing.T, addr string, ca *testCA) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: caPool(ca)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestTLSStillNeedsTokens: TLS does not replace authentication; protected
// mode refuses a non-loopback listener without tokens, TLS or not.
func TestTLSStillNeedsTokens(t *testing.T) {
	cfg, _, _ := tlsSetup(t, newCA(t))
	cfg.HTTPAddr = "0.0.0.0:0"
	if s, err := server.New(cfg); err == nil {
		s.Shutdown(context.Background())
		t.Fatal("TLS without tokens beyond loopback was accepted")
	} else if !strings.Contains(err.Error(), "without authentication") {
		t.Fatalf("error %v does not name the missing authentication", err)
	}
	cfg, _, _ = tlsSetup(t, newCA(t))
	cfg.BeanstalkAddr = "0.0.0.0:0"
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "no authentication") {
		t.Fatalf("beanstalkd over TLS beyond loopback without --beanstalk-public: %v", err)
	}
}

// TestTLSConfigErrors: half a pair, unreadable files and --beanstalk-tls
// without a certificate are refused with the flag named.
func TestTLSConfigErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.TLS.Cert = "/nonexistent.pem"
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("cert without key: %v", err)
	}
	cfg.TLS.Key = "/nonexistent.key"
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("missing files: %v", err)
	}
	cfg = testConfig(t)
	cfg.TLS.Beanstalk = true
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "--beanstalk-tls") {
		t.Fatalf("--beanstalk-tls without certificate: %v", err)
	}
}

// TestTLSWebSocketAndSSE: WebSocket (wss://) and SSE ride on the HTTP
// listener's TLS; a browser's https:// Origin is its own origin there.
func TestTLSWebSocketAndSSE(t *testing.T) {
	ca := newCA(t)
	cfg, _, _ := tlsSetup(t, ca)
	s := start(t, cfg)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}, HandshakeTimeout: 5 * time.Second}
	h := http.Header{"Origin": {"https://" + s.Addr(server.HTTP)}}
	c, resp, err := d.Dial("wss://"+s.Addr(server.HTTP)+"/v1/ws", h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("wss dial: %v (status %d)", err, status)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`))
	_, msg, err := c.ReadMessage()
	if err != nil || !strings.Contains(string(msg), `"result"`) {
		t.Fatalf("connect over wss: %s %v", msg, err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}}, Timeout: 5 * time.Second}
	req, _ := http.NewRequest("GET", "https://"+s.Addr(server.HTTP)+"/v1/sse?channels=default/news", nil)
	sse, err := hc.Do(req)
	if err != nil {
		t.Fatalf("SSE over TLS: %v", err)
	}
	sse.Body.Close()
	if sse.StatusCode != 200 || !strings.HasPrefix(sse.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("SSE over TLS: %d %s", sse.StatusCode, sse.Header.Get("Content-Type"))
	}
}
