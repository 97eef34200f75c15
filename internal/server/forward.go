package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
)

// advertisedHTTP is the base URL peers forward client requests to: https
// when the HTTP listener serves TLS. A listener bound to every interface
// (0.0.0.0, ::) is advertised under the host of this member's --peers
// entry, which the other members already reach it by.
func (p *clusterPart) advertisedHTTP(s *Server) string { return p.advertisedURL(s, HTTP) }

// advertisedURL is the URL of listener name as peers reach it: the host of
// this member's --peers entry when the listener is bound to every
// address, https when the listener serves TLS.
func (p *clusterPart) advertisedURL(s *Server, name string) string {
	a := s.Addr(name)
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
	if s.certs[name] != nil {
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
// leader_changed, reconnect) whenever its hub is not the leader's, or it
// stepped down since they connected: their clients reconnect through any
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

// handOverWait bounds how long a request answered not_leader (or
// no_quorum) by a member that led a moment ago waits for the new leader
// before it is forwarded there; the broker holds a new leader's requests
// for as long (holdCatchUp).
const handOverWait = 3 * time.Second

// handOverAttempts bounds the re-runs of one request.
const handOverAttempts = 3

// serveLocal runs a request on this member. One that ran as the leader's
// (this member led, or a follower sent it here) and was refused because
// leadership moved — 503 not_leader, or no_quorum in the middle of an
// election — did not run, so it is run again where the leader now is:
// forwarded once a new leader is known, or here if this member leads
// again (docs/cluster.md "Hand-over"). A rolling restart or a
// transfer-leader thus shows clients no error. Only the 503 answer is
// held back; every other answer streams as it is written.
func (p *clusterPart) serveLocal(s *Server, next http.Handler, w http.ResponseWriter, r *http.Request, asLeader bool) {
	if !asLeader || isRealtime(r) {
		next.ServeHTTP(w, r)
		return
	}
	deadline := time.Now().Add(handOverWait)
	var body *teeBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &teeBody{r: r.Body, max: 2*s.cfg.MaxPayload + 1<<20}
		if n := r.ContentLength; n > 0 && n <= body.max {
			body.buf.Grow(int(n)) // one allocation for the copy
		}
		r.Body = body
	}
	for attempt := 1; ; attempt++ {
		rw := &holdWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if !rw.held {
			return
		}
		code := errorCode(rw.buf.Bytes())
		retry := (code == string(cluster.CodeNotLeader) || code == string(broker.CodeNoQuorum)) &&
			attempt < handOverAttempts && (body == nil || !body.over) && r.Context().Err() == nil
		var lead uint64
		var self bool
		if retry {
			lead, self, retry = handOverTarget(s.b.ClusterLeader, code, attempt, deadline)
		}
		if !retry {
			rw.release()
			return
		}
		clear(w.Header())
		if body != nil {
			r.Body = body.replay()
		}
		if !self {
			target := p.advertisedBy(lead).HTTP
			if target == "" {
				rw.release()
				return
			}
			s.lg.Debug("cluster: request refused during a leader change; forwarding it to the new leader", "leader", lead, "path", r.URL.Path)
			r.Header.Set(forwardedHeader, strconv.FormatUint(p.cfg.NodeID, 10))
			p.proxy(s, target).ServeHTTP(w, r)
			return
		}
	}
}

// handOverTarget waits (polling leader every 5 ms, until deadline) for
// where a request refused with code on its attempt-th run goes next: the
// leader another member now is (self false), or this member (self true).
// A not_leader refusal while this member still names itself leader means
// leadership is moving away (raft refuses proposals while a transfer is
// under way, and names the target): running it here again would be
// refused again for as long as the transfer takes — longer than a few
// quick re-runs on a loaded machine — so it waits for the new leader, and
// runs here again only if this member still leads at the deadline (raft
// gave the transfer up). A no_quorum refusal while this member leads runs
// here again after a 50 ms pause (the election's round trip is over). ok
// is false when no leader is known by the deadline.
func handOverTarget(leader func() (uint64, bool), code string, attempt int, deadline time.Time) (lead uint64, self, ok bool) {
	started := deadline.Add(-handOverWait)
	for {
		lead, self = leader()
		switch {
		case lead != 0 && !self:
			return lead, false, true
		case lead != 0 && code != string(cluster.CodeNotLeader) && (attempt > 1 || time.Since(started) > 50*time.Millisecond):
			return lead, true, true
		}
		if time.Now().After(deadline) {
			return lead, self, lead != 0
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// errorCode is the code of a JSON error body: the native API's
// {"error":{"code":...}}, or lmstfy's {"error":"service unavailable:
// <message>"}, whose message is the broker's (internal/broker/cluster.go,
// internal/cluster/node.go).
func errorCode(b []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	var native struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(e.Error, &native) == nil {
		return native.Code
	}
	var msg string
	json.Unmarshal(e.Error, &msg)
	switch {
	case strings.Contains(msg, "this node is not the leader"):
		return string(cluster.CodeNotLeader)
	case strings.Contains(msg, "no leader is known"), strings.Contains(msg, "this node knows no leader"):
		return string(broker.CodeNoQuorum)
	}
	return ""
}

// holdWriter passes a response through, except a 503, which it keeps
// (status and body) until release.
type holdWriter struct {
	http.ResponseWriter
	wrote bool // status passed through
	held  bool // a 503 is kept in buf
	buf   bytes.Buffer
}

func (w *holdWriter) WriteHeader(code int) {
	if w.wrote || w.held {
		return
	}
	if code == http.StatusServiceUnavailable {
		w.held = true
		return
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *holdWriter) Write(b []byte) (int, error) {
	if !w.wrote && !w.held {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		return w.buf.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *holdWriter) Flush() {
	if w.held {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *holdWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// release writes the kept 503.
func (w *holdWriter) release() {
	w.ResponseWriter.WriteHeader(http.StatusServiceUnavailable)
	w.ResponseWriter.Write(w.buf.Bytes())
}

// teeBody keeps a copy of what the handler reads of a request body (up to
// max bytes), so the request can be sent again.
type teeBody struct {
	r    io.ReadCloser
	buf  bytes.Buffer
	max  int64
	over bool
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if !t.over {
		if int64(t.buf.Len()+n) > t.max {
			t.over = true
			t.buf = bytes.Buffer{}
		} else {
			t.buf.Write(p[:n])
		}
	}
	return n, err
}

func (t *teeBody) Close() error { return t.r.Close() }

// replay is the body again: what was read, then what was not.
func (t *teeBody) replay() io.ReadCloser {
	return &teeBody{r: io.NopCloser(io.MultiReader(bytes.NewReader(t.buf.Bytes()), t.r)), max: t.max}
}

// electionWait is how long after losing its leader a member waits for the
// next one before answering no_quorum: an election after a hand-over or
// a crash takes a few round trips. A member that has known no leader for
// longer (a minority partition) answers at once.
const electionWait = time.Second

// awaitLeader waits, while an election that began less than electionWait
// ago is under way, for a leader to be known.
func (p *clusterPart) awaitLeader(s *Server, r *http.Request) (lead uint64, self bool) {
	until := s.b.ClusterLeaderLost().Add(electionWait)
	for {
		lead, self = s.b.ClusterLeader()
		if lead != 0 || !time.Now().Before(until) || r.Context().Err() != nil {
			return lead, self
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialFailure carries, through a forwarded request's context, a failure
// to connect to the leader: nothing was sent, so the request can go to
// the next leader.
type dialFailure struct{ err error }

type dialFailureKey struct{}

// deferDialError keeps a connection failure for forwardOnce instead of
// answering it, when forwardOnce asked for that.
func deferDialError(r *http.Request, err error) bool {
	f, _ := r.Context().Value(dialFailureKey{}).(*dialFailure)
	var op *net.OpError
	if f == nil || !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	f.err = err
	return true
}

// forwardOnce forwards r to the leader lead at target. If that member
// cannot be reached — it stopped a moment after handing leadership over,
// before this member heard of the new leader — the request, which was
// never sent, goes to the next leader known within handOverWait (or runs
// here if this member now leads).
func (p *clusterPart) forwardOnce(s *Server, next http.Handler, w http.ResponseWriter, r *http.Request, lead uint64, target string) {
	f := &dialFailure{}
	p.proxy(s, target).ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), dialFailureKey{}, f)))
	if f.err == nil {
		return
	}
	deadline := time.Now().Add(handOverWait)
	for time.Now().Before(deadline) && r.Context().Err() == nil {
		cur, self := s.b.ClusterLeader()
		if self {
			p.serveLocal(s, next, w, r, true)
			return
		}
		if cur != 0 && cur != lead {
			if t := p.advertisedBy(cur).HTTP; t != "" {
				s.lg.Debug("cluster: the former leader is gone; forwarding to the new one", "from", lead, "to", cur, "path", r.URL.Path)
				p.proxy(s, t).ServeHTTP(w, r)
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.lg.Warn("cluster: forwarding to the leader failed", "leader", target, "path", r.URL.Path, "err", f.err)
	writeClusterError(w, http.StatusServiceUnavailable, string(broker.CodeNoQuorum), fmt.Sprintf("the leader at %s did not answer", target))
}

// handOver runs first in a member's Shutdown: a leader hands leadership
// over, then keeps forwarding for a moment, so that the followers that
// still name it (they hear of the new leader within a round trip) reach
// the new leader through it rather than a closed port.
func (p *clusterPart) handOver(ctx context.Context, s *Server) {
	_, led := s.b.ClusterLeader()
	s.b.TransferLeadership(ctx)
	if lead, self := s.b.ClusterLeader(); led && !self && lead != 0 {
		t := time.NewTimer(handOverGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// handOverGrace is how long a former leader keeps forwarding before it
// closes its listeners.
const handOverGrace = 300 * time.Millisecond
