package bench_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	beanstalkapi "github.com/chronoq/chronoq/internal/api/beanstalk"
	httpapi "github.com/chronoq/chronoq/internal/api/http"
	rtws "github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
)

// counting is the broker, counting successful puts and completions
// (acks, and beanstalkd deletes of reserved jobs) whatever the protocol.
type counting struct {
	*broker.Broker
	puts, done atomic.Int64
}

func (c *counting) Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	r, err := c.Broker.Put(ctx, ns, q, req)
	if err == nil {
		c.puts.Add(1)
	}
	return r, err
}

func (c *counting) Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error) {
	r, err := c.Broker.Ack(ctx, ns, q, id, req)
	if err == nil {
		c.done.Add(1)
	}
	return r, err
}

func (c *counting) Cancel(ctx context.Context, ns, q, id, receipt string) error {
	err := c.Broker.Cancel(ctx, ns, q, id, receipt)
	if err == nil {
		c.done.Add(1)
	}
	return err
}

// server is an in-process chronoq: the HTTP API and WebSocket on one
// listener, the beanstalkd protocol on another.
type server struct {
	url, beanstalk string
	b              *counting
	pubs           atomic.Int64
}

type pubObserver struct {
	broker.Observer
	s *server
}

func (o pubObserver) Commit(int, int, time.Duration)          {}
func (o pubObserver) Snapshot(time.Duration)                  {}
func (o pubObserver) FirstTake(string, string, time.Duration) {}
func (o pubObserver) Lateness(time.Duration)                  {}
func (o pubObserver) Publication()                            { o.s.pubs.Add(1) }

func newServer(t *testing.T) *server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &server{}
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet, Observer: pubObserver{s: s}})
	if err != nil {
		t.Fatal(err)
	}
	s.b = &counting{Broker: b}
	api := httpapi.New(s.b, httpapi.Options{Logger: quiet})
	rt, err := rtws.New(s.b, b.Channels(), rtws.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api.Main())
	mux.Handle("GET /v1/ws", rt.Handler())
	hs := httptest.NewServer(mux)
	s.url = hs.URL
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bs := beanstalkapi.New(s.b, beanstalkapi.Options{Logger: quiet})
	go bs.Serve(ln)
	s.beanstalk = ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
		bs.Close()
		hs.Close()
		b.Close()
	})
	return s
}

