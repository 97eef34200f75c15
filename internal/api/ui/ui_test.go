package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/wal"
)

const admin = "ui-test-admin-token-0123456789"

// syncBuffer collects the server's log.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, token string) (*server.Server, string, string) {
	return startLog(t, token, io.Discard)
}

func startLog(t *testing.T, token string, log io.Writer) (*server.Server, string, string) {
	t.Helper()
	cfg := server.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Sync = wal.SyncNever
	cfg.AdminToken = token
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return s, "http://" + s.Addr(server.HTTP), "http://" + s.Addr(server.Admin)
}

func do(t *testing.T, method, url, token string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAuthWithAdminToken: the dashboard's data routes take the admin token
// and nothing else; its static files carry no data and need none.
func TestAuthWithAdminToken(t *testing.T) {
	_, main, adm := start(t, admin)
	if r, _ := do(t, "POST", main+"/v1/ns/default/queues/q/jobs", admin, nil, `{"payload":1}`); r.StatusCode != 201 {
		t.Fatalf("put: %d", r.StatusCode)
	}
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/admin/stats", "", 401},
		{"/admin/stats", "wrong-token-wrong-token", 401},
		{"/admin/stats", admin, 200},
		{"/ui/api/v1/ns/default/queues", "", 401},
		{"/ui/api/v1/ns/default/queues", "wrong-token-wrong-token", 401},
		{"/ui/api/v1/ns/default/queues", admin, 200},
		{"/ui/api/v1/ns/default/queue-stats", "", 401},
		{"/ui/api/v1/ns/default/queue-stats", admin, 200},
		{"/ui/api/v1/ns/default/channels", "", 401},
		{"/ui/api/v1/ns/default/channels", admin, 200},
		{"/ui/", "", 200},
		{"/ui/app.js", "", 200},
	} {
		r, body := do(t, "GET", adm+c.path, c.token, nil, "")
		if r.StatusCode != c.code {
			t.Errorf("GET %s (token %q): %d %s, want %d", c.path, c.token, r.StatusCode, body, c.code)
		}
	}
	// a namespace token is not the admin token
	r, body := do(t, "POST", adm+"/admin/namespaces/default/tokens", admin, nil, `{"description":"w"}`)
	var tok struct{ Token string }
	if r.StatusCode != 201 && r.StatusCode != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("token: %d %s", r.StatusCode, body)
	}
	if r, _ := do(t, "GET", adm+"/admin/stats", tok.Token, nil, ""); r.StatusCode != 403 {
		t.Errorf("/admin/stats with a namespace token: %d, want 403", r.StatusCode)
	}
	// the /v1 routes re-mounted keep /v1's rules: a namespace token works on its namespace
	if r, _ := do(t, "GET", adm+"/ui/api/v1/ns/default/queues/q", tok.Token, nil, ""); r.StatusCode != 200 {
		t.Errorf("/ui/api/v1 with the namespace's token: %d, want 200", r.StatusCode)
	}
	// and validation: a bad put is refused the same way as on /v1
	if r, body := do(t, "POST", adm+"/ui/api/v1/ns/default/queues/q/jobs", admin, map[string]string{"Content-Type": "application/json"}, `{"payload":1,"delay":"-1s"}`); r.StatusCode != 400 || !strings.Contains(body, "delay") {
		t.Errorf("bad put through /ui/api: %d %s, want 400 naming delay", r.StatusCode, body)
	}
}

// TestStaticHeaders: the page runs only its own scripts and cannot be
// framed; the files come from the binary.
func TestStaticHeaders(t *testing.T) {
	_, _, adm := start(t, admin)
	r, body := do(t, "GET", adm+"/ui/", "", nil, "")
	csp := r.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q", csp)
	}
	if r.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(body, `src="app.js"`) {
		t.Errorf("index: headers %v body %.200s", r.Header, body)
	}
	for _, f := range []string{"uPlot.esm.js", "uPlot.min.css", "uPlot.LICENSE.txt", "style.css"} {
		if r, _ := do(t, "GET", adm+"/ui/"+f, "", nil, ""); r.StatusCode != 200 {
			t.Errorf("/ui/%s: %d", f, r.StatusCode)
		}
	}
	if r, _ := do(t, "POST", adm+"/ui/", "", nil, "x"); r.StatusCode != 405 {
		t.Errorf("POST /ui/: %d, want 405", r.StatusCode)
	}
	if r, _ := do(t, "GET", adm+"/ui/nope.js", "", nil, ""); r.StatusCode != 404 {
		t.Errorf("/ui/nope.js: %d, want 404", r.StatusCode)
	}
}

