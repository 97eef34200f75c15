package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
	"github.com/gorilla/websocket"
)

// issue signs a member's certificate for 127.0.0.1 (server and client)
// and writes it and its key to dir.
func issue(t *testing.T, ca *testbin.CA, dir string) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	certPEM, keyPEM := ca.PeerPEM(t)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// TestForwardOverTLS: the members' HTTP listeners serve mutual TLS, and
// their peer links TLS from the same CA. A follower forwards a put, a read,
// an SSE stream and a WebSocket to the leader over https, verifying the
// leader's certificate with the peer CA and presenting its own.
func TestForwardOverTLS(t *testing.T) {
	ca := testbin.NewCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &clusterT{t: t}
	var peers []string
	for id := uint64(1); id <= 3; id++ {
		n := &node{id: id, dir: filepath.Join(t.TempDir(), "data"), http: freeAddr(t), admin: freeAddr(t), peerAddr: freeAddr(t)}
		c.nodes = append(c.nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s", id, n.peerAddr))
	}
	c.peers = strings.Join(peers, ",")
	var clientCert tls.Certificate
	for _, n := range c.nodes {
		cert, key, pair := issue(t, ca, t.TempDir())
		clientCert = pair
		c.start(n, "--http-tls-cert", cert, "--http-tls-key", key, "--http-tls-client-ca", caFile,
			"--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
		}
	})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}

	c.leader(15 * time.Second)
	lead := c.settled(10 * time.Second)
	follower := c.nodes[int(lead.id)%3]
	other := c.nodes[(int(lead.id)+1)%3]
	base := "https://" + follower.http

	sse := openSSE(t, &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}, base+"/v1/sse?channel=default/tlsnews")
	if _, ok := sse.next("subscribed", 10*time.Second); !ok {
		t.Fatal("no subscribed event through the follower over TLS")
	}
	// A leader change right after the start answers 503 for a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Post(base+"/v1/ns/default/queues/tq/jobs", "application/json", strings.NewReader(`{"id":"over-tls","payload":1}`))
		if err != nil {
			t.Fatalf("put through follower %d over https: %v", follower.id, err)
		}
		var body strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		body.Write(buf[:n])
		resp.Body.Close()
		if resp.StatusCode == 201 {
			break
		}
		if resp.StatusCode != 503 || time.Now().After(deadline) {
			t.Fatalf("put through follower %d over https: %d %s", follower.id, resp.StatusCode, body.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := hc.Get("https://" + other.http + "/v1/ns/default/queues/tq/jobs/over-tls")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("read through node %d over https: %d", other.id, resp.StatusCode)
	}
	resp, err = hc.Post(base+"/v1/ns/default/channels/tlsnews/publish", "application/json", strings.NewReader(`{"data":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("publish through the follower: %d", resp.StatusCode)
	}
	ev, ok := sse.next("pub", 10*time.Second)
	if !ok || jsonString(ev.data["data"]) != "hello" {
		t.Fatalf("SSE through the follower over TLS: %v %v", ev, ok)
	}

	d := websocket.Dialer{TLSClientConfig: tlsCfg, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial("wss://"+follower.http+"/v1/ws", nil)
	if err != nil {
		t.Fatalf("wss through the follower: %v", err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`)); err != nil {
		t.Fatal(err)
	}
	_, b, err := ws.ReadMessage()
	var m map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &m) != nil || m["result"] == nil {
		t.Fatalf("connect over wss through the follower: %s %v", b, err)
	}
}
