package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// fakeBackend records every call with its arguments and answers what the
// test put in its fields. err, when set, is returned by every call.
type fakeBackend struct {
	mu    sync.Mutex
	calls map[string][]any // method → arguments of its last call
	order []string

	err       error
	ready     error
	hasTokens bool
	tokens    map[string]string // token → namespace

	putResult   engine.PutResult
	batchResult []engine.PutResult
	queue       engine.QueueInfo
	created     bool
	queues      []engine.QueueInfo
	jobs        []engine.Job
	job         engine.Job
	listResult  engine.ListResult
	ackResult   engine.AckResult
	ackResults  []engine.AckResult
	nackState   engine.State
	until       time.Time
	count       int
	resultInfo  engine.ResultInfo
	done        bool
	offset      uint64
	epoch       string
	hist        pubsub.HistoryResult
	nsInfo      engine.NamespaceInfo
	namespaces  []engine.NamespaceInfo
	token       string
	panicOnPeek bool
}

func (f *fakeBackend) rec(name string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string][]any{}
	}
	f.calls[name] = args
	f.order = append(f.order, name)
	return f.err
}

// last returns the arguments of the last call of a method, failing the
// test if it was never called.
func (f *fakeBackend) last(t *testing.T, name string) []any {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	args, ok := f.calls[name]
	if !ok {
		t.Fatalf("backend method %s was not called (calls: %v)", name, f.order)
	}
	return args
}

func (f *fakeBackend) called(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.calls[name]
	return ok
}

func (f *fakeBackend) ConfigureNamespace(_ context.Context, name string, update func(engine.NamespaceConfig) (engine.NamespaceConfig, error)) (engine.NamespaceInfo, bool, error) {
	cfg, err := update(f.nsInfo.Config)
	if err != nil {
		return engine.NamespaceInfo{}, false, err
	}
	err = f.rec("ConfigureNamespace", name, cfg)
	return engine.NamespaceInfo{Name: name, Config: cfg}, f.created, err
}

func (f *fakeBackend) CreateNamespace(_ context.Context, name string, cfg engine.NamespaceConfig) (engine.NamespaceInfo, bool, error) {
	err := f.rec("CreateNamespace", name, cfg)
	info := f.nsInfo
	if info.Name == "" {
		info = engine.NamespaceInfo{Name: name, Config: cfg}
	}
	return info, f.created, err
}

func (f *fakeBackend) ListNamespaces(context.Context) ([]engine.NamespaceInfo, error) {
	return f.namespaces, f.rec("ListNamespaces")
}

func (f *fakeBackend) CreateToken(_ context.Context, ns, desc string) (string, error) {
	return f.token, f.rec("CreateToken", ns, desc)
}

func (f *fakeBackend) RevokeToken(_ context.Context, ns, tok string) error {
	return f.rec("RevokeToken", ns, tok)
}

func (f *fakeBackend) TokenNamespace(tok string) (string, bool) {
	ns, ok := f.tokens[tok]
	return ns, ok
}

func (f *fakeBackend) HasTokens() bool { return f.hasTokens }

func (f *fakeBackend) PutQueue(_ context.Context, ns, q string, p engine.QueuePatch) (engine.QueueInfo, bool, error) {
	return f.queue, f.created, f.rec("PutQueue", ns, q, p)
}

func (f *fakeBackend) GetQueue(_ context.Context, ns, q string) (engine.QueueInfo, error) {
	return f.queue, f.rec("GetQueue", ns, q)
}

func (f *fakeBackend) QueuePage(_ context.Context, ns string, req engine.QueueListRequest) (engine.QueueList, error) {
	return engine.QueueList{Queues: f.queues}, f.rec("QueuePage", ns, req)
}

func (f *fakeBackend) SetPaused(_ context.Context, ns, q string, paused bool) (engine.QueueInfo, error) {
	return f.queue, f.rec("SetPaused", ns, q, paused)
}

func (f *fakeBackend) PurgeQueue(_ context.Context, ns, q string) (int, error) {
	return f.count, f.rec("PurgeQueue", ns, q)
}

func (f *fakeBackend) DeleteQueue(_ context.Context, ns, q string) error {
	return f.rec("DeleteQueue", ns, q)
}

func (f *fakeBackend) Put(_ context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	return f.putResult, f.rec("Put", ns, q, req)
}

func (f *fakeBackend) PutBatch(_ context.Context, ns, q string, reqs []engine.PutRequest) ([]engine.PutResult, error) {
	return f.batchResult, f.rec("PutBatch", ns, q, reqs)
}

func (f *fakeBackend) Take(_ context.Context, ns string, req engine.TakeRequest, wait time.Duration) ([]engine.Job, error) {
	return f.jobs, f.rec("Take", ns, req, wait)
}

func (f *fakeBackend) Ack(_ context.Context, ns, q, id string, req engine.AckRequest) (engine.AckResult, error) {
	return f.ackResult, f.rec("Ack", ns, q, id, req)
}

func (f *fakeBackend) AckAndTake(_ context.Context, ns, q, id string, req engine.AckRequest, take engine.TakeRequest, wait time.Duration) (engine.AckResult, []engine.Job, error) {
	return f.ackResult, f.jobs, f.rec("AckAndTake", ns, q, id, req, take, wait)
}

func (f *fakeBackend) AckBatch(_ context.Context, ns, q string, items []engine.AckItem) ([]engine.AckResult, error) {
	return f.ackResults, f.rec("AckBatch", ns, q, items)
}

func (f *fakeBackend) Nack(_ context.Context, ns, q, id string, req engine.NackRequest) (engine.State, error) {
	return f.nackState, f.rec("Nack", ns, q, id, req)
}

