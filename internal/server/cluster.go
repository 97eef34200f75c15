package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/cluster"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/metrics"
)

// ClusterConfig makes a server a member of a raft cluster
// (docs/cluster.md).
type ClusterConfig struct {
	NodeID uint64
	// Peers maps every member id, this one included, to its peer address
	// (--peers 1=127.0.0.1:7790,2=...).
	Peers map[uint64]string
	// PeerAddr is where to accept peers; default Peers[NodeID].
	PeerAddr string
	// Secret authenticates members to each other. Required unless every
	// peer address is loopback (protected mode).
	Secret []byte
	// TickInterval is raft's tick (default 100 ms).
	TickInterval time.Duration
	// Join starts a new member with an empty data directory that waits
	// for the leader to add it (chronoq cluster add) instead of
	// bootstrapping a configuration of its own (--join).
	Join bool
	// SnapshotEntries: a raft snapshot after this many applied entries
	// (0: the default, docs/cluster.md "Snapshots and log compaction").
	SnapshotEntries uint64
}

// MinClusterSecret is the shortest cluster secret accepted.
const MinClusterSecret = 16

// ParsePeers parses "1=host:port,2=host:port".
func ParsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idStr, addr, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("--peers: %q is not id=host:port", part)
		}
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("--peers: node id %q must be a number from 1", idStr)
		}
		if _, _, err := splitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: address of node %d: %w", id, err)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("--peers: node %d appears twice", id)
		}
		peers[id] = addr
	}
	if len(peers) == 0 {
		return nil, errors.New("--peers: no peers given")
	}
	return peers, nil
}

func splitHostPort(addr string) (string, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if port == "" {
		return "", "", fmt.Errorf("%q has no port", addr)
	}
	return host, port, nil
}

// clusterPart is the server's share of a member: the transport and the
// forwarding of client requests to the leader.
type clusterPart struct {
	cfg    ClusterConfig
	tr     atomic.Pointer[cluster.Transport]
	b      atomic.Pointer[broker.Broker]
	mu     sync.Mutex
	proxes map[string]*httputil.ReverseProxy
	// fwdTransport carries forwarded requests (forward.go); guarded by mu.
	fwdTransport *http.Transport
	stop         chan struct{} // closed by close: ends watchRealtime
	stopOnce     sync.Once
	metrics      *clusterCollector
	members      atomic.Pointer[[]cluster.Member] // the last applied membership
	retired      atomic.Pointer[string]           // set once this member was removed
}

// advertised is what a member tells its peers about itself when it
// connects: where its clients reach it.
type advertised struct {
	HTTP      string `json:"http,omitempty"`      // base URL of the HTTP listener
	Beanstalk string `json:"beanstalk,omitempty"` // host:port of the beanstalkd listener
	Admin     string `json:"admin,omitempty"`     // base URL of the admin listener
}

func (p *clusterPart) advertisedBy(id uint64) advertised {
	var ad advertised
	if tr := p.tr.Load(); tr != nil {
		json.Unmarshal([]byte(tr.Advertised(id)), &ad)
	}
	return ad
}

// forwardedHeader marks a request a member forwarded, so that it is never
// forwarded twice (members that disagree about the leader answer 503).
const forwardedHeader = "X-Chronoq-Forwarded-By"

func newClusterPart(cfg Config, m *metrics.Metrics) (*clusterPart, *broker.ClusterOptions, error) {
	cc := *cfg.Cluster
	if cc.NodeID == 0 {
		return nil, nil, errors.New("--node-id: must be 1 or more")
	}
	if _, ok := cc.Peers[cc.NodeID]; !ok {
		return nil, nil, fmt.Errorf("--peers: this node's id %d is not among them", cc.NodeID)
	}
	if cc.PeerAddr == "" {
		cc.PeerAddr = cc.Peers[cc.NodeID]
	}
	if len(cc.Secret) > 0 && len(cc.Secret) < MinClusterSecret {
		return nil, nil, fmt.Errorf("--cluster-secret-file: the secret must be at least %d bytes, got %d", MinClusterSecret, len(cc.Secret))
	}
	if len(cc.Secret) == 0 {
		// Protected mode: peer traffic beyond loopback needs the secret.
		addrs := []string{cc.PeerAddr}
		for _, a := range cc.Peers {
			addrs = append(addrs, a)
		}
		for _, a := range addrs {
			if !IsLoopback(a) {
				return nil, nil, fmt.Errorf("refusing to run a cluster over %s without a cluster secret: pass --cluster-secret-file FILE "+
					"(the same secret of at least %d bytes on every node), or use loopback addresses only", a, MinClusterSecret)
			}
		}
	}
	if err := checkMember(cfg.DataDir, cc.NodeID, cc.Peers); err != nil {
		return nil, nil, err
	}
	p := &clusterPart{cfg: cc, proxes: map[string]*httputil.ReverseProxy{}, stop: make(chan struct{})}
	p.metrics = newClusterCollector(p)
	if err := m.Register(p.metrics); err != nil {
		return nil, nil, fmt.Errorf("cluster metrics: %w", err)
	}
	ids := make([]uint64, 0, len(cc.Peers))
	for id := range cc.Peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return p, &broker.ClusterOptions{ID: cc.NodeID, Peers: ids, Transport: p, TickInterval: cc.TickInterval, SnapshotEntries: cc.SnapshotEntries,
		OnCommit: func(d time.Duration) { p.metrics.commit.Observe(d.Seconds()) },
		Addrs:    cc.Peers, Join: cc.Join, OnMembership: p.onMembership, OnRemoved: p.retire, StreamSnapshots: true}, nil
}

