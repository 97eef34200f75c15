package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	rtws "github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/logging"
	"github.com/chronoq/chronoq/internal/server"
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
	maxJobs         uint64
	farHorizon      time.Duration
	reclaimRate     int64
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
	pubInterval     time.Duration
	tls             server.TLSConfig
	nodeID          uint64
	peers           string
	peerAddr        string
	clusterSecret   string
	join            bool
	snapshotEntries uint64
}

func serveFlags(c *serveConfig) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	d := server.Default()
	fs.StringVar(&c.data, "data", d.DataDir, "data directory (log, snapshots)")
	fs.StringVar(&c.httpAddr, "http", d.HTTPAddr, "HTTP API address (empty: disabled)")
	fs.StringVar(&c.adminAddr, "admin", d.AdminAddr, "admin address: namespaces, tokens, health, pprof (empty: disabled)")
	fs.StringVar(&c.beanstalkAddr, "beanstalk", d.BeanstalkAddr, "beanstalkd protocol address, tubes = queues of namespace default (empty: disabled)")
	fs.StringVar(&c.sync, "sync", d.Sync.String(), "when to fdatasync the log: always (before every OK), interval, never")
	fs.DurationVar(&c.syncInterval, "sync-interval", d.SyncInterval, "fdatasync period under --sync interval")
	fs.StringVar(&c.adminToken, "admin-token", "", "token for the admin API (and every namespace); required to listen beyond loopback")
	fs.Int64Var(&c.maxPayload, "max-payload", d.MaxPayload, "largest payload a put may carry, in bytes (hard max 64 MiB)")
	fs.IntVar(&c.maxConnections, "max-connections", d.MaxConnections, "most simultaneous connections per listener")
	fs.BoolVar(&c.forceRecovery, "force-recovery", false, "start despite log corruption before its tail, skipping (and counting) damaged records")
	fs.Int64Var(&c.reclaimRate, "reclaim-rate", 32<<20, "bytes per second of old log segments and snapshots removed: spreads out the stalls that freeing disk space causes on a filesystem mounted with online discard; the pace rises with the log's write rate and is off while under 10% of the disk is free (0: remove at once)")
	fs.DurationVar(&c.farHorizon, "far-horizon", 0, "keep delayed jobs due further ahead than this in bucket files on disk instead of memory (at least 1s; 0: off)")
	fs.Uint64Var(&c.maxJobs, "max-jobs", 0, "most jobs this node holds in any state; a put beyond is refused (queue_full) instead of exhausting memory; 0: no limit")
	fs.Int64Var(&c.segmentSize, "segment-size", d.SegmentSize, "log segment size in bytes")
	fs.StringVar(&c.logFormat, "log-format", "text", "log output: text or json")
	fs.BoolVar(&c.beanstalkPublic, "beanstalk-public", false, "allow the (unauthenticated) beanstalkd listener on a non-loopback address")
	fs.BoolVar(&c.logAsync, "log-async", true, "write logs from a bounded queue so a slow sink never blocks requests (drops are counted)")
	fs.IntVar(&c.metricsQueues, "metrics-max-queues", d.MetricsMaxQueues, "distinct queues labelled in metrics; the rest are summed under \"_other\"")
	fs.StringVar(&c.jwtSecret, "jwt-secret", "", "HS256 secret for browser JWTs on /v1/ws and /v1/sse (empty: HS256 off)")
	fs.StringVar(&c.jwtKeys, "jwt-public-keys", "", "PEM file of RSA or P-256 public keys (or certificates) for RS256/ES256 JWTs")
	fs.StringVar(&c.jwtIssuer, "jwt-issuer", "", "required iss claim of JWTs (empty: not checked)")
	fs.StringVar(&c.jwtAudience, "jwt-audience", "", "required aud claim of JWTs (empty: not checked)")
	fs.Float64Var(&c.connectRate, "connect-rate", d.ConnectRate, "new WebSocket/SSE connections accepted per second (burst twice that); the rest get 503 with Retry-After")
	fs.DurationVar(&c.pubInterval, "ws-pub-interval", d.PubWriteInterval, "least time between two socket writes of live publications to one WebSocket connection (at most 1s): on a hot channel what arrives meanwhile goes out in one write, for up to this much more latency; 0 (the default) writes as soon as a flusher is free")
	tlsFlags(fs, &c.tls)
	fs.Uint64Var(&c.nodeID, "node-id", 0, "this node's id in a cluster (with --peers; docs/cluster.md)")
	fs.StringVar(&c.peers, "peers", "", "every cluster member as id=host:port of its peer listener, e.g. 1=127.0.0.1:7790,2=127.0.0.1:7791,3=127.0.0.1:7792 (empty: single node)")
	fs.BoolVar(&c.join, "join", false, "start a new cluster member (empty data directory) that waits for the leader to add it with `chronoq cluster add` instead of bootstrapping; --peers lists the current members and this node")
	fs.StringVar(&c.peerAddr, "peer-addr", "", "address to accept cluster peers on (default: this node's entry in --peers)")
	fs.Uint64Var(&c.snapshotEntries, "snapshot-entries", 0, "cluster members: make a raft snapshot after this many applied entries (0: 10000; docs/cluster.md)")
	fs.StringVar(&c.clusterSecret, "cluster-secret-file", "", "file holding the secret (at least 16 bytes) that cluster members authenticate each other with; required beyond loopback")
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
	cfg, err := c.config(lg)
	if err != nil {
		return err
	}

	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	for _, name := range []string{server.HTTP, server.Admin, server.Beanstalk} {
		if addr := s.Addr(name); addr != "" {
			lg.Info("listening", "listener", name, "addr", addr, "tls", s.TLSEnabled(name))
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s := <-sig
		lg.Info("shutting down", "signal", s.String())
		cancel()
	}()
	reloadOnHUP(ctx, s, lg)
	runErr := s.Run(ctx)
	if runErr != nil {
		lg.Error("listener failed, shutting down", "err", runErr)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := s.Shutdown(sctx); err != nil {
		return errors.Join(runErr, err)
	}
	lg.Info("stopped")
	return runErr
}

// config turns the flags into the server's Config.
func (c *serveConfig) config(lg *slog.Logger) (server.Config, error) {
	cfg := server.Config{
		DataDir: c.data, HTTPAddr: c.httpAddr, AdminAddr: c.adminAddr, BeanstalkAddr: c.beanstalkAddr,
		BeanstalkPublic: c.beanstalkPublic, SyncInterval: c.syncInterval, SegmentSize: c.segmentSize,
		ForceRecovery: c.forceRecovery, AdminToken: c.adminToken, MaxPayload: c.maxPayload, MaxJobs: c.maxJobs, FarHorizon: c.farHorizon,
		MaxConnections: c.maxConnections, MetricsMaxQueues: c.metricsQueues, ConnectRate: c.connectRate, PubWriteInterval: c.pubInterval,
		JWT:    rtws.JWTOptions{HMACSecret: []byte(c.jwtSecret), Issuer: c.jwtIssuer, Audience: c.jwtAudience},
		Logger: lg, TLS: c.tls,
	}
	switch {
	case c.reclaimRate < 0:
		return server.Config{}, fmt.Errorf("--reclaim-rate %d: must be 0 (remove at once) or a number of bytes per second", c.reclaimRate)
	case c.reclaimRate == 0:
		cfg.ReclaimRate = -1
	default:
		cfg.ReclaimRate = c.reclaimRate
	}
	switch c.sync {
	case "always":
		cfg.Sync = wal.SyncAlways
	case "interval":
		cfg.Sync = wal.SyncInterval
	case "never":
		cfg.Sync = wal.SyncNever
	default:
		return cfg, fmt.Errorf("--sync: want always, interval or never, got %q", c.sync)
	}
	if c.httpAddr == "" && c.adminAddr == "" {
		return cfg, errors.New("no listener: give --http and/or --admin an address")
	}
	if c.peers != "" || c.nodeID != 0 {
		if c.peers == "" || c.nodeID == 0 {
			return cfg, errors.New("a cluster member needs both --node-id and --peers")
		}
		peers, err := server.ParsePeers(c.peers)
		if err != nil {
			return cfg, err
		}
		cc := &server.ClusterConfig{NodeID: c.nodeID, Peers: peers, PeerAddr: c.peerAddr, Join: c.join, SnapshotEntries: c.snapshotEntries}
		if c.clusterSecret != "" {
			secret, err := os.ReadFile(c.clusterSecret)
			if err != nil {
				return cfg, fmt.Errorf("--cluster-secret-file: %w", err)
			}
			cc.Secret = []byte(strings.TrimSpace(string(secret)))
		}
		cfg.Cluster = cc
	} else if c.peerAddr != "" || c.clusterSecret != "" || c.join || c.snapshotEntries != 0 {
		return cfg, errors.New("--peer-addr, --cluster-secret-file, --join and --snapshot-entries need --node-id and --peers")
	}
	if c.jwtKeys != "" {
		pem, err := os.ReadFile(c.jwtKeys)
		if err == nil {
			cfg.JWT.PublicKeys, err = rtws.ParsePublicKeysPEM(pem)
		}
		if err != nil {
			return cfg, fmt.Errorf("--jwt-public-keys %s: %w", c.jwtKeys, err)
		}
	}
	return cfg, nil
}
