package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
	httpapi "github.com/chronoq/chronoq/internal/api/http"
	lmstfyapi "github.com/chronoq/chronoq/internal/api/lmstfy"
	rtws "github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/logging"
	"github.com/chronoq/chronoq/internal/metrics"
	"github.com/chronoq/chronoq/internal/wal"
)

type serveConfig struct {
	data            string
	httpAddr        string
	adminAddr       string
	beanstalkAddr   string
	sync            string
	syncInterval    time.Duration
	adminToken      string
	maxPayload      int64
	maxConnections  int
	forceRecovery   bool
	segmentSize     int64
	logFormat       string
	metricsQueues   int
	logAsync        bool
	beanstalkPublic bool
	jwtSecret       string
	jwtKeys         string
	jwtIssuer       string
	jwtAudience     string
	connectRate     float64
}

func serveFlags(c *serveConfig) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.data, "data", "./chronoq-data", "data directory (log, snapshots)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:7777", "HTTP API address (empty: disabled)")
	fs.StringVar(&c.adminAddr, "admin", "127.0.0.1:7778", "admin address: namespaces, tokens, health, pprof (empty: disabled)")
	fs.StringVar(&c.beanstalkAddr, "beanstalk", "127.0.0.1:11300", "beanstalkd protocol address, tubes = queues of namespace default (empty: disabled)")
	fs.StringVar(&c.sync, "sync", "always", "when to fdatasync the log: always (before every OK), interval, never")
	fs.DurationVar(&c.syncInterval, "sync-interval", 10*time.Millisecond, "fdatasync period under --sync interval")
	fs.StringVar(&c.adminToken, "admin-token", "", "token for the admin API (and every namespace); required to listen beyond loopback")
	fs.Int64Var(&c.maxPayload, "max-payload", 1<<20, "largest payload a put may carry, in bytes (hard max 64 MiB)")
	fs.IntVar(&c.maxConnections, "max-connections", 10000, "most simultaneous connections per listener")
	fs.BoolVar(&c.forceRecovery, "force-recovery", false, "start despite log corruption before its tail, skipping (and counting) damaged records")
	fs.Int64Var(&c.segmentSize, "segment-size", 64<<20, "log segment size in bytes")
	fs.StringVar(&c.logFormat, "log-format", "text", "log output: text or json")
	fs.BoolVar(&c.beanstalkPublic, "beanstalk-public", false, "allow the (unauthenticated) beanstalkd listener on a non-loopback address")
	fs.BoolVar(&c.logAsync, "log-async", true, "write logs from a bounded queue so a slow sink never blocks requests (drops are counted)")
	fs.IntVar(&c.metricsQueues, "metrics-max-queues", 1000, "distinct queues labelled in metrics; the rest are summed under \"_other\"")
	fs.StringVar(&c.jwtSecret, "jwt-secret", "", "HS256 secret for browser JWTs on /v1/ws and /v1/sse (empty: HS256 off)")
	fs.StringVar(&c.jwtKeys, "jwt-public-keys", "", "PEM file of RSA or P-256 public keys (or certificates) for RS256/ES256 JWTs")
	fs.StringVar(&c.jwtIssuer, "jwt-issuer", "", "required iss claim of JWTs (empty: not checked)")
	fs.StringVar(&c.jwtAudience, "jwt-audience", "", "required aud claim of JWTs (empty: not checked)")
	fs.Float64Var(&c.connectRate, "connect-rate", 1000, "new WebSocket/SSE connections accepted per second (burst twice that); the rest get 503 with Retry-After")
	cfg := fs.String("config", "", "file of \"name = value\" settings (flags and CHRONOQ_* variables take precedence)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: chronoq serve [flags]\n\nRuns the server. Example:\n  chronoq serve --data /var/lib/chronoq --sync always\n\nFlags (each also CHRONOQ_<NAME>):\n")
		fs.PrintDefaults()
	}
	return fs, cfg
}