// memberFile records, in the data directory, which member wrote it: a
// data directory copied to another node, or given to another cluster, is
// refused instead of mixing two logs.
const memberFile = "cluster-member"

func checkMember(dir string, id uint64, peers map[uint64]string) error {
	path := filepath.Join(dir, memberFile)
	want := fmt.Sprintf("node %d\n", id)
	got, err := os.ReadFile(path)
	switch {
	case err == nil:
		if string(got) != want {
			return fmt.Errorf("data directory %s belongs to cluster member %q, not node %d: give each node its own data directory",
				dir, strings.TrimSpace(string(got)), id)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", path, err)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "wal")); err == nil && len(entries) > 0 {
		return fmt.Errorf("data directory %s holds a single node's log: a cluster member starts from an empty data directory", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// refuseMemberData stops a server started without --peers on a cluster
// member's data directory, whose log holds raft records a single node
// cannot read.
func refuseMemberData(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, memberFile))
	if err != nil {
		return nil
	}
	return fmt.Errorf("data directory %s belongs to cluster member %q: start it with --node-id and --peers", dir, strings.TrimSpace(string(b)))
}

// Send is the broker's transport until the real one starts.
func (p *clusterPart) Send(msgs []raftpb.Message) {
	if tr := p.tr.Load(); tr != nil {
		tr.Send(msgs)
	}
}

func (p *clusterPart) start(s *Server) error {
	p.b.Store(s.b)
	ad := advertised{HTTP: p.advertisedHTTP(s)}
	ad.Beanstalk = s.Addr(Beanstalk)
	ad.Admin = p.advertisedURL(s, Admin)
	advJSON, _ := json.Marshal(ad)
	adv := string(advJSON)
	peers := p.cfg.Peers
	if st, ok := s.b.ClusterStatus(); ok {
		peers = p.checkPeers(s, st)
	}
	tcfg := cluster.TransportConfig{
		ID: p.cfg.NodeID, Listen: p.cfg.PeerAddr, Peers: peers, Secret: p.cfg.Secret, Advertise: adv,
		Deliver: s.b.Receive, OnPeerDown: s.b.PeerDown, OnRemoved: s.b.PeerRemovedMe, Logger: s.lg,
		SnapshotItems: s.b.SnapshotItems, SnapshotDir: s.cfg.DataDir, OnSnapshotFailed: s.b.SnapshotFailed,
	}
	if src := s.certs[peerLink]; src != nil {
		// Loaded per connection: a SIGHUP reload (ReloadTLS) applies to
		// the next peer connection on both sides.
		tcfg.TLS = src.cur.Load
	}
	tr, err := cluster.NewTransport(tcfg)
	if err != nil {
		return err
	}
	p.tr.Store(tr)
	go p.watchRealtime(s)
	if ms := p.members.Load(); ms != nil {
		// A change applied while the transport started.
		tr.UpdatePeers(p.peerTable(*ms), nil)
	}
	if why := p.retired.Load(); why != nil {
		tr.Retire(*why)
	}
	s.lg.Info("cluster member started", "node", p.cfg.NodeID, "peer_addr", tr.Addr().String(), "peers", len(peers), "peer_tls", tcfg.TLS != nil, "join", p.cfg.Join)
	return nil
}

func (p *clusterPart) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	if tr := p.tr.Load(); tr != nil {
		tr.Close()
	}
}

// PeerAddr is the bound peer address of a cluster member ("" otherwise).
func (s *Server) PeerAddr() string {
	if s.cl == nil {
		return ""
	}
	if tr := s.cl.tr.Load(); tr != nil {
		return tr.Addr().String()
	}
	return ""
}

// forward sends a follower's client requests to the leader, so any node
// serves every HTTP protocol (the native API, lmstfy's /api, WebSocket and
// SSE). Without a known leader the request runs here and is answered 503
// no_quorum.
func (p *clusterPart) forward(s *Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lead, self := s.b.ClusterLeader()
		if lead == 0 {
			lead, self = p.awaitLeader(s, r)
		}
		tr := p.tr.Load()
		if isRealtime(r) && !s.b.ChannelsLive() && (self || lead == 0 || r.Header.Get(forwardedHeader) != "") {
			refuseRealtime(w, lead, self)
			return
		}
		if self || lead == 0 || tr == nil || r.Header.Get(forwardedHeader) != "" {
			p.serveLocal(s, next, w, r, self || r.Header.Get(forwardedHeader) != "")
			return
		}
		target := p.advertisedBy(lead).HTTP
		if target == "" {
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Set(forwardedHeader, strconv.FormatUint(p.cfg.NodeID, 10))
		p.forwardOnce(s, next, w, r, lead, target)
	})
}