func (f *fakeBackend) Touch(_ context.Context, ns, q, id string, req engine.TouchRequest) (time.Time, error) {
	return f.until, f.rec("Touch", ns, q, id, req)
}

func (f *fakeBackend) Bury(_ context.Context, ns, q, id string, req engine.BuryRequest) error {
	return f.rec("Bury", ns, q, id, req)
}

func (f *fakeBackend) Peek(_ context.Context, ns, q, id string) (engine.Job, error) {
	if f.panicOnPeek {
		panic("peek exploded")
	}
	return f.job, f.rec("Peek", ns, q, id)
}

func (f *fakeBackend) List(_ context.Context, ns, q string, req engine.ListRequest) (engine.ListResult, error) {
	return f.listResult, f.rec("List", ns, q, req)
}

func (f *fakeBackend) Update(_ context.Context, ns, q, id string, req engine.UpdateRequest) (engine.Job, error) {
	return f.job, f.rec("Update", ns, q, id, req)
}

func (f *fakeBackend) Cancel(_ context.Context, ns, q, id, receipt string) error {
	return f.rec("Cancel", ns, q, id, receipt)
}

func (f *fakeBackend) CancelByFilter(_ context.Context, ns, q string, flt engine.Filter) (int, error) {
	return f.count, f.rec("CancelByFilter", ns, q, flt)
}

func (f *fakeBackend) Respawn(_ context.Context, ns, q string, req engine.RespawnRequest) (int, error) {
	return f.count, f.rec("Respawn", ns, q, req)
}

func (f *fakeBackend) PurgeDead(_ context.Context, ns, q string) (int, error) {
	return f.count, f.rec("PurgeDead", ns, q)
}

func (f *fakeBackend) Result(_ context.Context, ns, q, id string, wait time.Duration) (engine.ResultInfo, bool, error) {
	return f.resultInfo, f.done, f.rec("Result", ns, q, id, wait)
}

func (f *fakeBackend) Call(_ context.Context, ns, q string, req engine.PutRequest, wait time.Duration) (engine.ResultInfo, bool, error) {
	return f.resultInfo, f.done, f.rec("Call", ns, q, req, wait)
}

func (f *fakeBackend) Publish(_ context.Context, ns, ch string, data []byte) (uint64, string, error) {
	return f.offset, f.epoch, f.rec("Publish", ns, ch, data)
}

func (f *fakeBackend) History(_ context.Context, ns, ch string, since uint64, epoch string, limit int, wait time.Duration) (pubsub.HistoryResult, error) {
	return f.hist, f.rec("History", ns, ch, since, epoch, limit, wait)
}

func (f *fakeBackend) Ready() error { return f.ready }

var _ Backend = (*fakeBackend)(nil)

// env is one server over a fake backend.
type env struct {
	t *testing.T
	f *fakeBackend
	s *Server
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &fakeBackend{}
	return &env{t: t, f: f, s: New(f, opts)}
}

// response is a finished request with its body read.
type response struct {
	t      *testing.T
	code   int
	header http.Header
	body   string
}

func (e *env) do(h http.Handler, method, path, body string, header ...string) *response {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	// A local client by default (the open mode answers only those); a
	// "Host" pair in header overrides it.
	req.Host = "127.0.0.1:8080"
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return &response{t: e.t, code: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

// main and admin send a request to one listener.
func (e *env) main(method, path, body string, header ...string) *response {
	e.t.Helper()
	return e.do(e.s.Main(), method, path, body, header...)
}

func (e *env) admin(method, path, body string, header ...string) *response {
	e.t.Helper()
	return e.do(e.s.Admin(), method, path, body, header...)
}

func (r *response) status(want int) *response {
	r.t.Helper()
	if r.code != want {
		r.t.Fatalf("status %d, want %d; body %s", r.code, want, r.body)
	}
	return r
}

// json decodes the body into a generic value for field checks.
func (r *response) json() map[string]any {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		r.t.Fatalf("body is not a JSON object: %v: %q", err, r.body)
	}
	return m
}

// exact compares the body with want after compacting both, so tests can
// write the expected JSON readably while still checking field order.
func (r *response) exact(want string) {
	r.t.Helper()
	got := strings.TrimSpace(r.body)
	cw := compactString(r.t, want)
	if got != cw {
		r.t.Fatalf("body\n got %s\nwant %s", got, cw)
	}
}

func compactString(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("bad expected JSON %q: %v", s, err)
	}
	return b.String()
}

// apiErr checks an error answer: status, code, and that the message
// contains every fragment.
func (r *response) apiErr(status int, code string, fragments ...string) {
	r.t.Helper()
	r.status(status)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		r.t.Fatalf("error body is not JSON: %v: %q", err, r.body)
	}
	if body.Error.Code != code {
		r.t.Fatalf("error code %q, want %q; body %s", body.Error.Code, code, r.body)
	}
	for _, f := range fragments {
		if !strings.Contains(body.Error.Message, f) {
			r.t.Fatalf("error message %q does not contain %q", body.Error.Message, f)
		}
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		r.t.Fatalf("Content-Type %q", ct)
	}
}

// badReq checks a 400 whose message starts with the field name, the way
// engine errors read ("field: message").
func (r *response) badReq(field string) {
	r.t.Helper()
	r.apiErr(http.StatusBadRequest, "bad_request")
	msg := r.json()["error"].(map[string]any)["message"].(string)
	if !strings.HasPrefix(msg, field+": ") {
		r.t.Fatalf("message %q does not name field %q first", msg, field)
	}
}