func serve(args []string) error {
	var c serveConfig
	fs, cfgPath := serveFlags(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if err := applyEnvAndConfig(fs, *cfgPath); err != nil {
		return err
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	switch c.logFormat {
	case "text":
	case "json":
		handler = slog.NewJSONHandler(os.Stderr, nil)
	default:
		return fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
	}
	if c.logAsync {
		// a slow log sink must never stall request handling; lines beyond
		// the buffer are dropped and counted in the log itself
		async := logging.NewAsync(handler, 8192)
		defer async.Close()
		handler = async
	}
	lg := slog.New(handler)

	walOpts := wal.Options{SegmentSize: c.segmentSize, SyncInterval: c.syncInterval, ForceRecovery: c.forceRecovery, Logger: lg}
	switch c.sync {
	case "always":
		walOpts.Sync = wal.SyncAlways
	case "interval":
		walOpts.Sync = wal.SyncInterval
	case "never":
		walOpts.Sync = wal.SyncNever
	default:
		return fmt.Errorf("--sync: want always, interval or never, got %q", c.sync)
	}
	if c.maxPayload <= 0 || c.maxPayload > 64<<20 {
		return fmt.Errorf("--max-payload: must be between 1 and %d bytes, got %d", 64<<20, c.maxPayload)
	}
	if c.httpAddr == "" && c.adminAddr == "" {
		return errors.New("no listener: give --http and/or --admin an address")
	}

	var b *broker.Broker
	m := metrics.New(c.metricsQueues, func(ctx context.Context) ([]engine.QueueInfo, error) { return b.AllQueues(ctx) })
	b, err := broker.Open(broker.Options{Dir: c.data, WAL: walOpts, Logger: lg, Observer: m})
	if err != nil {
		return err
	}
	// Protected mode (DESIGN §7): beyond loopback only with authentication.
	mainPublic := c.httpAddr != "" && !isLoopback(c.httpAddr)
	adminPublic := c.adminAddr != "" && !isLoopback(c.adminAddr)
	if c.beanstalkAddr != "" && !isLoopback(c.beanstalkAddr) && !c.beanstalkPublic {
		b.Close()
		return fmt.Errorf("refusing to serve the beanstalkd protocol on %s: it has no authentication; "+
			"listen on 127.0.0.1 or pass --beanstalk-public to accept that anyone who can reach the port can use the default namespace", c.beanstalkAddr)
	}
	if adminPublic && c.adminToken == "" || mainPublic && c.adminToken == "" && !b.HasTokens() {
		b.Close()
		which := c.httpAddr
		if adminPublic {
			which = c.adminAddr
		}
		return fmt.Errorf("refusing to listen on %s without authentication: start with --admin-token TOKEN "+
			"(or CHRONOQ_ADMIN_TOKEN) and create namespace tokens with POST /admin/namespaces/{ns}/tokens, "+
			"or listen on 127.0.0.1 only", which)
	}
	api := httpapi.New(b, httpapi.Options{
		AdminToken:  c.adminToken,
		MaxPayload:  c.maxPayload,
		MaxWait:     60 * time.Second,
		Logger:      lg,
		RequireAuth: c.adminToken != "" || mainPublic || adminPublic,
		Metrics:     m.Handler(),
		Observe:     func(op string, code int, d time.Duration) { m.Request("http", op, code, d) },
	})
	// lmstfy-compatible API: /api/ on the main listener, its token admin
	// routes on the admin listener.
	lm := lmstfyapi.New(b, lmstfyapi.Options{
		AdminToken:  c.adminToken,
		RequireAuth: c.adminToken != "" || mainPublic || adminPublic,
		MaxPayload:  c.maxPayload,
		MaxWait:     600 * time.Second,
		Logger:      lg,
		Observe:     func(op string, code int, d time.Duration) { m.Request("lmstfy", op, code, d) },
	})
	// real time: WebSocket and SSE on the main listener, forced disconnects
	// on the admin listener
	jwtOpts := rtws.JWTOptions{HMACSecret: []byte(c.jwtSecret), Issuer: c.jwtIssuer, Audience: c.jwtAudience}
	if c.jwtKeys != "" {
		pem, err := os.ReadFile(c.jwtKeys)
		if err == nil {
			jwtOpts.PublicKeys, err = rtws.ParsePublicKeysPEM(pem)
		}
		if err != nil {
			b.Close()
			return fmt.Errorf("--jwt-public-keys %s: %w", c.jwtKeys, err)
		}
	}
	if c.connectRate <= 0 {
		b.Close()
		return fmt.Errorf("--connect-rate: must be above 0, got %g", c.connectRate)
	}
	rt, err := rtws.New(b, b.Channels(), rtws.Options{
		JWT:            jwtOpts,
		ConnectRate:    c.connectRate,
		AdminToken:     c.adminToken,
		RequireAuth:    c.adminToken != "" || mainPublic || adminPublic,
		MaxPayload:     c.maxPayload,
		MaxConnections: c.maxConnections * 9 / 10, // leave room for plain HTTP and admin
		Logger:         lg,
	})
	if err != nil {
		b.Close()
		return err
	}
	b.OnTokensChanged(rt.TokensChanged)
	m.SetRealtime(func() metrics.Realtime {
		hs, rs := b.Channels().Stats(), rt.Stats()
		return metrics.Realtime{Channels: hs.Channels, Subscriptions: hs.Subscriptions, HistoryPublications: hs.Publications,
			Connections: rs.Connections, SlowDisconnects: rs.SlowDisconnects, Refused: rs.Refused, PanicsWS: rs.PanicsWS, PanicsSSE: rs.PanicsSSE}
	})
	mainMux := http.NewServeMux()
	mainMux.Handle("/", api.Main())
	mainMux.Handle("/api/", lm.Main())
	mainMux.Handle("GET /v1/ws", rt.Handler())
	mainMux.Handle("GET /v1/sse", rt.Handler())
	adminMux := http.NewServeMux()
	adminMux.Handle("/", api.Admin())
	adminMux.Handle("POST /admin/disconnect", rt.AdminHandler())
	for _, p := range []string{"/token/", "/info", "/pools", "/version"} {
		adminMux.Handle(p, lm.Admin())
	}

	var servers []*http.Server
	errc := make(chan error, 2)
	conns := m.Connections("http")
	start := func(name, addr string, h http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s listener: %w", name, err)
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      90 * time.Second, // long-poll waits reach 60 s
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(handler, slog.LevelWarn),
			ConnState: func(_ net.Conn, st http.ConnState) {
				switch st {
				case http.StateNew:
					conns.Inc()
				case http.StateClosed, http.StateHijacked:
					conns.Dec()
				}
			},
		}
		servers = append(servers, srv)
		lg.Info("listening", "listener", name, "addr", ln.Addr().String())
		go func() {
			if err := srv.Serve(netutil.LimitListener(ln, c.maxConnections)); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
		return nil
	}
	if err := start("http", c.httpAddr, mainMux); err != nil {
		b.Close()
		return err
	}
	if err := start("admin", c.adminAddr, adminMux); err != nil {
		b.Close()
		return err
	}
	var bsrv *beanstalk.Server
	if c.beanstalkAddr != "" {
		ln, err := net.Listen("tcp", c.beanstalkAddr)
		if err != nil {
			b.Close()
			return fmt.Errorf("beanstalk listener: %w", err)
		}
		bsrv = beanstalk.New(b, beanstalk.Options{Logger: lg})
		lg.Info("listening", "listener", "beanstalk", "addr", ln.Addr().String())
		go func() {
			if err := bsrv.Serve(netutil.LimitListener(ln, c.maxConnections)); err != nil && !errors.Is(err, beanstalk.ErrServerClosed) {
				errc <- fmt.Errorf("beanstalk listener: %w", err)
			}
		}()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	var runErr error
	select {
	case s := <-sig:
		lg.Info("shutting down", "signal", s.String())
	case runErr = <-errc:
		lg.Error("listener failed, shutting down", "err", runErr)
	}
	// Long-polls end first (with empty answers) so in-flight requests can
	// finish promptly; then the listeners close; then the log is synced and
	// a snapshot written.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Protocol servers that hold reservations release them through the
	// broker, so they stop before it drains.
	if bsrv != nil {
		if err := bsrv.Close(); err != nil {
			lg.Warn("beanstalk listener shutdown", "err", err)
		}
	}
	if err := rt.Shutdown(ctx); err != nil {
		lg.Warn("realtime shutdown", "err", err)
	}
	b.Drain()
	for _, srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			lg.Warn("listener shutdown", "err", err)
		}
	}
	if err := b.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	lg.Info("stopped")
	return runErr
}

func isLoopback(addr string) bool {
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
