package bench_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
)

// counting is the broker, counting successful puts and completions
// (acks, and beanstalkd deletes of reserved jobs) whatever the protocol.
type counting struct {
	*broker.Broker
	puts, done atomic.Int64
	ackTakes   atomic.Int64 // of done: acks that took the next job
}

func (c *counting) Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	r, err := c.Broker.Put(ctx, ns, q, req)
	if err == nil {
		c.puts.Add(1)
	}
	return r, err
}

func (c *counting) PutQueued(ctx context.Context, ns, q string, req engine.PutRequest) func() (engine.PutResult, error) {
	wait := c.Broker.PutQueued(ctx, ns, q, req)
	return func() (engine.PutResult, error) {
		r, err := wait()
		if err == nil {
			c.puts.Add(1)
		}
		return r, err
	}
}

func (c *counting) Ack(ctx context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error) {
	r, err := c.Broker.Ack(ctx, ns, q, id, req)
	if err == nil {
		c.done.Add(1)
	}
	return r, err
}

func (c *counting) AckAndTake(ctx context.Context, ns, q, id string, req engine.AckRequest, take engine.TakeRequest, wait time.Duration) (engine.AckResult, []engine.Job, error) {
	r, jobs, err := c.Broker.AckAndTake(ctx, ns, q, id, req, take, wait)
	if err == nil {
		c.done.Add(1)
		c.ackTakes.Add(1)
	}
	return r, jobs, err
}

func (c *counting) Cancel(ctx context.Context, ns, q, id, receipt string) error {
	err := c.Broker.Cancel(ctx, ns, q, id, receipt)
	if err == nil {
		c.done.Add(1)
	}
	return err
}

// chronoq is the real server (internal/server, as cmd/chronoq starts it)
// on loopback ports, every protocol front end talking to it through a
// counting wrapper of its broker.
type chronoq struct {
	url, beanstalk, admin string
	b                     *counting
}

func newServer(t *testing.T) *chronoq { return newServerWith(t, nil) }

func newServerWith(t *testing.T, change func(*server.Config)) *chronoq {
	t.Helper()
	cfg := servertest.Config(t)
	cfg.Sync = server.Default().Sync // the smoke run measures the real commit path
	if change != nil {
		change(&cfg)
	}
	c := &chronoq{b: &counting{}}
	cfg.WrapBackend = func(b *broker.Broker) server.Backend {
		c.b.Broker = b
		return c.b
	}
	s := servertest.Start(t, cfg, 10*time.Second)
	c.url, c.admin, c.beanstalk = servertest.URL(s, server.HTTP), servertest.URL(s, server.Admin), s.Addr(server.Beanstalk)
	return c
}

var pubsMetric = regexp.MustCompile(`(?m)^chronoq_channel_publications_total (\d+)$`)