// TestOpenModeGuard: without tokens on loopback the dashboard is open like
// the API, and another site's page is refused.
func TestOpenModeGuard(t *testing.T) {
	_, _, adm := start(t, "")
	if r, body := do(t, "GET", adm+"/admin/stats", "", nil, ""); r.StatusCode != 200 || !strings.Contains(body, `"jobs"`) {
		t.Errorf("open /admin/stats: %d %s", r.StatusCode, body)
	}
	same := map[string]string{"Origin": adm, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	if r, body := do(t, "POST", adm+"/ui/api/v1/ns/default/queues/q/jobs", "", same, `{"payload":1}`); r.StatusCode != 201 {
		t.Errorf("same-origin put through /ui/api: %d %s", r.StatusCode, body)
	}
	evil := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
	for _, p := range []string{"/admin/stats", "/admin/stats/stream", "/ui/api/v1/ns/default/queues", "/ui/api/v1/ns/default/queue-stats"} {
		if r, _ := do(t, "GET", adm+p, "", evil, ""); r.StatusCode != 403 {
			t.Errorf("cross-site GET %s: %d, want 403", p, r.StatusCode)
		}
	}
	form := map[string]string{"Origin": adm, "Sec-Fetch-Site": "same-origin", "Content-Type": "text/plain"}
	if r, _ := do(t, "POST", adm+"/ui/api/v1/ns/default/queues/q/purge", "", form, "x"); r.StatusCode != 403 {
		t.Errorf("text/plain POST from a browser: %d, want 403", r.StatusCode)
	}
}

// TestStatsAndStream: the snapshot counts jobs by state, the stream sends
// events with samples and ends when the server stops.
func TestStatsAndStream(t *testing.T) {
	var log syncBuffer
	s, main, adm := startLog(t, admin, &log)
	for i := 0; i < 3; i++ {
		do(t, "POST", main+"/v1/ns/default/queues/a/jobs", admin, nil, `{"payload":1}`)
	}
	do(t, "POST", main+"/v1/ns/default/queues/b/jobs", admin, nil, `{"payload":1,"delay":"1h"}`)
	bs, err := net.Dial("tcp", s.Addr(server.Beanstalk))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if _, err := bs.Write([]byte("list-tubes\r\n")); err != nil { // answered once accepted
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(bs).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	var ov struct {
		Queues      int
		Jobs        map[string]int
		Totals      map[string]int
		Connections map[string]int
		WAL         struct{ Bytes int64 }
	}
	// the overview is cached for up to an interval: wait for a fresh one
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := do(t, "GET", adm+"/admin/stats", admin, nil, "")
		if err := json.Unmarshal([]byte(body), &ov); err != nil {
			t.Fatal(err)
		}
		if ov.Jobs["ready"] == 3 && ov.Connections["beanstalk"] == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ov.Queues != 2 || ov.Jobs["ready"] != 3 || ov.Jobs["delayed"] != 1 || ov.Totals["put"] != 4 || ov.WAL.Bytes == 0 ||
		ov.Connections["beanstalk"] != 1 || ov.Connections["http"] < 1 {
		t.Errorf("overview %+v", ov)
	}
	if r, _ := do(t, "GET", adm+"/admin/stats?window=nonsense", admin, nil, ""); r.StatusCode != 400 {
		t.Errorf("bad window: %d, want 400", r.StatusCode)
	}

	req, _ := http.NewRequest("GET", adm+"/admin/stats/stream", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	events := 0
	for events < 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended after %d events: %v", events, err)
		}
		if strings.HasPrefix(line, "data: ") {
			var ev struct {
				Jobs    map[string]int
				Samples []struct{ Put float64 }
			}
			if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
			if ev.Jobs["ready"] != 3 {
				t.Errorf("event jobs %v", ev.Jobs)
			}
			events++
		}
	}
	// Shutdown ends the stream: otherwise the admin listener waits for it
	// until Shutdown's context gives up, and says so in the log.
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, rd); ended <- err }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open stream: %v", err)
	}
	<-ended
	if strings.Contains(log.String(), "listener shutdown") {
		t.Errorf("an open stats stream held the listener's shutdown:\n%s", log.String())
	}
}

// TestRoutesDocumented: the routes this package adds are in
// docs/openapi.yaml and docs/api.md (internal/api/http's OpenAPI test
// leaves them to this one).
func TestRoutesDocumented(t *testing.T) {
	oa, err := os.ReadFile("../../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/admin/stats", "/admin/stats/stream", "/ui/", "/ui/api/v1/ns/{ns}/queue-stats", "/ui/api/v1/ns/{ns}/channels"} {
		if !strings.Contains(string(oa), "\n  "+p+":\n    servers:\n      - url: http://127.0.0.1:7778\n") {
			t.Errorf("docs/openapi.yaml lacks %s on the admin listener", p)
		}
		if !strings.Contains(string(md), "`GET "+p) {
			t.Errorf("docs/api.md lacks GET %s", p)
		}
	}
}

// TestChannelList: live channels in name order with their positions,
// paged by name; another namespace's channels are not listed.
func TestChannelList(t *testing.T) {
	_, main, adm := start(t, admin)
	for _, c := range []string{"default/b", "default/a", "default/a", "default/c", "other/a"} {
		ns, ch, _ := strings.Cut(c, "/")
		if ns == "other" {
			do(t, "POST", adm+"/admin/namespaces", admin, nil, `{"name":"other"}`)
		}
		if r, body := do(t, "POST", main+"/v1/ns/"+ns+"/channels/"+ch+"/publish", admin, nil, `{"data":1}`); r.StatusCode != 200 {
			t.Fatalf("publish %s: %d %s", c, r.StatusCode, body)
		}
	}
	type page struct {
		Channels []struct {
			Channel     string
			Offset      int
			Subscribers int
			History     int
		}
		NextCursor string `json:"next_cursor"`
	}
	var p page
	_, body := do(t, "GET", adm+"/ui/api/v1/ns/default/channels?limit=2", admin, nil, "")
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Channels) != 2 || p.Channels[0].Channel != "a" || p.Channels[0].Offset != 2 || p.Channels[0].History != 2 ||
		p.Channels[1].Channel != "b" || p.NextCursor != "b" {
		t.Fatalf("first page %s", body)
	}
	_, body = do(t, "GET", adm+"/ui/api/v1/ns/default/channels?limit=2&cursor=b", admin, nil, "")
	p = page{}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Channels) != 1 || p.Channels[0].Channel != "c" || p.NextCursor != "" {
		t.Fatalf("second page %s", body)
	}
	if r, _ := do(t, "GET", adm+"/ui/api/v1/ns/default/channels?limit=0", admin, nil, ""); r.StatusCode != 400 {
		t.Errorf("limit=0: %d, want 400", r.StatusCode)
	}
}
