// Package server assembles a chronoq process: it opens the data
// directory through the broker, builds every protocol front end on top of
// it, mounts them on their listeners and stops them again in an order that
// loses nothing. cmd/chronoq (serve and beanstalkd) and the black-box test
// harnesses all start chronoq through it, so the tests run the wiring the
// binary runs. docs/architecture.md draws the whole picture.
//
// Lifecycle: New validates the Config, opens the broker and binds the
// listeners (so Addr answers the real ports of ":0" addresses); Run serves
// until its context ends or a listener fails; Shutdown stops everything.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/api/httpkit"
	lmstfyapi "github.com/chronoq/chronoq/internal/api/lmstfy"
	"github.com/chronoq/chronoq/internal/api/ui"
	rtws "github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/metrics"
	"github.com/chronoq/chronoq/internal/stats"
	"github.com/chronoq/chronoq/internal/wal"
)

// Listener names, for Addr.
const (
	HTTP      = "http"      // native API, lmstfy /api, WebSocket and SSE
	Admin     = "admin"     // namespaces, tokens, metrics, health, pprof, lmstfy /token
	Beanstalk = "beanstalk" // the beanstalkd text protocol
)

// MaxPayloadLimit is the largest MaxPayload a server accepts.
const MaxPayloadLimit = engine.MaxPayloadHard

// Config describes one server. The flags of `chronoq serve` map onto its
// fields one to one; Default gives their defaults. An empty address
// disables that listener; port 0 picks a free one (see Addr).
type Config struct {
	DataDir string // log, snapshots and LOCK

	HTTPAddr      string
	AdminAddr     string
	BeanstalkAddr string
	// BeanstalkListener, when set, is used instead of BeanstalkAddr: an
	// already-open listener (a unix socket, a socket systemd passed in).
	BeanstalkListener net.Listener
	// BeanstalkPublic allows the beanstalkd listener, which has no
	// authentication, on a non-loopback address.
	BeanstalkPublic bool

	Sync          wal.SyncPolicy
	SyncInterval  time.Duration // under wal.SyncInterval
	SegmentSize   int64
	ForceRecovery bool
	// MaxJobs bounds the jobs the node holds; a put beyond is refused
	// (queue_full) rather than running the process out of memory. 0: none.
	MaxJobs uint64
	// FarHorizon moves delayed jobs due further ahead than this out of
	// memory, into bucket files under DataDir/far (docs/architecture.md,
	// "The far-future store"). 0: off. Not with Cluster.
	FarHorizon time.Duration
	// ReclaimRate bounds the bytes per second of old log segments and
	// pruned snapshots removed (broker.Options.ReclaimRate): 0 the
	// default, 32 MiB/s; negative: at once.
	ReclaimRate int64

	// AdminToken is required by the admin API and accepted by every
	// namespace. It (or a namespace token) is what allows listening
	// beyond loopback.
	AdminToken string
	// RequireAuth demands tokens even on loopback-only listeners; it is
	// always on with an AdminToken or a non-loopback HTTP or admin address.
	RequireAuth bool

	MaxPayload int64 // 1..MaxPayloadLimit bytes
	// MaxConnections caps simultaneous connections per listener; 0: no
	// cap. WebSocket and SSE together get nine tenths of it, leaving
	// room for plain HTTP.
	MaxConnections   int
	MetricsMaxQueues int // distinct queues labelled in metrics
	JWT              rtws.JWTOptions
	ConnectRate      float64 // new WebSocket/SSE connections per second
	// PubWriteInterval: least time between two writes of live
	// publications to one WebSocket connection; 0: write at once
	// (internal/api/ws/flusher.go).
	PubWriteInterval time.Duration

	// TLS puts listeners behind TLS (internal/server/tls.go).
	TLS TLSConfig

	// Beanstalk holds the beanstalkd protocol's own options (chronoq
	// beanstalkd sets its -z, -s and version); Logger defaults to Logger.
	Beanstalk beanstalk.Options

	// Logger receives every component's log; default slog.Default().
	Logger *slog.Logger
	// AuditLogger, when set, receives the audit lines of admin changes
	// (audit.go) instead of Logger.
	AuditLogger *slog.Logger
	// Clock replaces time.Now in the broker and the APIs (tests).
	Clock func() time.Time

	// Tune adjusts a front end's options after the server derived them
	// from the fields above, for knobs no flag sets (tests shrink limits
	// and timers with it).
	Tune Tuning
	// WrapBackend, when set, wraps the broker that every protocol front
	// end talks to (tests count calls through it). Recovery, snapshots
	// and metrics still use the broker itself.
	WrapBackend func(*broker.Broker) Backend

	// Cluster, when set, makes this server a member of a raft cluster
	// (cluster.go, docs/cluster.md).
	Cluster *ClusterConfig
}