// forwarder is the transport of every request a member forwards to the
// leader (client requests and membership changes alike), so both verify
// the leader's certificate the same way (forward.go).
func (p *clusterPart) forwarder(s *Server) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarderLocked(s)
}

func (p *clusterPart) forwarderLocked(s *Server) *http.Transport {
	if p.fwdTransport == nil {
		p.fwdTransport = p.forwardTransport(s)
	}
	return p.fwdTransport
}

func (p *clusterPart) proxy(s *Server, target string) *httputil.ReverseProxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rp := p.proxes[target]; rp != nil {
		return rp
	}
	u, err := url.Parse(target)
	if err != nil {
		u = &url.URL{Scheme: "http", Host: "invalid"}
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p.forwarderLocked(s)
	rp.FlushInterval = -1 // SSE and long-polls stream through
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if deferDialError(r, err) {
			return // forwardOnce tries the next leader
		}
		s.lg.Warn("cluster: forwarding to the leader failed", "leader", target, "path", r.URL.Path, "err", err)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":{"code":"no_quorum","message":"the leader at %s did not answer"}}`+"\n", target)
	}
	p.proxes[target] = rp
	return rp
}

// adminAuth checks the admin token when the server has one.
func adminAuth(s *Server, w http.ResponseWriter, r *http.Request) bool {
	tok := s.cfg.AdminToken
	if tok == "" {
		return true
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
		return true
	}
	writeClusterError(w, http.StatusUnauthorized, "unauthorized", "the admin token is required")
	return false
}

