// Package dashboard tests the web dashboard (/ui/ on the admin listener) in
// headless Chromium against a real server started through internal/server:
// every page renders with data, a dead job is respawned from the page and
// then taken by a worker, purge asks for a typed confirmation, live counts
// follow jobs put from outside, a hostile payload stays inert, a wrong
// admin token is refused. dash.mjs drives the browser (playwright-core of
// test/browser, Debian's Chromium) and saves a screenshot of every page.
package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/testbin"
	"github.com/chronoq/chronoq/internal/wal"
)

const adminToken = "dashboard-test-admin-token-0123"

type tools struct{ node, chromium, dir string }

// findTools skips when node, chromium or playwright-core is missing, or
// fails with CHRONOQ_REQUIRE_BROWSER=1 (CI), like test/browser.
func findTools(t *testing.T) tools {
	t.Helper()
	b := testbin.FindBrowser(t, "dashboard test") // dash.mjs loads playwright-core from test/browser
	return tools{dir: filepath.Join(b.Root, "test", "dashboard"), node: b.Node, chromium: b.Chromium}
}

// api calls the server with the admin token.
type api struct {
	t    *testing.T
	main string
	c    *http.Client
}

func (a *api) call(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.main+path, rd)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

func (a *api) must(method, path string, body any, out any) {
	a.t.Helper()
	st, raw := a.call(method, path, body)
	if st >= 300 {
		a.t.Fatalf("%s %s: %d %s", method, path, st, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

const hostile = `{"html":"<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">","note":"</pre><b id=injected>x</b>"}`

// seed fills the server with what every page shows.
func seed(a *api) {
	q := "/v1/ns/default/queues/"
	var batch []map[string]any
	for i := range 30 {
		batch = append(batch, map[string]any{"payload": map[string]any{"to": fmt.Sprintf("user%d@example.com", i), "template": "welcome"},
			"tags": map[string]string{"user_id": fmt.Sprint(i % 5)}})
	}
	a.must("POST", q+"emails/jobs/batch", map[string]any{"jobs": batch}, nil)
	// tonight's work: delayed jobs spread over the next day
	batch = nil
	for i := range 40 {
		batch = append(batch, map[string]any{"payload": map[string]any{"report": i}, "delay": fmt.Sprintf("%dm", 5+i*35)})
	}
	a.must("POST", q+"reports/jobs/batch", map[string]any{"jobs": batch}, nil)
	for i := range 6 {
		a.must("POST", q+"emails/jobs", map[string]any{"payload": map[string]any{"digest": i}, "delay": fmt.Sprintf("%dm", 20+i*50)}, nil)
	}
	// a dead job with its error
	a.must("POST", q+"payments/jobs", map[string]any{"id": "pay-dead-1", "payload": map[string]any{"order": 1001, "amount": "19.90"}, "tries": 1,
		"key": "customer:77", "tags": map[string]string{"customer": "77"}}, nil)
	var took struct {
		Jobs []struct{ ID, Receipt string }
	}
	a.must("POST", q+"payments/take", map[string]any{"max": 1}, &took)
	if len(took.Jobs) != 1 {
		a.t.Fatalf("seed: take answered %+v", took)
	}
	a.must("POST", q+"payments/jobs/pay-dead-1/nack", map[string]any{"receipt": took.Jobs[0].Receipt, "error": "card declined: insufficient funds"}, nil)
	// the hostile job: markup in the payload and in a tag
	a.must("POST", q+"payments/jobs", map[string]any{"id": "hostile", "payload": json.RawMessage(hostile),
		"tags": map[string]string{"note": "<b id=tagbold>bold</b><script>window.__pwned=3</script>"}}, nil)
	// a binary payload, shown as hex
	a.must("POST", q+"payments/jobs", map[string]any{"id": "binary", "payload_base64": "AAECA2hlbGxvIHdvcmxk/w=="}, nil)
	// a paused queue, and one to purge
	a.must("POST", q+"thumbnails/jobs", map[string]any{"payload": "x"}, nil)
	a.must("POST", q+"thumbnails/pause", nil, nil)
	for i := range 12 {
		a.must("POST", q+"scratch/jobs", map[string]any{"payload": i}, nil)
	}
	a.must("POST", "/v1/ns/default/channels/news/publish", map[string]any{"data": map[string]any{"title": "hello"}}, nil)
	a.must("POST", "/v1/ns/default/channels/news/publish", map[string]any{"data": map[string]any{"title": "<script>window.__pwned=4</script>"}}, nil)
}

// traffic keeps a little put/take/ack going, in waves, so the rate charts
// have a line: bounded in count and stopped by ctx.
func traffic(ctx context.Context, a *api, wg *sync.WaitGroup) {
	defer wg.Done()
	q := "/v1/ns/default/queues/traffic/"
	for i := 0; i < 2000 && ctx.Err() == nil; i++ {
		n := 1 + (i/20)%4*2 // 1, 3, 5, 7 jobs a round, changing every ~3 s
		var batch []map[string]any
		for j := range n {
			batch = append(batch, map[string]any{"payload": map[string]any{"round": i, "job": j}})
		}
		if st, _ := a.call("POST", q+"jobs/batch", map[string]any{"jobs": batch}); st >= 300 {
			return
		}
		st, raw := a.call("POST", q+"take", map[string]any{"max": n})
		var took struct {
			Jobs []struct{ ID, Receipt string }
		}
		if st == 200 && json.Unmarshal(raw, &took) == nil {
			for k, j := range took.Jobs {
				if k%4 == 3 { // every fourth fails once and comes back later
					a.call("POST", q+"jobs/"+j.ID+"/nack", map[string]any{"receipt": j.Receipt, "error": "flaky"})
					continue
				}
				a.call("POST", q+"jobs/"+j.ID+"/ack", map[string]any{"receipt": j.Receipt})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func TestDashboard(t *testing.T) {
	tl := findTools(t)
	cfg := server.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Sync = wal.SyncNever
	cfg.AdminToken = adminToken
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	a := &api{t: t, main: "http://" + s.Addr(server.HTTP), c: &http.Client{Timeout: 10 * time.Second}}
	seed(a)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go traffic(ctx, a, &wg)
	defer func() { stop(); wg.Wait() }()

	out := os.Getenv("CHRONOQ_DASHBOARD_SHOTS")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	limit := 90 * time.Second
	if w, err := time.ParseDuration(os.Getenv("CHRONOQ_DASHBOARD_CHART_WAIT") + "s"); err == nil {
		limit += w // screenshots for the docs wait for a longer chart
	}
	runCtx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(runCtx, tl.node, filepath.Join(tl.dir, "dash.mjs"),
		"--admin", "http://"+s.Addr(server.Admin), "--api", a.main, "--token", adminToken,
		"--chromium", tl.chromium, "--out", out)
	cmd.Dir = tl.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var steps []string
	var failed []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			Step   string `json:"step"`
			Fail   string `json:"fail"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Step != "" {
			steps = append(steps, m.Step)
			t.Logf("ok: %s %s", m.Step, m.Detail)
		}
		if m.Fail != "" {
			failed = append(failed, m.Fail)
		}
	}
	err = cmd.Wait()
	if err != nil || len(failed) > 0 {
		t.Fatalf("dash.mjs: %v\nfailures:\n  %s\nsteps passed: %v\nbrowser log:\n%s", err, strings.Join(failed, "\n  "), steps, tail(stderr.String(), 6000))
	}
	for _, want := range []string{"wrong token refused", "overview", "live counts", "queues", "purge confirmation", "respawn dead job",
		"worker took respawned job", "hostile payload inert", "scheduled", "channels", "namespaces"} {
		found := false
		for _, s := range steps {
			found = found || s == want
		}
		if !found {
			t.Errorf("step %q never reported (passed: %v)", want, steps)
		}
	}
	// What the browser did, seen from the server.
	st, raw := a.call("GET", "/v1/ns/default/queues/payments/jobs/pay-dead-1", nil)
	if st != 404 {
		t.Errorf("pay-dead-1 after respawn, take and ack: %d %s, want 404 (acked)", st, raw)
	}
	var scratch struct{ Counts map[string]int }
	a.must("GET", "/v1/ns/default/queues/scratch", nil, &scratch)
	for k, n := range scratch.Counts {
		if n != 0 {
			t.Errorf("scratch after the confirmed purge: %d %s jobs, want none", n, k)
		}
	}
	st, _ = a.call("GET", "/v1/ns/default/queues/payments/jobs/hostile", nil)
	if st != 200 {
		t.Errorf("the hostile job: %d, want it untouched", st)
	}
	if entries, _ := os.ReadDir(out); len(entries) < 6 {
		t.Errorf("%d screenshots in %s, want one per page", len(entries), out)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