// Tuning holds Config.Tune's hooks; nil hooks change nothing.
type Tuning struct {
	HTTP     func(*httpapi.Options)
	Lmstfy   func(*lmstfyapi.Options)
	Realtime func(*rtws.Options)
}

// Backend is what the protocol front ends need from the broker.
type Backend interface {
	httpapi.Backend
	lmstfyapi.Backend
	rtws.Backend
	beanstalk.Backend
}

var _ Backend = (*broker.Broker)(nil)

// Default is the configuration of `chronoq serve` without flags.
func Default() Config {
	return Config{
		DataDir:          "./chronoq-data",
		HTTPAddr:         "127.0.0.1:7777",
		AdminAddr:        "127.0.0.1:7778",
		BeanstalkAddr:    "127.0.0.1:11300",
		Sync:             wal.SyncAlways,
		SyncInterval:     10 * time.Millisecond,
		SegmentSize:      64 << 20,
		MaxPayload:       1 << 20,
		MaxConnections:   10000,
		MetricsMaxQueues: 1000,
		ConnectRate:      1000,
	}
}

// Server is one assembled chronoq.
type Server struct {
	cfg     Config
	lg      *slog.Logger
	b       *broker.Broker
	metrics *metrics.Metrics
	api     *httpapi.Server
	lm      *lmstfyapi.Server
	rt      *rtws.Server
	bs      *beanstalk.Server
	ui      *ui.UI         // the dashboard (/ui/ on the admin listener)
	hist    *stats.History // its rate history, fed by the broker
	bsConns *stats.CountingListener
	// httpOpen counts the HTTP listeners' open connections, as the
	// chronoq_connections{protocol="http"} gauge does, for the dashboard.
	httpOpen atomic.Int64
	cl       *clusterPart // nil without Config.Cluster

	lns   map[string]net.Listener // bound in New, served by Run
	https map[string]*http.Server
	certs map[string]*certSource // TLS listeners (tls.go)

	errc     chan error    // a listener failed while serving
	stopping chan struct{} // closed by Shutdown: Run returns
	once     sync.Once
	shutErr  error
}

