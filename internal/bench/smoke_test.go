package bench_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/broker"
)

// server is an in-process chronoq with the HTTP API, counting successful
// requests per route so the smoke runs can check the bench's job counts.
type server struct {
	url string
	mu  sync.Mutex
	ok  map[string]int
}

func (s *server) count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.ok {
		if strings.HasSuffix(k, route) {
			return n
		}
	}
	return 0
}

func newServer(t *testing.T) *server {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ok: map[string]int{}}
	api := httpapi.New(b, httpapi.Options{Logger: quiet, Observe: func(op string, code int, _ time.Duration) {
		if code < 300 {
			s.mu.Lock()
			s.ok[op]++
			s.mu.Unlock()
		}
	}})
	hs := httptest.NewServer(api.Main())
	s.url = hs.URL
	t.Cleanup(func() { hs.Close(); b.Close() })
	return s
}

// TestSmokeChronoqHTTP runs every scenario of the chronoq-http target for
// a short while and checks that what the bench counted is what the server
// did: one put per put-job, one ack per lifecycle or delayed job.
func TestSmokeChronoqHTTP(t *testing.T) {
	cases := []struct {
		scenario, route string // route counted once per job
		dur             time.Duration
	}{
		{"put", "/queues/{q}/jobs", 700 * time.Millisecond},
		{"lifecycle", "/jobs/{id}/ack", 700 * time.Millisecond},
		{"delayed", "/jobs/{id}/ack", 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			s := newServer(t)
			cfg := bench.Config{Target: "chronoq-http", Addr: s.url, Scenario: c.scenario, Conns: 4,
				Duration: c.dur, Payload: 64, DelayMin: 20 * time.Millisecond, DelayMax: 200 * time.Millisecond,
				Progress: io.Discard, ProgressEvery: 50 * time.Millisecond}
			res, rec, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Target != "chronoq-http" || res.Scenario != c.scenario || res.Conns != 4 || res.Payload != 64 {
				t.Fatalf("result describes another run: %+v", res)
			}
			if res.Jobs == 0 || res.Errors != 0 {
				t.Fatalf("jobs %d, errors %d", res.Jobs, res.Errors)
			}
			if got := s.count(c.route); int64(got) != res.Jobs {
				t.Fatalf("bench counted %d jobs, server answered %d successful %s", res.Jobs, got, c.route)
			}
			if c.scenario != "put" {
				if puts := s.count("/queues/{q}/jobs"); int64(puts) != res.Jobs {
					t.Fatalf("%d puts for %d completed jobs: some were left behind", puts, res.Jobs)
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
		{Target: "chronoq-ws", Addr: s.url, Scenario: "put", Conns: 2, Duration: time.Second},
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
	want := []string{"throughput-put.png", "latency-cdf-put.png", "throughput-delayed.png", "lateness.png"}
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
