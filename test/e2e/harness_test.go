// Package e2e holds the black-box tests of chronoq: each test builds nothing
// itself, it runs the real server binary (built once by TestMain) on loopback
// ports with its own data directory and talks to it over HTTP, checking the
// wire contract of docs/api.md.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
)

var (
	binPath  string // the chronoq binary built by TestMain
	buildErr string // non-empty when the build failed: every test fails with it
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "chronoq-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := build(tmp); err != nil {
		buildErr = err.Error()
	}
	return m.Run()
}

// build compiles ./cmd/chronoq of the module that contains this package.
func build(tmp string) error {
	bin, err := testbin.Build(tmp)
	if err != nil {
		return err
	}
	binPath = bin
	return nil
}

// ---------------------------------------------------------------------------
// Server process

// logBuffer collects the server's stdout and stderr; it keeps the last few
// MiB only.
type logBuffer struct {
	mu sync.Mutex
	b  []byte
}

const maxLog = 4 << 20

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > maxLog {
		l.b = append([]byte("...[truncated]...\n"), l.b[len(l.b)-maxLog/2:]...)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// proc is one running server process.
type proc struct {
	dir       string
	args      []string
	httpAddr  string
	adminAddr string
	cmd       *exec.Cmd
	log       *logBuffer
	done      chan struct{} // closed when the process has exited
	waitErr   error
	client    *http.Client
}

// server is a handle on a proc bound to one test (for error reports) and
// optionally carrying a bearer token. Copies made by as and withToken share
// the process.
type server struct {
	*proc
	t     testing.TB
	token string
}

// as returns the same server reporting to t (use it inside subtests).
func (s *server) as(t testing.TB) *server {
	c := *s
	c.t = t
	return &c
}

// quietTB swallows reports: goroutines that may outlive a failed test use
// it (their results are checked by the test goroutine instead).
type quietTB struct{ testing.TB }

func (quietTB) Helper()               {}
func (quietTB) Errorf(string, ...any) {}
func (quietTB) Error(...any)          {}
func (quietTB) Logf(string, ...any)   {}

// quiet returns the same server reporting nothing (for helper goroutines).
func (s *server) quiet() *server {
	c := *s
	c.t = quietTB{s.t}
	return &c
}

// withToken returns the same server sending Authorization: Bearer tok.
func (s *server) withToken(tok string) *server {
	c := *s
	c.token = tok
	return &c
}

// freePort: testbin.FreePort says why not a closed ":0" listener.
func freePort() (int, error) { return testbin.FreePort() }

func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// startServer runs `chronoq serve` on dir with free loopback ports and waits
// until it answers GET /healthz with 200.
func startServer(t testing.TB, dir string, extraArgs ...string) *server {
	t.Helper()
	if buildErr != "" {
		t.Fatalf("building the server failed:\n%s", buildErr)
	}
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		p, err := launch(dir, extraArgs)
		if err != nil {
			t.Fatalf("start server: %v", err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("server log (data %s, http %s, admin %s, args %q):\n%s", p.dir, p.httpAddr, p.adminAddr, p.args, tail(p.log.String(), 64<<10))
			}
			p.killNow()
		})
		ok, why := p.waitHealthy(15 * time.Second)
		if ok {
			return &server{proc: p, t: t}
		}
		lastLog = p.log.String()
		p.killNow()
		if strings.Contains(lastLog, "address already in use") {
			continue // a parallel test took one of our ports: try new ones
		}
		t.Fatalf("server did not become healthy: %s\nargs %q\nlog:\n%s", why, p.args, tail(lastLog, 64<<10))
	}
	t.Fatalf("server could not bind its ports after 3 attempts; log:\n%s", tail(lastLog, 64<<10))
	return nil
}