// pubs is the server's count of channel publications, from its metrics.
func (c *chronoq) pubs(t *testing.T) int64 {
	t.Helper()
	resp, err := http.Get(c.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := pubsMetric.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no chronoq_channel_publications_total in /metrics:\n%s", body)
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSmokeChronoq runs every scenario of every chronoq target for a short
// while and checks that what the bench counted is what the server did.
func TestSmokeChronoq(t *testing.T) {
	cases := []struct {
		target, scenario string
		dur              time.Duration
		threeRequests    bool
		pipeline         int
	}{
		{"chronoq-http", "put", 700 * time.Millisecond, false, 0},
		{"chronoq-http", "lifecycle", 700 * time.Millisecond, false, 0},
		{"chronoq-http", "lifecycle", 700 * time.Millisecond, true, 0},
		{"chronoq-http", "delayed", 500 * time.Millisecond, false, 0},
		{"chronoq-ws", "put", 700 * time.Millisecond, false, 0},
		{"chronoq-ws", "lifecycle", 700 * time.Millisecond, false, 0},
		{"chronoq-ws", "delayed", 500 * time.Millisecond, false, 0},
		{"chronoq-ws", "fanout", 700 * time.Millisecond, false, 0},
		{"chronoq-beanstalk", "put", 700 * time.Millisecond, false, 0},
		{"chronoq-beanstalk", "lifecycle", 700 * time.Millisecond, false, 0},
		{"chronoq-beanstalk", "delayed", 1200 * time.Millisecond, false, 0}, // whole-second delays
		{"chronoq-http", "mixed", 700 * time.Millisecond, false, 0},
		{"chronoq-beanstalk", "mixed", 700 * time.Millisecond, false, 0},
		{"chronoq-ws", "put", 700 * time.Millisecond, false, 8},
		{"chronoq-beanstalk", "put", 700 * time.Millisecond, false, 8},
	}
	for _, c := range cases {
		name := c.target + "/" + c.scenario
		if c.threeRequests {
			name += "/three-requests"
		}
		if c.pipeline > 0 {
			name += "/pipeline"
		}
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			addr := s.url
			if c.target == "chronoq-beanstalk" {
				addr = s.beanstalk
			}
			cfg := bench.Config{Target: c.target, Addr: addr, Scenario: c.scenario, Conns: 4,
				Duration: c.dur, Payload: 64, DelayMin: 20 * time.Millisecond, DelayMax: 200 * time.Millisecond,
				Progress: io.Discard, ProgressEvery: 50 * time.Millisecond, ThreeRequests: c.threeRequests,
				Pipeline: c.pipeline}
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
				if want := fmt.Sprintf("pipeline %d", c.pipeline); c.pipeline > 1 && (res.Variant != want || res.Jobs%int64(c.pipeline) != 0) {
					t.Fatalf("variant %q, %d jobs: want %q, whole rounds", res.Variant, res.Jobs, want)
				}
			case "lifecycle", "delayed":
				if puts != res.Jobs || done != res.Jobs {
					t.Fatalf("bench counted %d jobs, server stored %d and completed %d", res.Jobs, puts, done)
				}
				// chronoq-http's lifecycle acks and takes the next job in
				// one request: every ack but each worker's last
				ackTake := c.scenario == "lifecycle" && c.target == "chronoq-http" && !c.threeRequests
				if n := s.b.ackTakes.Load(); ackTake != (n > 0) || ackTake && n < done-4 ||
					ackTake != (res.Variant == "ack+take") {
					t.Fatalf("%d of %d acks took the next job, variant %q", n, done, res.Variant)
				}
			case "mixed":
				// producers and consumers on separate connections: what
				// the consumers acked was put by the producers
				if puts != res.Puts || done != res.Jobs || res.Jobs == 0 || res.Jobs > res.Puts {
					t.Fatalf("bench counted %d puts and %d consumed, server stored %d and completed %d", res.Puts, res.Jobs, puts, done)
				}
				if res.PutP50MS <= 0 || res.PutP99MS < res.PutP50MS || res.PutsPerSec <= 0 {
					t.Fatalf("put latency not measured: %+v", res)
				}
				// producers are paced: at most the backlog (2 x conns)
				// was put and never taken
				if res.Backlog != 8 || res.Puts-res.Jobs > int64(res.Backlog) {
					t.Fatalf("backlog %d: %d puts for %d consumed", res.Backlog, res.Puts, res.Jobs)
				}
			case "fanout":
				if pubs := s.pubs(t); pubs == 0 || res.Jobs != pubs*4 {
					t.Fatalf("bench counted %d deliveries for %d publications to 4 subscribers", res.Jobs, pubs)
				}
			}
			if rec.Count() != int(res.Jobs) {
				t.Fatalf("%d samples for %d jobs", rec.Count(), res.Jobs)
			}
			if !(res.P50MS <= res.P90MS && res.P90MS <= res.P99MS && res.P99MS <= res.MaxMS) {
				t.Fatalf("percentiles out of order: %+v", res)
			}
			if c.scenario == "delayed" {
				// chronoq's HTTP and WebSocket answers carry activate_at;
				// the beanstalkd protocol has no such field. A job is
				// never handed out before it, so no lateness from it is
				// negative (a misread time would be hours off).
				want := 0
				if c.target != "chronoq-beanstalk" {
					want = int(res.Jobs)
				}
				if res.ActivationSamples != want || res.ActivationP50MS < 0 || res.ActivationP50MS > res.ActivationP99MS ||
					res.ActivationP99MS > res.ActivationMaxMS || res.ActivationMaxMS > res.MaxMS+1 {
					t.Fatalf("lateness from activate_at: want %d samples, got %+v", want, res)
				}
			}
			if c.scenario != "delayed" && res.P50MS <= 0 {
				t.Fatalf("latency p50 %v", res.P50MS)
			}
			// the server runs in this process, which listens on the port
			if res.ServerCPUError != "" || res.ServerCPUS <= 0 || res.ServerCPUUsPerOp <= 0 || res.OpsPerServerCPUS <= 0 {
				t.Fatalf("server cpu not measured: %+v", res)
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

// smallScale is a scale run of n jobs against s that takes seconds.
func smallScale(s *chronoq, n int64) bench.ScaleConfig {
	return bench.ScaleConfig{Addr: strings.TrimPrefix(s.url, "http://"), AdminAddr: strings.TrimPrefix(s.admin, "http://"),
		Jobs: n, Conns: 3, Batch: 400, Probe: 300 * time.Millisecond, Lateness: 300 * time.Millisecond, ProbeConn: 2, Queue: "scale"}
}

// The scale scenario fills the queue with exactly the jobs asked for, all
// delayed, and measures everything it reports.
func TestScaleSmall(t *testing.T) {
	s := newServer(t)
	const n = 2500
	res, err := bench.RunScale(context.Background(), smallScale(s, n))
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.b.GetQueue(context.Background(), "default", "scale")
	if err != nil {
		t.Fatal(err)
	}
	if q.Counts.Delayed != n || q.Counts.Total() != n || res.Jobs != n {
		t.Fatalf("filled %d, the queue holds %+v", res.Jobs, q.Counts)
	}
	if res.FillJobsPerSec <= 0 || res.RSSPerJob <= 0 || res.HeapPerJob <= 0 || res.LivePerJob <= 0 {
		t.Fatalf("fill or memory not measured: %+v", res)
	}
	for _, l := range []bench.OpLatency{res.Idle, res.Snapshot} {
		if l.Cycles == 0 || l.PutP50 <= 0 || l.TakeP99 < l.TakeP50 || l.AckP50 <= 0 {
			t.Fatalf("probe not measured: %+v", l)
		}
	}
	if res.LatenessJobs == 0 || res.Errors != 0 || res.ActivationMaxMS <= 0 || res.ActivationMaxMS > res.LatenessMaxMS+1 {
		t.Fatalf("lateness over %d jobs (from activate_at: max %v ms), %d errors", res.LatenessJobs, res.ActivationMaxMS, res.Errors)
	}
	if res.FarJobs != 0 || res.FarDrainS != 0 {
		t.Fatalf("far-future figures without the far store: %+v", res)
	}
}

// With the far-future store on, the scale scenario waits until the jobs
// due beyond the horizon have gone out and measures memory after that.
func TestScaleSmallFar(t *testing.T) {
	s := newServerWith(t, func(c *server.Config) { c.FarHorizon = time.Hour })
	const n = 2500
	res, err := bench.RunScale(context.Background(), smallScale(s, n))
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.b.FarStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.FarJobs <= 0 || res.FarJobs > n || res.DrainedHeapInuse <= 0 || res.DrainedHeapPerJob <= 0 || st.Backlog != 0 {
		t.Fatalf("far store not measured: %+v (server: %+v)", res, st)
	}
}
