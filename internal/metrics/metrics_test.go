package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/metrics"
)

type stack struct {
	main, admin *httptest.Server
	b           *broker.Broker
}

func newStack(t *testing.T, maxQueues int) *stack {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var b *broker.Broker
	m := metrics.New(maxQueues, func(ctx context.Context) ([]engine.QueueInfo, error) { return b.AllQueues(ctx) })
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(b, httpapi.Options{Logger: quiet, Metrics: m.Handler(),
		Observe: func(op string, code int, d time.Duration) { m.Request("http", op, code, d) }})
	s := &stack{main: httptest.NewServer(api.Main()), admin: httptest.NewServer(api.Admin()), b: b}
	t.Cleanup(func() { s.main.Close(); s.admin.Close(); b.Close() })
	return s
}

func (s *stack) post(t *testing.T, path, body string) map[string]any {
	t.Helper()
	resp, err := http.Post(s.main.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
	}
	return out
}

func (s *stack) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(s.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// value returns the sample of a metric line with exactly these labels.
func value(t *testing.T, scrape, name, labels string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindStringSubmatch(scrape)
	if m == nil {
		t.Fatalf("no sample %s%s in:\n%s", name, labels, grepLines(scrape, name))
	}
	return m[1]
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestScriptedWorkloadExactCounters(t *testing.T) {
	s := newStack(t, 100)
	for i := 0; i < 10; i++ {
		s.post(t, "/v1/ns/default/queues/w/jobs", fmt.Sprintf(`{"payload":%d}`, i))
	}
	jobs := s.post(t, "/v1/ns/default/queues/w/take", `{"max":10}`)["jobs"].([]any)
	if len(jobs) != 10 {
		t.Fatalf("took %d", len(jobs))
	}
	for i, j := range jobs {
		job := j.(map[string]any)
		path := "/v1/ns/default/queues/w/jobs/" + job["id"].(string)
		body := fmt.Sprintf(`{"receipt":%q}`, job["receipt"])
		switch {
		case i < 7:
			s.post(t, path+"/ack", body)
		case i < 9:
			s.post(t, path+"/nack", fmt.Sprintf(`{"receipt":%q,"delay":"1h"}`, job["receipt"]))
		default:
			s.post(t, path+"/bury", body)
		}
	}
	sc := s.scrape(t)
	l := `{namespace="default",queue="w"}`
	for name, want := range map[string]string{
		"chronoq_jobs_put_total": "10", "chronoq_jobs_taken_total": "10", "chronoq_jobs_acked_total": "7",
		"chronoq_jobs_nacked_total": "2", "chronoq_jobs_dead_total": "1", "chronoq_jobs_expired_total": "0",
		"chronoq_job_wait_seconds_count": "10",
	} {
		if got := value(t, sc, name, l); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	for state, want := range map[string]string{"delayed": "2", "dead": "1", "ready": "0", "reserved": "0", "blocked": "0", "completed": "0"} {
		if got := value(t, sc, "chronoq_queue_jobs", `{namespace="default",queue="w",state="`+state+`"}`); got != want {
			t.Errorf("queue_jobs %s = %s, want %s", state, got, want)
		}
	}
	if got := value(t, sc, "chronoq_request_duration_seconds_count", `{code="201",op="POST /v1/ns/{ns}/queues/{q}/jobs",protocol="http"}`); got != "10" {
		t.Errorf("put request count %s, want 10", got)
	}
	if got := value(t, sc, "chronoq_request_duration_seconds_count", `{code="200",op="POST /v1/ns/{ns}/queues/{q}/jobs/{id}/ack",protocol="http"}`); got != "7" {
		t.Errorf("ack request count %s, want 7", got)
	}
	// 10 puts, 1 take, 10 settles: each an entry; group commit may merge
	// them into fewer commits but never loses one
	if got := value(t, sc, "chronoq_wal_batch_records_sum", ""); got != "21" {
		t.Errorf("wal entries %s, want 21", got)
	}
}

func TestQueueLabelCap(t *testing.T) {
	s := newStack(t, 2)
	for i := 0; i < 5; i++ {
		s.post(t, fmt.Sprintf("/v1/ns/default/queues/q%d/jobs", i), `{"payload":1}`)
	}
	sc := s.scrape(t)
	queues := map[string]bool{}
	for _, m := range regexp.MustCompile(`chronoq_jobs_put_total\{namespace="([^"]*)",queue="([^"]*)"\} (\S+)`).FindAllStringSubmatch(sc, -1) {
		queues[m[2]] = true
		if m[2] == metrics.Other && m[3] != "3" {
			t.Errorf("_other bucket counts %s puts, want 3", m[3])
		}
	}
	if len(queues) != 3 || !queues[metrics.Other] {
		t.Fatalf("want 2 queues + _other as labels, got %v", queues)
	}
}

// Every metric the shipped Grafana dashboard queries must exist.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/chronoq.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	s := newStack(t, 100)
	s.post(t, "/v1/ns/default/queues/g/jobs", `{"payload":1}`)
	j := s.post(t, "/v1/ns/default/queues/g/take", `{}`)["jobs"].([]any)[0].(map[string]any)
	s.post(t, "/v1/ns/default/queues/g/jobs/"+j["id"].(string)+"/ack", fmt.Sprintf(`{"receipt":%q}`, j["receipt"]))
	s.post(t, "/v1/ns/default/channels/c/publish", `{"data":1}`)
	sc := s.scrape(t)
	names := regexp.MustCompile(`chronoq_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range names.FindAllString(tg.Expr, -1) {
				n++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !strings.Contains(sc, "\n"+base) && !strings.Contains(sc, "# TYPE "+base+" ") {
					t.Errorf("panel %q queries %s, which /metrics does not have", p.Title, name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("dashboard queries only %d metrics", n)
	}
}

// TestRealtimeGauges: channel numbers are read from their source at scrape
// time, and publications are counted.
func TestRealtimeGauges(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var b *broker.Broker
	m := metrics.New(10, func(ctx context.Context) ([]engine.QueueInfo, error) { return b.AllQueues(ctx) })
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	api := httpapi.New(b, httpapi.Options{Logger: quiet, Metrics: m.Handler()})
	s := &stack{main: httptest.NewServer(api.Main()), admin: httptest.NewServer(api.Admin()), b: b}
	defer s.main.Close()
	defer s.admin.Close()
	m.SetRealtime(func() metrics.Realtime {
		hs := b.Channels().Stats()
		return metrics.Realtime{Channels: hs.Channels, Subscriptions: hs.Subscriptions, HistoryPublications: hs.Publications,
			Connections: 3, SlowDisconnects: 2, Refused: 1}
	})
	for i := 0; i < 3; i++ {
		s.post(t, "/v1/ns/default/channels/a/publish", `{"data":1}`)
	}
	s.post(t, "/v1/ns/default/channels/b/publish", `{"data":1}`)
	sc := s.scrape(t)
	for name, want := range map[string]string{
		"chronoq_channels": "2", "chronoq_channel_history_publications": "4", "chronoq_channel_publications_total": "4",
		"chronoq_channel_subscribers": "0", "chronoq_realtime_connections": "3",
		"chronoq_realtime_slow_disconnects_total": "2", "chronoq_realtime_refused_total": "1",
	} {
		if got := value(t, sc, name, ""); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// Request is on every API call's path: once a route and code were seen,
// recording another costs no allocation, and every call is counted.
func TestRequestCachedChild(t *testing.T) {
	m := metrics.New(10, func(context.Context) ([]engine.QueueInfo, error) { return nil, nil })
	m.Request("http", "POST /v1/x", 201, time.Millisecond)
	if allocs := testing.AllocsPerRun(100, func() { m.Request("http", "POST /v1/x", 201, time.Millisecond) }); allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
	m.Request("http", "POST /v1/x", 200, time.Millisecond)
	m.Request("ws", "POST /v1/x", 201, time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := rec.Body.String()
	for labels, want := range map[string]string{
		`{code="201",op="POST /v1/x",protocol="http"}`: "102", // AllocsPerRun runs it once more than asked
		`{code="200",op="POST /v1/x",protocol="http"}`: "1",
		`{code="201",op="POST /v1/x",protocol="ws"}`:   "1",
	} {
		if got := value(t, sc, "chronoq_request_duration_seconds_count", labels); got != want {
			t.Errorf("%s: %s requests, want %s", labels, got, want)
		}
	}
}
