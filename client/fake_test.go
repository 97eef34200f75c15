package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"
)

// recorded is one request the fake server saw.
type recorded struct {
	Method string
	Path   string // escaped path
	Query  string
	Body   []byte
	Header http.Header
}

// fake is an httptest server answering with whatever reply returns; it
// records every request.
type fake struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []recorded
	reply func(r *recorded) (status int, body string)
}

func newFake(t *testing.T, reply func(r *recorded) (int, string)) *fake {
	t.Helper()
	f := &fake{t: t, reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: body, Header: r.Header.Clone()}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		status, out := f.reply(&rec)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "0")
		}
		if out != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fake) last() recorded {
	f.t.Helper()
	rs := f.requests()
	if len(rs) == 0 {
		f.t.Fatal("the fake server saw no request")
	}
	return rs[len(rs)-1]
}

// client returns a client of the fake with fast retries.
func (f *fake) client(opts ...Option) *Client {
	return New(f.srv.URL, append([]Option{WithRetries(3, time.Millisecond)}, opts...)...)
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: body\n got  %s\n want %s", what, got, want)
	}
}

// bodyMap decodes a recorded JSON body.
func bodyMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return m
}

const queueJSON = `{"namespace":"default","name":"emails",
 "config":{"default_ttr":"1m0s","default_tries":5,"default_ttl":"0s","default_priority":1024,
           "max_jobs":0,"max_payload":1048576,"dedup_window":"15m0s","retain_results":"1h0m0s",
           "key_mode":"strict","backoff":{"initial":"2s","max":"10m0s","multiplier":2,"jitter":0.1}},
 "paused":false,
 "counts":{"delayed":1,"ready":2,"blocked":3,"reserved":4,"dead":5,"completed":6},
 "oldest_ready_age":"1.5s"}`

const takenJobJSON = `{"id":"01JD3W0Q8Z6M1N2P3Q4R5S6T7V","namespace":"default","queue":"emails","state":"reserved",
  "payload":{"to":"a@b.c"},"priority":1024,"key":"user:42","tags":{"user_id":"42"},
  "created_at":"2026-11-22T10:00:00.000Z","activate_at":"2026-11-22T10:00:10.000Z",
  "expire_at":"2026-11-22T11:00:00.000Z","ttr":"30s","tries":25,"attempt":1,
  "receipt":"01JD3W1A2B3C4D5E6F7G8H9J0K","reserved_until":"2026-11-22T10:00:40.000Z",
  "last_error":"smtp timeout","reply_to":"results","cron":"*/5 * * * *"}`