func launch(dir string, extraArgs []string) (*proc, error) {
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	ap, err := freePort()
	if err != nil {
		return nil, err
	}
	for ap == hp {
		if ap, err = freePort(); err != nil {
			return nil, err
		}
	}
	p := &proc{
		dir:       dir,
		httpAddr:  fmt.Sprintf("127.0.0.1:%d", hp),
		adminAddr: fmt.Sprintf("127.0.0.1:%d", ap),
		log:       &logBuffer{},
		done:      make(chan struct{}),
		client:    newClient(20 * time.Second),
	}
	p.args = append([]string{"serve", "--data", dir, "--http", p.httpAddr, "--admin", p.adminAddr, "--beanstalk", ""}, extraArgs...)
	p.cmd = exec.Command(binPath, p.args...)
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	p.cmd.Dir = dir
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) waitHealthy(limit time.Duration) (bool, string) {
	c := newClient(time.Second)
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.exited() {
			return false, fmt.Sprintf("process exited early: %v", p.waitErr)
		}
		resp, err := c.Get("http://" + p.httpAddr + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true, ""
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false, fmt.Sprintf("no 200 from /healthz within %v", limit)
}

// killNow sends SIGKILL (if still running) and waits for the exit.
func (p *proc) killNow() {
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	p.client.CloseIdleConnections()
}

// waitReady polls GET /readyz on the admin listener until it answers 200
// (recovery done), for at most 15 s.
func (s *server) waitReady() {
	s.t.Helper()
	c := newClient(time.Second)
	defer c.CloseIdleConnections()
	ok := eventually(15*time.Second, func() bool {
		resp, err := c.Get("http://" + s.adminAddr + "/readyz")
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if !ok {
		s.t.Fatalf("server not ready (/readyz) within 15s")
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.killNow()
}

// terminate sends SIGTERM and waits up to timeout; it returns the exit code
// (-1 when it had to be killed or died by a signal).
func (p *proc) terminate(timeout time.Duration) (code int, killed bool) {
	if p.exited() {
		return p.cmd.ProcessState.ExitCode(), false
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		killed = true
	}
	p.client.CloseIdleConnections()
	return p.cmd.ProcessState.ExitCode(), killed
}

// stop sends SIGTERM and expects a clean exit (code 0) within 10 s.
func (s *server) stop() {
	s.t.Helper()
	code, killed := s.terminate(10 * time.Second)
	if killed {
		s.t.Errorf("server did not exit within 10s of SIGTERM (killed)")
	} else if code != 0 {
		s.t.Errorf("server exit code after SIGTERM = %d (%v), want 0", code, s.waitErr)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// ---------------------------------------------------------------------------
// HTTP helpers

// encodeBody turns a request body into bytes: []byte, string and
// json.RawMessage are sent as they are, anything else is JSON-encoded.
func encodeBody(body any) ([]byte, error) {
	switch b := body.(type) {
	case nil:
		return nil, nil
	case []byte:
		return b, nil
	case string:
		return []byte(b), nil
	case json.RawMessage:
		return b, nil
	default:
		return json.Marshal(b)
	}
}

// try sends one request and returns the status and the raw answer; it
// performs no checks (used under load and during crashes).
func (s *server) try(client *http.Client, addr, method, path string, body any) (int, []byte, error) {
	data, err := encodeBody(body)
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, raw, err
	}
	return resp.StatusCode, raw, nil
}

// do sends a request to the HTTP listener. It reports transport errors,
// malformed error bodies and format violations (times, durations, ids) of
// the answer to the server's test, and returns the status, the answer
// decoded as a JSON object (nil if it is not one) and the raw bytes.
func (s *server) do(method, path string, body any) (int, map[string]any, []byte) {
	return s.request(s.httpAddr, method, path, body)
}

// admin is do against the admin listener.
func (s *server) admin(method, path string, body any) (int, map[string]any, []byte) {
	return s.request(s.adminAddr, method, path, body)
}

func (s *server) request(addr, method, path string, body any) (int, map[string]any, []byte) {
	s.t.Helper()
	data, err := encodeBody(body)
	if err != nil {
		s.t.Errorf("%s %s: encode body: %v", method, path, err)
		return 0, nil, nil
	}
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		s.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil, nil
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Errorf("%s %s: reading answer: %v", method, path, err)
	}
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			m, _ = v.(map[string]any)
		}
	}
	what := method + " " + path
	api := strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/admin/")
	if api && len(bytes.TrimSpace(raw)) > 0 {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			s.t.Errorf("%s: answer %d has Content-Type %q, want application/json", what, resp.StatusCode, ct)
		}
	}
	if resp.StatusCode >= 400 && resp.StatusCode != 504 && (api || addr == s.httpAddr) {
		checkErrorShape(s.t, what, resp.StatusCode, m, raw)
	}
	if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
		s.t.Errorf("%s: 503 without Retry-After", what)
	}
	if m != nil {
		checkFormats(s.t, what, "", m)
	}
	return resp.StatusCode, m, raw
}

