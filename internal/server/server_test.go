package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testConfig(t *testing.T) server.Config { return servertest.Config(t) }

// start runs a server until the test ends.
func start(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	return servertest.Start(t, cfg, 10*time.Second)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRoutes: every front end answers on the listener the binary mounts it
// on, and not on the other one.
func TestRoutes(t *testing.T) {
	s := start(t, testConfig(t))
	main, admin := "http://"+s.Addr(server.HTTP), "http://"+s.Addr(server.Admin)
	for _, c := range []struct {
		url  string
		code int
		body string
	}{
		{main + "/v1/ns/default/queues/q", 404, ""},
		{main + "/healthz", 200, ""},
		{main + "/api/ns/q/size", 200, `"size":0`},
		{main + "/v1/ws", 400, ""}, // a plain GET is no WebSocket upgrade
		{main + "/admin/namespaces", 404, ""},
		{admin + "/admin/namespaces", 200, "default"},
		{admin + "/metrics", 200, "chronoq_"},
		{admin + "/version", 200, ""},
		{admin + "/info", 200, ""},
		{admin + "/pools", 200, ""},
		{admin + "/api/ns/q/size", 404, ""},
	} {
		code, body := get(t, c.url)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %q, want %d containing %q", c.url, code, body, c.code, c.body)
		}
	}
	resp, err := http.Post(admin+"/admin/disconnect", "application/json", strings.NewReader(`{"user":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /admin/disconnect: %d", resp.StatusCode)
	}

	c, err := net.Dial("tcp", s.Addr(server.Beanstalk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "put 0 0 10 2\r\nhi\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INSERTED ") {
		t.Fatalf("beanstalk put: %q %v", line, err)
	}
}

// TestRestartKeepsJobs: Shutdown syncs and closes the log, so a new server
// on the same directory finds what the first one acknowledged.
func TestRestartKeepsJobs(t *testing.T) {
	cfg := testConfig(t)
	cfg.BeanstalkAddr = ""
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	resp, err := http.Post("http://"+s.Addr(server.HTTP)+"/v1/ns/default/queues/q/jobs", "application/json", strings.NewReader(`{"id":"j1","payload":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("put: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after its context ended: %v", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if _, err := http.Get("http://" + s.Addr(server.HTTP) + "/healthz"); err == nil {
		t.Fatal("the listener still answers after Shutdown")
	}

	s2 := start(t, cfg)
	if code, body := get(t, "http://"+s2.Addr(server.HTTP)+"/v1/ns/default/queues/q/jobs/j1"); code != 200 || !strings.Contains(body, `"j1"`) {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

// TestShutdownWithoutRun releases the data directory and the ports.
func TestShutdownWithoutRun(t *testing.T) {
	cfg := testConfig(t)
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr(server.Beanstalk)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still bound after Shutdown: %v", err)
	}
	ln.Close()
	s2, err := server.New(cfg) // the data directory's lock was released
	if err != nil {
		t.Fatal(err)
	}
	s2.Shutdown(context.Background())
}

func TestConfigErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		change func(*server.Config)
		want   string
	}{
		{func(c *server.Config) { c.MaxPayload = 0 }, "--max-payload: must be between 1 and 67108864 bytes, got 0"},
		{func(c *server.Config) { c.MaxPayload = 64<<20 + 1 }, "--max-payload"},
		{func(c *server.Config) { c.ConnectRate = 0 }, "--connect-rate: must be above 0"},
		{func(c *server.Config) { c.MaxConnections = -1 }, "--max-connections"},
		{func(c *server.Config) { c.PubWriteInterval = -time.Millisecond }, "--ws-pub-interval: must be from 0 to 1s"},
		{func(c *server.Config) { c.PubWriteInterval = 2 * time.Second }, "--ws-pub-interval: must be from 0 to 1s"},
		{func(c *server.Config) { c.HTTPAddr, c.AdminAddr, c.BeanstalkAddr = "", "", "" }, "no listener"},
		{func(c *server.Config) { c.BeanstalkAddr = "0.0.0.0:0" }, "--beanstalk-public"},
		{func(c *server.Config) { c.HTTPAddr = "0.0.0.0:0" }, "refusing to listen on 0.0.0.0:0 without authentication"},
		{func(c *server.Config) { c.AdminAddr = "0.0.0.0:0" }, "--admin-token"},
		{func(c *server.Config) { c.AdminAddr = busy.Addr().String() }, "admin listener"},
	} {
		cfg := testConfig(t)
		c.change(&cfg)
		s, err := server.New(cfg)
		if err == nil {
			s.Shutdown(context.Background())
			t.Errorf("want an error containing %q, got none", c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want it to contain %q", err, c.want)
		}
	}
	// A refused configuration left nothing open: the directory opens again.
	cfg := testConfig(t)
	dir := cfg.DataDir
	cfg.HTTPAddr = "0.0.0.0:0"
	if _, err := server.New(cfg); err == nil {
		t.Fatal("public listener without tokens accepted")
	}
	cfg = testConfig(t)
	cfg.DataDir = dir
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("data directory still locked after a refused New: %v", err)
	}
	s.Shutdown(context.Background())
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7777": true, "localhost:1": true, "[::1]:80": true, "127.8.0.1:1": true,
		"0.0.0.0:7777": false, ":7777": false, "10.0.0.1:1": false, "example.com:80": false,
	} {
		if got := server.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// --max-jobs: the put beyond the node's budget is refused with a clear
// error over HTTP (429 queue_full) and over the beanstalkd protocol
// (OUT_OF_MEMORY, beanstalkd's answer when it has no room), and nothing is
// stored.
func TestMaxJobsRefusesPutsBeyondTheBudget(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxJobs = 2
	s := servertest.Start(t, cfg, 10*time.Second)
	url := "http://" + s.Addr(server.HTTP) + "/v1/ns/default/queues/q/jobs"
	for i, want := range []int{201, 201, 429} {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"payload":1}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("put %d: %d %s, want %d", i, resp.StatusCode, body, want)
		}
		if want == 429 && !strings.Contains(string(body), "maximum of 2 jobs") {
			t.Fatalf("refusal does not name the limit: %s", body)
		}
	}
	c, err := net.DialTimeout("tcp", s.Addr(server.Beanstalk), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("use q\r\nput 0 0 60 1\r\nx\r\nstats-tube q\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for _, want := range []string{"USING q", "OUT_OF_MEMORY", "OK "} {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("got %q (%v), want %s", line, err, want)
		}
	}
	body := make([]byte, 0, 1024)
	for !strings.Contains(string(body), "current-jobs-ready") {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, line...)
	}
	if !strings.Contains(string(body), "current-jobs-ready: 2") {
		t.Fatalf("stats-tube after the refused puts: %s", body)
	}
}
