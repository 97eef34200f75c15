// Package servertest starts a whole chronoq server (internal/server) inside
// a test, on loopback ports the kernel picks and a temporary data
// directory, and stops it when the test ends. Tests that need the real
// wiring (every route on its listener, the shutdown order) use it instead
// of assembling front ends by hand.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/wal"
)

// Quiet is a logger that drops everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Config is the default configuration with every listener on
// 127.0.0.1:0, a fresh data directory, no fsync (tests that count on
// durability across a crash use the real binary) and a quiet logger.
func Config(t testing.TB) server.Config {
	cfg := server.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Sync = wal.SyncNever
	cfg.Logger = Quiet
	return cfg
}

// Start builds the server of cfg and runs it until the test ends; the
// cleanup shuts it down within stop and fails the test if the shutdown or
// the run reported an error.
func Start(t testing.TB, cfg server.Config, stop time.Duration) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stop)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("server run: %v", err)
		}
	})
	return s
}

// URL is the http:// base URL of one of s's listeners (server.HTTP or
// server.Admin).
func URL(s *server.Server, listener string) string { return "http://" + s.Addr(listener) }