// expect sends a request to the HTTP listener and fails the test at once
// unless the status is want. Use only from the test's own goroutine.
func (s *server) expect(want int, method, path string, body any) (map[string]any, []byte) {
	s.t.Helper()
	st, m, raw := s.do(method, path, body)
	if st != want {
		s.t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, st, want, trunc(raw))
	}
	return m, raw
}

// expectAdmin is expect against the admin listener.
func (s *server) expectAdmin(want int, method, path string, body any) (map[string]any, []byte) {
	s.t.Helper()
	st, m, raw := s.admin(method, path, body)
	if st != want {
		s.t.Fatalf("admin %s %s: status %d, want %d; body: %s", method, path, st, want, trunc(raw))
	}
	return m, raw
}

func trunc(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "...(truncated)"
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Contract checks

var (
	timeRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	ulidRe = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
)

var durationKeys = map[string]bool{
	"ttr": true, "oldest_ready_age": true, "default_ttr": true, "default_ttl": true,
	"dedup_window": true, "retain_results": true,
}

// userContent are keys whose values are client data, not checked.
var userContent = map[string]bool{"payload": true, "result": true, "data": true, "tags": true, "payload_base64": true}

// checkFormats walks an answer and checks docs/api.md's "Times" convention: every time
// (`*_at`, `reserved_until`, `time`) is RFC 3339 UTC with exactly three
// fraction digits, every duration is Go's Duration string, every server id
// is an uppercase Crockford ULID. Ids containing characters no ULID has
// (lowercase, '-', '_', '.', ':') are taken as client ids and not checked.
func checkFormats(t testing.TB, what, parent string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if userContent[k] {
				continue
			}
			isTime := strings.HasSuffix(k, "_at") || k == "reserved_until" || k == "time"
			isDur := durationKeys[k] || (parent == "backoff" && (k == "initial" || k == "max"))
			switch {
			case isTime:
				s, ok := val.(string)
				if !ok || !timeRe.MatchString(s) {
					t.Errorf("%s: %q = %v: not a time like 2026-11-22T10:00:00.000Z", what, k, val)
				}
			case isDur:
				s, ok := val.(string)
				if !ok || !isGoDuration(s) {
					t.Errorf("%s: %q = %v: not a Go duration string", what, k, val)
				}
			case k == "id" || k == "next_id":
				s, ok := val.(string)
				if !ok || s == "" {
					t.Errorf("%s: %q = %v: not a non-empty string", what, k, val)
				} else if !strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz-_.:") && !ulidRe.MatchString(s) {
					t.Errorf("%s: %q = %q: not an uppercase Crockford ULID", what, k, s)
				}
			default:
				checkFormats(t, what, k, val)
			}
		}
	case []any:
		for _, e := range x {
			checkFormats(t, what, parent, e)
		}
	}
}

func isGoDuration(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d.String() == s
}

// checkErrorShape checks {"error":{"code":"<snake_case>","message":"..."}}.
func checkErrorShape(t testing.TB, what string, status int, m map[string]any, raw []byte) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if e == nil || !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(code) || msg == "" {
		t.Errorf("%s: status %d: error body is not {\"error\":{\"code\",\"message\"}}: %s", what, status, trunc(raw))
	}
}

// wantError checks an error answer: status, code and, when field is not
// empty, that the message names the field.
func wantError(t testing.TB, what string, status int, m map[string]any, raw []byte, wantStatus int, wantCode, field string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d; body: %s", what, status, wantStatus, trunc(raw))
		return
	}
	code := jstr(m, "error", "code")
	if code != wantCode {
		t.Errorf("%s: error code %q, want %q; body: %s", what, code, wantCode, trunc(raw))
	}
	if field != "" && !namesField(jstr(m, "error", "message"), field) {
		t.Errorf("%s: error message %q does not name the field %q", what, jstr(m, "error", "message"), field)
	}
}

