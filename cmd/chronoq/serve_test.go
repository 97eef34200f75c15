package main

import (
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

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:1": true, "[::1]:80": true, "127.8.0.1:1": true,
		"0.0.0.0:7777": false, ":7777": false, "10.0.0.1:1": false, "example.com:80": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
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