// New checks cfg, opens the data directory (replaying the log) and binds
// the listeners. On error nothing stays open.
func New(cfg Config) (s *Server, err error) {
	if cfg.MaxPayload <= 0 || cfg.MaxPayload > MaxPayloadLimit {
		return nil, fmt.Errorf("--max-payload: must be between 1 and %d bytes, got %d", MaxPayloadLimit, cfg.MaxPayload)
	}
	if cfg.AdminToken != "" && len(cfg.AdminToken) < httpkit.MinTokenLen {
		return nil, fmt.Errorf("--admin-token: must be at least %d characters, got %d", httpkit.MinTokenLen, len(cfg.AdminToken))
	}
	if cfg.ConnectRate <= 0 {
		return nil, fmt.Errorf("--connect-rate: must be above 0, got %g", cfg.ConnectRate)
	}
	if cfg.PubWriteInterval < 0 || cfg.PubWriteInterval > time.Second {
		return nil, fmt.Errorf("--ws-pub-interval: must be from 0 to 1s, got %s", cfg.PubWriteInterval)
	}
	if cfg.MaxConnections < 0 {
		return nil, fmt.Errorf("--max-connections: must be 0 (no cap) or more, got %d", cfg.MaxConnections)
	}
	if cfg.HTTPAddr == "" && cfg.AdminAddr == "" && cfg.BeanstalkAddr == "" && cfg.BeanstalkListener == nil {
		return nil, errors.New("no listener: give an HTTP, admin or beanstalkd address")
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	s = &Server{cfg: cfg, lg: lg, lns: map[string]net.Listener{}, https: map[string]*http.Server{},
		errc: make(chan error, 3), stopping: make(chan struct{})}
	raiseFileLimit(lg, filesNeeded(cfg), processFileLimit())
	raiseProcs(lg, os.Getenv)

	// Protected mode (docs/api.md, "Authentication"): beyond loopback only
	// with authentication. The beanstalkd protocol has none at all, so it
	// needs an explicit opt-in; checked before the log is replayed.
	if cfg.BeanstalkListener == nil && cfg.BeanstalkAddr != "" && !IsLoopback(cfg.BeanstalkAddr) && !cfg.BeanstalkPublic {
		return nil, fmt.Errorf("refusing to serve the beanstalkd protocol on %s: it has no authentication; "+
			"listen on 127.0.0.1 or pass --beanstalk-public to accept that anyone who can reach the port can use the default namespace", cfg.BeanstalkAddr)
	}

	if err := s.setupTLS(); err != nil {
		return nil, err
	}

	walOpts := wal.Options{Sync: cfg.Sync, SyncInterval: cfg.SyncInterval, SegmentSize: cfg.SegmentSize,
		ForceRecovery: cfg.ForceRecovery, Logger: lg}
	var b *broker.Broker
	m := metrics.New(cfg.MetricsMaxQueues, func(ctx context.Context) ([]engine.QueueInfo, error) { return b.AllQueues(ctx) })
	s.hist = stats.New(0)
	bopts := broker.Options{Dir: cfg.DataDir, WAL: walOpts, Logger: lg, Observer: stats.Tee(m, s.hist), Clock: cfg.Clock, MaxJobs: cfg.MaxJobs, FarHorizon: cfg.FarHorizon, ReclaimRate: cfg.ReclaimRate}
	if cfg.FarHorizon < 0 || (cfg.FarHorizon > 0 && cfg.FarHorizon < time.Second) {
		return nil, fmt.Errorf("far horizon %s: must be 0 (off) or at least 1s", cfg.FarHorizon)
	}
	if cfg.Cluster != nil && cfg.FarHorizon > 0 {
		return nil, fmt.Errorf("far horizon %s: the far-future store is not available in a cluster", cfg.FarHorizon)
	}
	if cfg.Cluster != nil {
		if s.cl, bopts.Cluster, err = newClusterPart(cfg, m); err != nil {
			return nil, err
		}
	} else if err := refuseMemberData(cfg.DataDir); err != nil {
		return nil, err
	}
	b, err = broker.Open(bopts)
	if err != nil {
		return nil, err
	}
	s.b, s.metrics = b, m
	if err := m.Register(tableCollector{b}); err != nil {
		b.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if cfg.FarHorizon > 0 {
		if err := m.Register(farCollector{b}); err != nil {
			b.Close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	built := s // s is nil once an error is returned
	defer func() {
		if err != nil && built.ui != nil {
			built.ui.Close()
		}
	}()
	lns := s.lns
	defer func() {
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			b.Close()
		}
	}()

	mainPublic := cfg.HTTPAddr != "" && !IsLoopback(cfg.HTTPAddr)
	adminPublic := cfg.AdminAddr != "" && !IsLoopback(cfg.AdminAddr)
	if adminPublic && cfg.AdminToken == "" || mainPublic && cfg.AdminToken == "" && !b.HasTokens() {
		which := cfg.HTTPAddr
		if adminPublic {
			which = cfg.AdminAddr
		}
		return nil, fmt.Errorf("refusing to listen on %s without authentication: start with --admin-token TOKEN "+
			"(or CHRONOQ_ADMIN_TOKEN) and create namespace tokens with POST /admin/namespaces/{ns}/tokens, "+
			"or listen on 127.0.0.1 only", which)
	}
	requireAuth := cfg.RequireAuth || cfg.AdminToken != "" || mainPublic || adminPublic

	var backend Backend = b
	if cfg.WrapBackend != nil {
		backend = cfg.WrapBackend(b)
	}
	if err := s.build(backend, requireAuth); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	if s.cl != nil {
		if err := s.cl.start(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// build makes the front ends and the two route tables.
func (s *Server) build(backend Backend, requireAuth bool) error {
	cfg, b, m, lg := s.cfg, s.b, s.metrics, s.lg
	ho := httpapi.Options{
		AdminToken:  cfg.AdminToken,
		MaxPayload:  cfg.MaxPayload,
		MaxWait:     60 * time.Second,
		Logger:      lg,
		RequireAuth: requireAuth,
		Metrics:     m.Handler(),
		Observe:     func(op string, code int, d time.Duration) { m.Request("http", op, code, d) },
	}
	if cfg.Tune.HTTP != nil {
		cfg.Tune.HTTP(&ho)
	}
	s.api = httpapi.New(backend, ho)
	// lmstfy-compatible API: /api/ on the main listener, its token admin
	// routes on the admin listener.
	lo := lmstfyapi.Options{
		AdminToken:  cfg.AdminToken,
		RequireAuth: requireAuth,
		MaxPayload:  cfg.MaxPayload,
		MaxWait:     600 * time.Second,
		Logger:      lg,
		Observe:     func(op string, code int, d time.Duration) { m.Request("lmstfy", op, code, d) },
		Clock:       cfg.Clock,
		Bodies:      s.api.Bodies(),   // one body budget and one auth brake
		Failures:    s.api.Failures(), // across the HTTP and lmstfy listeners
	}
	if cfg.Tune.Lmstfy != nil {
		cfg.Tune.Lmstfy(&lo)
	}
	s.lm = lmstfyapi.New(backend, lo)
	// real time: WebSocket and SSE on the main listener, forced
	// disconnects on the admin listener
	ro := rtws.Options{
		JWT:            cfg.JWT,
		ConnectRate:    cfg.ConnectRate,
		AdminToken:     cfg.AdminToken,
		RequireAuth:    requireAuth,
		MaxPayload:     cfg.MaxPayload,
		MaxConnections: cfg.MaxConnections * 9 / 10, // leave room for plain HTTP and admin
		Logger:         lg,
		Clock:          cfg.Clock,
	}
	ro.PubWriteInterval = cfg.PubWriteInterval
	if cfg.Tune.Realtime != nil {
		cfg.Tune.Realtime(&ro)
	}
	rt, err := rtws.New(backend, b.Channels(), ro)
	if err != nil {
		return err
	}
	s.rt = rt
	b.OnTokensChanged(rt.TokensChanged)
	m.SetRealtime(func() metrics.Realtime {
		hs, rs := b.Channels().Stats(), rt.Stats()
		return metrics.Realtime{Channels: hs.Channels, Subscriptions: hs.Subscriptions, HistoryPublications: hs.Publications,
			Connections: rs.Connections, SlowDisconnects: rs.SlowDisconnects, Refused: rs.Refused, PanicsWS: rs.PanicsWS, PanicsSSE: rs.PanicsSSE, PanicsBeanstalk: s.beanstalkPanics()}
	})
	if cfg.BeanstalkAddr != "" || cfg.BeanstalkListener != nil {
		bo := cfg.Beanstalk
		if bo.Logger == nil {
			bo.Logger = lg
		}
		s.bs = beanstalk.New(backend, bo)
	}
	s.ui = ui.New(ui.Options{
		API: s.api.Main(),
		Auth: httpkit.Auth{AdminToken: cfg.AdminToken, RequireAuth: requireAuth, HasTokens: b.HasTokens,
			TokenNamespace: b.TokenNamespace, Failures: s.api.Failures()},
		Source: b, History: s.hist, Channels: b.Channels().List, DataDir: cfg.DataDir, Logger: lg,
		Connections: s.connections,
		Cluster:     s.clusterInfo,
	})
	return nil
}

// beanstalkPanics counts beanstalkd connections closed after a panic (0
// without that listener).
func (s *Server) beanstalkPanics() int64 {
	if s.bs == nil {
		return 0
	}
	return s.bs.Panics()
}

// clusterInfo is this member's view of the cluster for the dashboard
// (false on a single node).
func (s *Server) clusterInfo() (ui.ClusterInfo, bool) {
	st, ok := s.b.ClusterStatus()
	if !ok {
		return ui.ClusterInfo{}, false
	}
	ci := ui.ClusterInfo{ID: st.ID, Role: st.Role, Term: st.Term, Leader: st.Leader, Commit: st.Commit, Applied: st.Applied}
	for id, m := range st.Match {
		if ci.Lag == nil {
			ci.Lag = map[string]uint64{}
		}
		ci.Lag[strconv.FormatUint(id, 10)] = st.Commit - min(m, st.Commit)
	}
	return ci, true
}

// connections counts open connections by protocol for the dashboard.
func (s *Server) connections() map[string]int64 {
	out := map[string]int64{"http": s.httpOpen.Load(),
		"ws_sse": s.rt.Stats().Connections}
	if s.bsConns != nil {
		out["beanstalk"] = s.bsConns.Open()
	}
	return out
}

// MainHandler is the route table of the HTTP listener: the native API,
// lmstfy's /api, WebSocket and SSE.
func (s *Server) MainHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.api.Main())
	mux.Handle("/api/", s.lm.Main())
	mux.Handle("GET /v1/ws", s.rt.Handler())
	mux.Handle("GET /v1/sse", s.rt.Handler())
	h := s.audited(mux, mainAuditRules)
	if s.cl != nil {
		// A follower forwards before auditing: the leader that runs the
		// change logs it, once.
		return s.cl.forward(s, h)
	}
	return h
}

// AdminHandler is the route table of the admin listener: the native admin
// API (namespaces, tokens, metrics, health, pprof), forced real-time
// disconnects and lmstfy's token administration.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.api.Admin())
	mux.Handle("POST /admin/disconnect", s.rt.AdminHandler())
	for _, p := range []string{"/ui/", "GET /ui", "GET /admin/stats", "GET /admin/stats/stream"} {
		mux.Handle(p, s.ui.Handler())
	}
	mux.Handle("POST /admin/backup", s.backupHandler())
	for _, p := range []string{"/token/", "/info", "/pools", "/version"} {
		mux.Handle(p, s.lm.Admin())
	}
	if s.cl != nil {
		mux.Handle("GET /cluster/status", s.cl.statusHandler(s))
		mux.Handle("POST /cluster/transfer-leader", s.cl.transferHandler(s))
		mux.Handle("POST /cluster/members", s.cl.addMemberHandler(s))
		mux.Handle("DELETE /cluster/members/{id}", s.cl.removeMemberHandler(s))
	}
	return s.audited(mux, append(dashboardAuditRules(), adminAuditRules...))
}

func (s *Server) listen() error {
	bind := func(name, addr string) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s listener: %w", name, err)
		}
		if s.cfg.MaxConnections > 0 {
			ln = newLimitListener(ln, s.cfg.MaxConnections)
		}
		s.lns[name] = s.wrapTLS(name, ln)
		return nil
	}
	httpConns := s.metrics.Connections("http")
	newHTTP := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      90 * time.Second, // long-poll waits reach 60 s
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(s.lg.Handler(), slog.LevelWarn),
			ConnState: func(_ net.Conn, st http.ConnState) {
				switch st {
				case http.StateNew:
					httpConns.Inc()
					s.httpOpen.Add(1)
				case http.StateClosed, http.StateHijacked:
					httpConns.Dec()
					s.httpOpen.Add(-1)
				}
			},
		}
	}
	if err := bind(HTTP, s.cfg.HTTPAddr); err != nil {
		return err
	}
	if err := bind(Admin, s.cfg.AdminAddr); err != nil {
		return err
	}
	if _, ok := s.lns[HTTP]; ok {
		s.https[HTTP] = newHTTP(s.MainHandler())
	}
	if _, ok := s.lns[Admin]; ok {
		s.https[Admin] = newHTTP(s.AdminHandler())
	}
	if s.cfg.BeanstalkListener != nil {
		s.lns[Beanstalk] = s.wrapTLS(Beanstalk, s.cfg.BeanstalkListener)
	} else if err := bind(Beanstalk, s.cfg.BeanstalkAddr); err != nil {
		return err
	}
	if ln, ok := s.lns[Beanstalk]; ok {
		s.bsConns = stats.Count(ln)
		s.lns[Beanstalk] = s.bsConns
	}
	if ln, ok := s.lns[Beanstalk]; ok && s.cl != nil {
		s.lns[Beanstalk] = s.cl.wrapBeanstalk(s, ln)
	}
	return nil
}