// TestSmokeChronoq runs every scenario of every chronoq target for a short
// while and checks that what the bench counted is what the server did.
func TestSmokeChronoq(t *testing.T) {
	cases := []struct {
		target, scenario string
		dur              time.Duration
	}{
		{"chronoq-http", "put", 700 * time.Millisecond},
		{"chronoq-http", "lifecycle", 700 * time.Millisecond},
		{"chronoq-http", "delayed", 500 * time.Millisecond},
		{"chronoq-ws", "put", 700 * time.Millisecond},
		{"chronoq-ws", "lifecycle", 700 * time.Millisecond},
		{"chronoq-ws", "delayed", 500 * time.Millisecond},
		{"chronoq-ws", "fanout", 700 * time.Millisecond},
		{"chronoq-beanstalk", "put", 700 * time.Millisecond},
		{"chronoq-beanstalk", "lifecycle", 700 * time.Millisecond},
		{"chronoq-beanstalk", "delayed", 1200 * time.Millisecond}, // whole-second delays
	}
	for _, c := range cases {
		t.Run(c.target+"/"+c.scenario, func(t *testing.T) {
			s := newServer(t)
			addr := s.url
			if c.target == "chronoq-beanstalk" {
				addr = s.beanstalk
			}
			cfg := bench.Config{Target: c.target, Addr: addr, Scenario: c.scenario, Conns: 4,
				Duration: c.dur, Payload: 64, DelayMin: 20 * time.Millisecond, DelayMax: 200 * time.Millisecond,
				Progress: io.Discard, ProgressEvery: 50 * time.Millisecond}
			if c.target == "chronoq-beanstalk" {
				cfg.DelayMin, cfg.DelayMax = time.Second, time.Second
			}
			res, rec, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Target != c.target || res.Scenario != c.scenario || res.Conns != 4 || res.Payload != 64 {
				t.Fatalf("result describes another run: %+v", res)
			}
			if res.Jobs == 0 || res.Errors != 0 {
				t.Fatalf("jobs %d, errors %d", res.Jobs, res.Errors)
			}
			puts, done := s.b.puts.Load(), s.b.done.Load()
			switch c.scenario {
			case "put":
				if puts != res.Jobs || done != 0 {
					t.Fatalf("bench counted %d puts, server stored %d (and completed %d)", res.Jobs, puts, done)
				}
			case "lifecycle", "delayed":
				if puts != res.Jobs || done != res.Jobs {
					t.Fatalf("bench counted %d jobs, server stored %d and completed %d", res.Jobs, puts, done)
				}
			case "fanout":
				if pubs := s.pubs.Load(); pubs == 0 || res.Jobs != pubs*4 {
					t.Fatalf("bench counted %d deliveries for %d publications to 4 subscribers", res.Jobs, pubs)
				}
			}
			if rec.Count() != int(res.Jobs) {
				t.Fatalf("%d samples for %d jobs", rec.Count(), res.Jobs)
			}
			if !(res.P50MS <= res.P90MS && res.P90MS <= res.P99MS && res.P99MS <= res.MaxMS) {
				t.Fatalf("percentiles out of order: %+v", res)
			}
			if c.scenario != "delayed" && res.P50MS <= 0 {
				t.Fatalf("latency p50 %v", res.P50MS)
			}
			if res.DurationS < c.dur.Seconds() || res.JobsPerSec <= 0 {
				t.Fatalf("duration %v, rate %v", res.DurationS, res.JobsPerSec)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	s := newServer(t)
	for _, cfg := range []bench.Config{
		{Target: "chronoq-http", Addr: s.url, Scenario: "fanout", Conns: 2, Duration: time.Second},
		{Target: "chronoq-beanstalk", Addr: s.beanstalk, Scenario: "fanout", Conns: 2, Duration: time.Second},
	} {
		_, _, err := bench.Run(context.Background(), cfg)
		if !errors.Is(err, bench.ErrUnsupported) {
			t.Errorf("%s %s: %v, want ErrUnsupported", cfg.Target, cfg.Scenario, err)
		}
	}
	if _, _, err := bench.Run(context.Background(), bench.Config{Target: "kafka", Scenario: "put", Conns: 1, Duration: time.Second}); err == nil || !strings.Contains(err.Error(), "unknown target") {
		t.Errorf("unknown target: %v", err)
	}
}

func TestFailingServerFails(t *testing.T) {
	// healthy enough to connect to, but every put fails
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	res, _, err := bench.Run(context.Background(), bench.Config{Target: "chronoq-http", Addr: hs.URL, Scenario: "put",
		Conns: 2, Duration: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no iteration completed") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("every put failing should fail the run with the first error, got %v", err)
	}
	if res.Errors == 0 || res.Jobs != 0 {
		t.Fatalf("result %+v", res)
	}
}

// TestPlot draws the report from a small results file and its CDFs.
func TestPlot(t *testing.T) {
	s := newServer(t)
	dir := t.TempDir()
	results := filepath.Join(dir, "r.json")
	var objs []string
	for _, sc := range []string{"put", "delayed"} {
		for _, label := range []string{"chronoq-http", "other"} {
			for _, n := range []int{1, 2} {
				res, rec, err := bench.Run(context.Background(), bench.Config{Target: "chronoq-http", Label: label, Addr: s.url,
					Scenario: sc, Conns: n, Duration: 100 * time.Millisecond, Payload: 10,
					DelayMin: 10 * time.Millisecond, DelayMax: 30 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := bench.WriteJSON(&b, res); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, strings.TrimSpace(b.String()))
				if err := bench.AppendCDF(bench.CDFPath(results), res, rec); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := os.WriteFile(results, []byte("["+strings.Join(objs, ",\n")+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := bench.Plot(results, filepath.Join(dir, "img"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"throughput-put.png", "latency-cdf-put.png", "lateness.png"}
	if len(files) != len(want) {
		t.Fatalf("wrote %v", files)
	}
	for i, f := range files {
		if filepath.Base(f) != want[i] {
			t.Fatalf("file %d is %s, want %s", i, f, want[i])
		}
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Fatalf("%s: not a PNG (%d bytes, %v)", f, len(b), err)
		}
	}
	rs, err := bench.LoadResults(results)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	bench.WriteMarkdown(&md, rs, "chronoq-http")
	rows := strings.Count(md.String(), "\n") - 2
	if rows != 8 || !strings.Contains(md.String(), "| put | 2 | other | 1 |") || !strings.Contains(md.String(), "×") {
		t.Fatalf("markdown table with %d rows:\n%s", rows, md.String())
	}
}

// TestPushConsumersFinishCleanly: with push consumption (chronoq-ws), a
// worker that finished must not keep receiving jobs another worker waits
// for; that used to end a lifecycle run with take errors after takeWait
// (5 s) and a stretched duration.
func TestPushConsumersFinishCleanly(t *testing.T) {
	s := newServer(t)
	for i := 0; i < 5; i++ {
		res, _, err := bench.Run(context.Background(), bench.Config{Target: "chronoq-ws", Addr: s.url,
			Scenario: "lifecycle", Conns: 32, Duration: 200 * time.Millisecond, Payload: 16})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.DurationS > 2 {
			t.Fatalf("run %d: %d errors, %.1fs for a 0.2s run", i, res.Errors, res.DurationS)
		}
	}
}