func writeClusterError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// transferHandler answers POST /cluster/transfer-leader {"to": N} on the
// leader's admin listener: leadership moves to member N (answered once it
// leads, within 5 s).
func (p *clusterPart) transferHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminAuth(s, w, r) {
			return
		}
		var req struct {
			To uint64 `json:"to"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.To == 0 {
			writeClusterError(w, http.StatusBadRequest, "bad_request", `body must be {"to": NODE_ID} with a node id from 1`)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := s.b.TransferLeadershipTo(ctx, req.To); err != nil {
			var ee *engine.Error
			status, code := http.StatusServiceUnavailable, "unavailable"
			if errors.As(err, &ee) {
				code = string(ee.Code)
				if ee.Code == engine.CodeBadRequest {
					status = http.StatusBadRequest
				}
			}
			writeClusterError(w, status, code, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]uint64{"leader": req.To})
	})
}

// statusHandler answers GET /cluster/status on the admin listener: this
// member's view of the group. With an admin token it requires it.
func (p *clusterPart) statusHandler(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminAuth(s, w, r) {
			return
		}
		st, ok := s.b.ClusterStatus()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, `{"error":{"code":"unavailable","message":"server is shutting down"}}`)
			return
		}
		json.NewEncoder(w).Encode(st)
	})
}

// clusterCollector exports a member's raft state on /metrics.
type clusterCollector struct {
	p                                          *clusterPart
	term, leader, isLeader, commitIdx, applied *prometheus.Desc
	lag, leaderChanges, proposals              *prometheus.Desc
	commit                                     prometheus.Histogram
}

func newClusterCollector(p *clusterPart) *clusterCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("chronoq_cluster_"+name, help, labels, nil)
	}
	return &clusterCollector{p: p,
		term:          d("term", "Current raft term."),
		leader:        d("leader", "Id of the leader this node knows (0: none)."),
		isLeader:      d("is_leader", "1 on the leader."),
		commitIdx:     d("commit_index", "Raft commit index."),
		applied:       d("applied_index", "Last entry applied to the engine."),
		lag:           d("follower_lag_entries", "On the leader: entries between the commit index and what a member's log is known to match.", "node"),
		leaderChanges: d("leader_changes_total", "Leader changes this node saw since it started."),
		proposals:     d("proposals_total", "Entries this node proposed as leader."),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chronoq_cluster_commit_seconds", Help: "From a batch decided on the leader to its entries committed on a quorum.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.leader, c.isLeader, c.commitIdx, c.applied, c.lag, c.leaderChanges, c.proposals} {
		ch <- d
	}
	c.commit.Describe(ch)
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c.commit.Collect(ch)
	b := c.p.b.Load()
	if b == nil {
		return
	}
	st, ok := b.ClusterStatus()
	if !ok {
		return
	}
	g := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	g(c.term, st.Term)
	g(c.leader, st.Leader)
	isLeader := uint64(0)
	if st.Leader == st.ID && st.ID != 0 {
		isLeader = 1
	}
	g(c.isLeader, isLeader)
	g(c.commitIdx, st.Commit)
	g(c.applied, st.Applied)
	for id, m := range st.Match {
		if id != st.ID {
			g(c.lag, st.Commit-min(m, st.Commit), strconv.FormatUint(id, 10))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.leaderChanges, prometheus.CounterValue, float64(st.LeaderChanges))
	ch <- prometheus.MustNewConstMetric(c.proposals, prometheus.CounterValue, float64(st.Proposals))
}

// The beanstalkd protocol has no redirects, so a follower relays whole
// connections: a connection accepted while another member leads is piped
// to that member's beanstalkd listener, and closed when leadership moves
// away from it (a beanstalkd client reconnects, and lands on the new
// leader). Connections this member serves itself are closed when it stops
// leading, for the same reason.
type beanstalkRelay struct {
	net.Listener
	p *clusterPart
	s *Server

	mu      sync.Mutex
	byLead  map[net.Conn]uint64 // open connections and the leader each depends on
	stop    chan struct{}
	stopped sync.Once
}

func (p *clusterPart) wrapBeanstalk(s *Server, ln net.Listener) net.Listener {
	r := &beanstalkRelay{Listener: ln, p: p, s: s, byLead: map[net.Conn]uint64{}, stop: make(chan struct{})}
	go r.watch()
	return r
}

func (r *beanstalkRelay) Accept() (net.Conn, error) {
	for {
		c, err := r.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lead, self := r.s.b.ClusterLeader()
		if !self && lead != 0 {
			if addr := r.p.advertisedBy(lead).Beanstalk; addr != "" {
				go r.relay(c, lead, addr)
				continue
			}
		}
		r.track(c, lead)
		return &relayConn{Conn: c, r: r}, nil
	}
}

func (r *beanstalkRelay) Close() error {
	r.stopped.Do(func() { close(r.stop) })
	return r.Listener.Close()
}

func (r *beanstalkRelay) track(c net.Conn, lead uint64) {
	r.mu.Lock()
	r.byLead[c] = lead
	r.mu.Unlock()
}

func (r *beanstalkRelay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.byLead, c)
	r.mu.Unlock()
}

type relayConn struct {
	net.Conn
	r *beanstalkRelay
}

func (c *relayConn) Close() error {
	c.r.untrack(c.Conn)
	return c.Conn.Close()
}

func (r *beanstalkRelay) relay(c net.Conn, lead uint64, addr string) {
	up, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		r.s.lg.Warn("cluster: cannot relay a beanstalkd connection to the leader", "leader", lead, "addr", addr, "err", err)
		c.Write([]byte("INTERNAL_ERROR\r\n"))
		c.Close()
		return
	}
	r.track(c, lead)
	defer r.untrack(c)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// watch closes connections whose leader is no longer the leader.
func (r *beanstalkRelay) watch() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		lead, _ := r.s.b.ClusterLeader()
		r.mu.Lock()
		for c, l := range r.byLead {
			if l != lead && lead != 0 {
				c.Close()
				delete(r.byLead, c)
			}
		}
		r.mu.Unlock()
	}
}
