package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
)

// advertisedHTTP is the base URL peers forward client requests to: https
// when the HTTP listener serves TLS. A listener bound to every interface
// (0.0.0.0, ::) is advertised under the host of this member's --peers
// entry, which the other members already reach it by.
func (p *clusterPart) advertisedHTTP(s *Server) string {
	a := s.Addr(HTTP)
	if a == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(a)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if peerHost, _, err := net.SplitHostPort(p.cfg.Peers[p.cfg.NodeID]); err == nil && peerHost != "" {
				a = net.JoinHostPort(peerHost, port)
			}
		}
	}
	if s.certs[HTTP] != nil {
		return "https://" + a
	}
	return "http://" + a
}

// forwardTransport carries forwarded requests to the leader. Over https it
// verifies the leader's certificate (against the host it advertised)
// with the system roots plus the CAs this member was configured to trust
// for its members and clients: the peer CA (--peer-tls-ca) and the HTTP
// listener's client CA (--tls-client-ca). When the leader demands client
// certificates, the follower presents its peer certificate, or else its
// HTTP listener's. The files are read at each new connection, so a SIGHUP
// reload applies to the next one.
func (p *clusterPart) forwardTransport(s *Server) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("forward to the leader: address %q: %w", addr, err)
		}
		cfg, err := p.leaderTLS(s, host)
		if err != nil {
			return nil, err
		}
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("forward to the leader over TLS: %w", err)
		}
		return c, nil
	}
	return tr
}

// leaderTLS is the client side of a forwarded request's TLS session.
func (p *clusterPart) leaderTLS(s *Server, host string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	var clientCert *tls.Certificate
	for _, name := range []string{peerLink, HTTP} {
		src := s.certs[name]
		if src == nil {
			continue
		}
		if ca := src.files.ClientCA; ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, fmt.Errorf("forward to the leader: read CA %s: %w", ca, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("forward to the leader: CA %s: no PEM certificate in it", ca)
			}
		}
		if cur := src.cur.Load(); clientCert == nil && cur != nil && len(cur.Certificates) > 0 {
			clientCert = &cur.Certificates[0]
		}
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: modernSuites,
		RootCAs:      pool,
		ServerName:   host,
		NextProtos:   []string{"http/1.1"},
	}
	if clientCert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return clientCert, nil }
	}
	return cfg, nil
}

// isRealtime is a WebSocket or SSE request: a long-lived session on one
// member's hub.
func isRealtime(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/v1/ws" || r.URL.Path == "/v1/sse")
}

// refuseRealtime answers a WebSocket or SSE request this member must not
// serve itself: it knows no leader, leads but has not taken over its hub
// yet, or was sent the request as the leader but no longer is. The
// client retries (503, Retry-After) and reaches the leader.
func refuseRealtime(w http.ResponseWriter, lead uint64, self bool) {
	switch {
	case self:
		writeClusterError(w, http.StatusServiceUnavailable, string(engine.CodeUnavailable), "the new leader is catching up with the log; retry shortly")
	case lead == 0:
		writeClusterError(w, http.StatusServiceUnavailable, string(broker.CodeNoQuorum), "this node knows no leader: no quorum is reachable")
	default:
		writeClusterError(w, http.StatusServiceUnavailable, string(cluster.CodeNotLeader), fmt.Sprintf("this node is not the leader; the leader is node %d", lead))
	}
}

// watchRealtime closes this member's WebSocket and SSE sessions (4006
// leader_changed, reconnect) whenever its hub is not the leader's, or
// changed hands since they connected: their clients reconnect through any
// node to the leader and recover from their position.
func (p *clusterPart) watchRealtime(s *Server) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	gen := s.b.ChannelsGeneration()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		cur := s.b.ChannelsGeneration()
		if (cur != gen || !s.b.ChannelsLive()) && s.rt.Stats().Connections > 0 {
			if n := s.rt.DisconnectLeaderChanged(); n > 0 {
				s.lg.Info("cluster: closed real-time sessions: this node's hub is no longer the leader's", "sessions", n)
			}
		}
		gen = cur
	}
}
