// Package lmstfy_test holds the black-box tests of chronoq's lmstfy API:
// each test starts the real server (internal/server, as cmd/chronoq does)
// on a temporary data directory and loopback ports, and talks lmstfy's
// wire protocol to its main and admin listeners over HTTP.
package lmstfy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/api/lmstfy"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
	"github.com/chronoq/chronoq/internal/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// ulidRe is a server job id: a 26-character ULID.
var ulidRe = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

// fakeClock is a broker clock that moves only when told, so TTR, TTL and
// dead-letter deadlines are checked to the millisecond without sleeping.
// Tests using it never long-poll: a parked consume would wait on it.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

type envOpts struct {
	adminToken  string
	requireAuth bool
	fake        bool // use a fakeClock
	sync        wal.SyncPolicy
	maxWait     time.Duration
}

type env struct {
	t     *testing.T
	b     *broker.Broker
	srv   *lmstfy.Server
	main  listener
	admin listener
	clock *fakeClock
	cli   *http.Client
}

// listener is one of the server's HTTP listeners.
type listener struct{ URL string }

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t}
	cfg := server.Default()
	cfg.DataDir, cfg.Logger, cfg.Sync = t.TempDir(), quiet, o.sync
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.AdminToken, cfg.RequireAuth = o.adminToken, o.requireAuth
	cfg.Tune.Lmstfy = func(lo *lmstfy.Options) {
		if o.maxWait > 0 {
			lo.MaxWait = o.maxWait
		}
		// The auth tests fail on purpose from one address; the brake on
		// failed authentication has its own tests (internal/api/httpkit).
		lo.Failures = httpkit.NewFailureLimiter(1<<20, 0, 0, nil)
	}
	if o.fake {
		e.clock = &fakeClock{}
		e.clock.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
		cfg.Clock = e.clock.now
	}
	s := servertest.Start(t, cfg, 30*time.Second)
	e.b, e.srv = s.Broker(), s.Lmstfy()
	e.main.URL, e.admin.URL = servertest.URL(s, server.HTTP), servertest.URL(s, server.Admin)
	e.cli = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

// resp is one answer.
type resp struct {
	status int
	header http.Header
	raw    []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.raw, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %q", r.status, err, r.raw)
	}
	return m
}

func (e *env) req(base, method, path string, hdr map[string]string, body []byte) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.cli.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading answer: %v", method, path, err)
	}
	return resp{res.StatusCode, res.Header, raw}
}

// api calls the main listener with hdr (may be nil).
func (e *env) api(method, path string, hdr map[string]string, body []byte) resp {
	e.t.Helper()
	return e.req(e.main.URL, method, path, hdr, body)
}

// adm calls the admin listener.
func (e *env) adm(method, path string, hdr map[string]string, body []byte) resp {
	e.t.Helper()
	return e.req(e.admin.URL, method, path, hdr, body)
}

// expect checks the status and, when want is not "", the exact body.
func expect(t *testing.T, what string, r resp, status int, want string) {
	t.Helper()
	if r.status != status || (want != "" && string(r.raw) != want) {
		if want == "" {
			want = "(any)"
		}
		t.Errorf("%s: got %d %s, want %d %s", what, r.status, r.raw, status, want)
	}
}

// errBody is lmstfy's error answer for msg.
func errBody(msg string) string { return `{"error":"` + msg + `"}` }

// publish puts data into ns/q with the given query and answers the job id.
func (e *env) publish(ns, q, query string, hdr map[string]string, data string) string {
	e.t.Helper()
	r := e.api("PUT", "/api/"+ns+"/"+q+query, hdr, []byte(data))
	if r.status != 201 {
		e.t.Fatalf("publish to %s/%s%s: %d %s", ns, q, query, r.status, r.raw)
	}
	m := r.json(e.t)
	id, _ := m["job_id"].(string)
	if !ulidRe.MatchString(id) || m["msg"] != "published" || len(m) != 2 {
		e.t.Fatalf("publish answer %s: want {job_id: <ULID>, msg: published}", r.raw)
	}
	return id
}

// job is lmstfy's job object.
type job struct {
	Msg         *string           `json:"msg"`
	Namespace   string            `json:"namespace"`
	Queue       string            `json:"queue"`
	ID          string            `json:"job_id"`
	Data        []byte            `json:"data"`
	TTL         int64             `json:"ttl"`
	ElapsedMS   int64             `json:"elapsed_ms"`
	RemainTries int64             `json:"remain_tries"`
	Attributes  map[string]string `json:"attributes"`
}

// consume answers the job of a consume, or nil on 404 "no job available".
func (e *env) consume(ns, queues, query string, hdr map[string]string) *job {
	e.t.Helper()
	r := e.api("GET", "/api/"+ns+"/"+queues+query, hdr, nil)
	switch r.status {
	case 404:
		if string(r.raw) != `{"msg":"no job available"}` {
			e.t.Fatalf("empty consume of %s: body %s", queues, r.raw)
		}
		return nil
	case 200:
	default:
		e.t.Fatalf("consume %s%s: %d %s", queues, query, r.status, r.raw)
	}
	var j job
	if err := json.Unmarshal(r.raw, &j); err != nil {
		e.t.Fatalf("consume %s: %v: %s", queues, err, r.raw)
	}
	if j.Msg == nil || *j.Msg != "new job" {
		e.t.Errorf("consume answer %s: want msg \"new job\"", r.raw)
	}
	return &j
}

// ack deletes a job and expects 204.
func (e *env) ack(ns, q, id string, hdr map[string]string) {
	e.t.Helper()
	r := e.api("DELETE", "/api/"+ns+"/"+q+"/job/"+id, hdr, nil)
	expect(e.t, "ack "+id, r, 204, "")
	if len(r.raw) != 0 {
		e.t.Errorf("ack answered a body: %q", r.raw)
	}
}

// size reads /size or /deadletter/size.
func (e *env) size(ns, q, which string) int64 {
	e.t.Helper()
	r := e.api("GET", "/api/"+ns+"/"+q+which, nil, nil)
	if r.status != 200 {
		e.t.Fatalf("GET %s of %s/%s: %d %s", which, ns, q, r.status, r.raw)
	}
	var s struct {
		Namespace, Queue string
		Size             int64
	}
	if err := json.Unmarshal(r.raw, &s); err != nil || s.Namespace != ns || s.Queue != q {
		e.t.Fatalf("GET %s: %s", which, r.raw)
	}
	return s.Size
}

// newToken creates a token of ns on the admin listener.
func (e *env) newToken(ns, query string, hdr map[string]string) string {
	e.t.Helper()
	r := e.adm("POST", "/token/"+ns+"?description=test"+query, hdr, nil)
	if r.status != 201 {
		e.t.Fatalf("POST /token/%s: %d %s", ns, r.status, r.raw)
	}
	tok, _ := r.json(e.t)["token"].(string)
	if tok == "" {
		e.t.Fatalf("POST /token/%s: %s", ns, r.raw)
	}
	return tok
}

func tokenHdr(tok string) map[string]string { return map[string]string{"X-Token": tok} }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