// namesField says whether msg mentions field as a whole path: not preceded
// by an identifier character or '.', not followed by an identifier
// character (a nested path below the field, "tags.k", counts).
func namesField(msg, field string) bool {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_.\]])` + regexp.QuoteMeta(field) + `($|[^A-Za-z0-9_])`)
	return re.MatchString(msg)
}

// badRequest sends the request and expects 400 bad_request naming field.
func (s *server) badRequest(method, path string, body any, field string) {
	s.t.Helper()
	st, m, raw := s.do(method, path, body)
	wantError(s.t, method+" "+path, st, m, raw, 400, "bad_request", field)
}

// ---------------------------------------------------------------------------
// JSON access

// jget follows a path of object keys (string) and array indexes (int).
func jget(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func jstr(v any, path ...any) string {
	s, _ := jget(v, path...).(string)
	return s
}

// jint returns a JSON number as int64 (-1<<62 when absent or not integral).
func jint(v any, path ...any) int64 {
	switch n := jget(v, path...).(type) {
	case json.Number:
		i, err := n.Int64()
		if err == nil {
			return i
		}
	case float64:
		return int64(n)
	}
	return -1 << 62
}

func jfloat(v any, path ...any) float64 {
	switch n := jget(v, path...).(type) {
	case json.Number:
		f, _ := n.Float64()
		return f
	case float64:
		return n
	}
	return -1e300
}

func jbool(v any, path ...any) (val, ok bool) {
	b, ok := jget(v, path...).(bool)
	return b, ok
}

func jarr(v any, path ...any) []any {
	a, _ := jget(v, path...).([]any)
	return a
}

func jmap(v any, path ...any) map[string]any {
	m, _ := jget(v, path...).(map[string]any)
	return m
}

func has(m map[string]any, key string) bool {
	_, ok := m[key]
	return ok
}

// rawObject decodes an answer into its raw fields, to compare JSON texts.
func rawObject(t testing.TB, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Errorf("answer is not a JSON object: %v: %s", err, trunc(raw))
	}
	return m
}

// rawJobs returns the raw fields of every element of the answer's "jobs".
func rawJobs(t testing.TB, raw []byte) []map[string]json.RawMessage {
	t.Helper()
	var a struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Errorf("answer has no jobs array: %v: %s", err, trunc(raw))
	}
	return a.Jobs
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Errorf("time %q: %v", s, err)
	}
	return tm
}

// within checks lo-slack <= got <= hi+slack.
func within(t testing.TB, what string, got, lo, hi time.Time, slack time.Duration) {
	t.Helper()
	if got.Before(lo.Add(-slack)) || got.After(hi.Add(slack)) {
		t.Errorf("%s = %s, want within [%s, %s] (±%v)", what, got.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano), slack)
	}
}

// ---------------------------------------------------------------------------
// Job helpers (namespace "default" unless a path says otherwise)

func qp(q string) string       { return "/v1/ns/default/queues/" + url.PathEscape(q) }
func jobsp(q string) string    { return qp(q) + "/jobs" }
func jobp(q, id string) string { return jobsp(q) + "/" + url.PathEscape(id) }
func nsqp(ns, q string) string {
	return "/v1/ns/" + url.PathEscape(ns) + "/queues/" + url.PathEscape(q)
}
func jobActp(q, id, act string) string { return jobp(q, id) + "/" + act }

// put puts one job and expects 201; it returns the answer.
func (s *server) put(q string, body any) map[string]any {
	s.t.Helper()
	m, _ := s.expect(201, "POST", jobsp(q), body)
	if jstr(m, "id") == "" {
		s.t.Fatalf("put into %s: answer without id: %v", q, m)
	}
	return m
}

// putID puts a job and returns its id.
func (s *server) putID(q string, body any) string {
	s.t.Helper()
	return jstr(s.put(q, body), "id")
}

// take takes from one queue and expects 200; it returns the jobs.
func (s *server) take(q string, body any) []any {
	s.t.Helper()
	m, raw := s.expect(200, "POST", qp(q)+"/take", body)
	jobs, ok := m["jobs"].([]any)
	if !ok {
		s.t.Fatalf("take from %s: answer has no jobs array: %s", q, trunc(raw))
	}
	return jobs
}

// takeOne takes exactly one job (waiting up to 5 s) and returns it.
func (s *server) takeOne(q string) map[string]any {
	s.t.Helper()
	jobs := s.take(q, map[string]any{"max": 1, "wait": "5s"})
	if len(jobs) != 1 {
		s.t.Fatalf("take from %s: got %d jobs, want 1", q, len(jobs))
	}
	return jobs[0].(map[string]any)
}

// peek returns the job object and expects 200.
func (s *server) peek(q, id string) map[string]any {
	s.t.Helper()
	m, _ := s.expect(200, "GET", jobp(q, id), nil)
	return m
}

// peekRaw returns the raw peek answer.
func (s *server) peekRaw(q, id string) []byte {
	s.t.Helper()
	_, raw := s.expect(200, "GET", jobp(q, id), nil)
	return raw
}

// wantGone expects 404 job_not_found for a peek.
func (s *server) wantGone(q, id string) {
	s.t.Helper()
	st, m, raw := s.do("GET", jobp(q, id), nil)
	wantError(s.t, "peek "+id, st, m, raw, 404, "job_not_found", "")
}

// state peeks a job and returns its state.
func (s *server) state(q, id string) string {
	s.t.Helper()
	return jstr(s.peek(q, id), "state")
}

// ack acks with the receipt and expects 200.
func (s *server) ack(q string, job map[string]any, extra map[string]any) map[string]any {
	s.t.Helper()
	body := map[string]any{"receipt": jstr(job, "receipt")}
	for k, v := range extra {
		body[k] = v
	}
	m, _ := s.expect(200, "POST", jobActp(q, jstr(job, "id"), "ack"), body)
	return m
}

// counts returns GET queue's counts.
func (s *server) counts(q string) map[string]int64 {
	s.t.Helper()
	m, _ := s.expect(200, "GET", qp(q), nil)
	out := map[string]int64{}
	for _, st := range []string{"delayed", "ready", "blocked", "reserved", "dead", "completed"} {
		out[st] = jint(m, "counts", st)
	}
	return out
}

// listAll pages through a listing with the given query and returns every
// job, failing on duplicates.
func (s *server) listAll(q, query string, limit int) []map[string]any {
	s.t.Helper()
	var all []map[string]any
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 10000; page++ {
		v := url.Values{}
		if query != "" {
			var err error
			if v, err = url.ParseQuery(query); err != nil {
				s.t.Fatalf("bad query %q", query)
			}
		}
		v.Set("limit", fmt.Sprint(limit))
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		m, raw := s.expect(200, "GET", jobsp(q)+"?"+v.Encode(), nil)
		jobs, ok := m["jobs"].([]any)
		if !ok {
			s.t.Fatalf("list %s: no jobs array: %s", q, trunc(raw))
		}
		for _, j := range jobs {
			jm := j.(map[string]any)
			id := jstr(jm, "id")
			if seen[id] {
				s.t.Errorf("list %s?%s: job %s listed twice", q, query, id)
			}
			seen[id] = true
			all = append(all, jm)
		}
		next, has := m["next_cursor"]
		if !has {
			return all
		}
		cursor, _ = next.(string)
		if cursor == "" {
			s.t.Fatalf("list %s: next_cursor present but not a non-empty string: %v", q, next)
		}
	}
	s.t.Fatalf("list %s: too many pages", q)
	return nil
}

func ids(jobs []any) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, jstr(j, "id"))
	}
	return out
}

func idsOf(jobs []map[string]any) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, jstr(j, "id"))
	}
	return out
}

func sortedCopy(a []string) []string {
	b := append([]string(nil), a...)
	sort.Strings(b)
	return b
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// eventually polls f every 10 ms until it is true or limit passes.
func eventually(limit time.Duration, f func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