// Addr is the bound address of a listener (HTTP, Admin or Beanstalk),
// with the real port when the Config asked for port 0; "" when disabled.
func (s *Server) Addr(name string) string {
	if ln, ok := s.lns[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// Broker is the server's broker, for tests and embedders that set up
// state directly.
func (s *Server) Broker() *broker.Broker { return s.b }

// Realtime is the WebSocket/SSE front end (its Stats, for tests).
func (s *Server) Realtime() *rtws.Server { return s.rt }

// Lmstfy is the lmstfy front end, for tests that mount it elsewhere.
func (s *Server) Lmstfy() *lmstfyapi.Server { return s.lm }

// SetBeanstalkDraining switches beanstalkd's drain mode (new jobs are
// refused, the rest is served), which its SIGUSR1 turns on.
func (s *Server) SetBeanstalkDraining(on bool) {
	if s.bs != nil {
		s.bs.SetDraining(on)
	}
}

// Run serves every listener until ctx ends (nil), Shutdown is called
// (nil) or a listener fails (its error). It does not stop anything:
// call Shutdown afterwards. Call it once.
func (s *Server) Run(ctx context.Context) error {
	for _, name := range []string{HTTP, Admin} {
		if srv, ok := s.https[name]; ok {
			ln := s.lns[name]
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					s.errc <- fmt.Errorf("%s listener: %w", name, err)
				}
			}()
		}
	}
	if ln, ok := s.lns[Beanstalk]; ok {
		go func() {
			if err := s.bs.Serve(ln); err != nil && !errors.Is(err, beanstalk.ErrServerClosed) {
				s.errc <- fmt.Errorf("beanstalk listener: %w", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-s.stopping:
		return nil
	case err := <-s.errc:
		return err
	}
}

// Shutdown stops the server; later calls answer the first one's result.
// The order matters: beanstalkd connections close first, so the jobs they
// reserved go back to ready while the broker can still log that; then
// WebSocket/SSE connections end; then long-polls end (with empty answers)
// so in-flight HTTP requests finish promptly and the HTTP listeners can
// drain; last the broker stops its loop, syncs the log and writes a
// snapshot. ctx bounds the waits for connections to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		if s.cl != nil {
			// A leader hands over first, while it still serves and
			// forwards (docs/cluster.md).
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			s.cl.handOver(tctx, s)
			cancel()
		}
		close(s.stopping)
		s.ui.Close() // ends the dashboard's streams, which would hold the admin listener open
		if s.bs != nil {
			if err := s.bs.Close(); err != nil {
				s.lg.Warn("beanstalk listener shutdown", "err", err)
			}
		}
		// Serve closes its listener on Close; one never served is closed here.
		if ln, ok := s.lns[Beanstalk]; ok {
			ln.Close()
		}
		if err := s.rt.Shutdown(ctx); err != nil {
			s.lg.Warn("realtime shutdown", "err", err)
		}
		s.b.Drain()
		for _, name := range []string{HTTP, Admin} {
			if srv, ok := s.https[name]; ok {
				if err := srv.Shutdown(ctx); err != nil {
					s.lg.Warn("listener shutdown", "err", err)
				}
				// Shutdown closes only listeners Run got to serve.
				s.lns[name].Close()
			}
		}
		s.shutErr = s.b.Close()
		if s.cl != nil {
			s.cl.close()
		}
	})
	return s.shutErr
}

// IsLoopback reports whether addr (host:port) only listens on loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
