package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProtectedModeRefusesPublicListenerWithoutAuth(t *testing.T) {
	for _, args := range [][]string{
		{"--http", "0.0.0.0:0", "--admin", ""},
		{"--http", "127.0.0.1:0", "--admin", "0.0.0.0:0"},
	} {
		err := serve(append([]string{"--data", t.TempDir(), "--beanstalk", ""}, args...))
		if err == nil || !strings.Contains(err.Error(), "refusing to listen") || !strings.Contains(err.Error(), "--admin-token") {
			t.Fatalf("%v: want a refusal that says how to configure tokens, got %v", args, err)
		}
	}
}

func TestSettingsPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "chronoq.conf")
	os.WriteFile(cfg, []byte("# comment\nsync = interval\nmax-payload = 2048\nhttp = \"127.0.0.1:1\"\n"), 0o644)
	t.Setenv("CHRONOQ_MAX_PAYLOAD", "4096")
	var c serveConfig
	fs, path := serveFlags(&c)
	if err := fs.Parse([]string{"--config", cfg, "--http", "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnvAndConfig(fs, *path); err != nil {
		t.Fatal(err)
	}
	// flag beats env beats file beats default
	if c.httpAddr != "127.0.0.1:2" || c.maxPayload != 4096 || c.sync != "interval" || c.adminAddr != "127.0.0.1:7778" {
		t.Fatalf("got http=%s max-payload=%d sync=%s admin=%s", c.httpAddr, c.maxPayload, c.sync, c.adminAddr)
	}
	os.WriteFile(cfg, []byte("no-such-setting = 1\n"), 0o644)
	fs2, _ := serveFlags(&serveConfig{})
	fs2.Parse(nil)
	if err := applyEnvAndConfig(fs2, cfg); err == nil || !strings.Contains(err.Error(), "no-such-setting") {
		t.Fatalf("unknown config key: %v", err)
	}
}

// --join belongs to a cluster member: alone it is refused, and it reaches
// the server's cluster configuration.
func TestServeJoinFlag(t *testing.T) {
	err := serve([]string{"--data", t.TempDir(), "--beanstalk", "", "--join"})
	if err == nil || !strings.Contains(err.Error(), "--join and --snapshot-entries need") {
		t.Fatalf("--join without --node-id/--peers: %v", err)
	}
	var c serveConfig
	fs, _ := serveFlags(&c)
	if err := fs.Parse([]string{"--node-id", "4", "--peers", "1=127.0.0.1:1,4=127.0.0.1:4", "--join"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.config(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster == nil || !cfg.Cluster.Join || cfg.Cluster.NodeID != 4 {
		t.Fatalf("cluster config %+v", cfg.Cluster)
	}
}

// --reclaim-rate: the default paces, 0 removes at once (the server's -1),
// a negative rate is refused by name.
func TestReclaimRateFlag(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		args []string
		want int64
		err  string
	}{
		{nil, 32 << 20, ""},
		{[]string{"--reclaim-rate", "0"}, -1, ""},
		{[]string{"--reclaim-rate", "1048576"}, 1 << 20, ""},
		{[]string{"--reclaim-rate", "-5"}, 0, "--reclaim-rate -5"},
	} {
		var sc serveConfig
		fs, _ := serveFlags(&sc)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := sc.config(lg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%v: error %v, want one naming %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || cfg.ReclaimRate != c.want {
			t.Fatalf("%v: ReclaimRate %d (%v), want %d", c.args, cfg.ReclaimRate, err, c.want)
		}
	}
}
