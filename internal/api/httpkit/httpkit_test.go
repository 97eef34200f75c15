package httpkit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

func TestFailureLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewFailureLimiter(3, time.Minute, 2, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		if _, b := l.Blocked("10.0.0.1:5000"); b {
			t.Fatalf("blocked after %d failures", i)
		}
		l.Fail("10.0.0.1:5000")
	}
	wait, b := l.Blocked("10.0.0.1:6000") // another port, same source
	if !b || wait != time.Minute {
		t.Fatalf("after 3 failures: blocked %v, wait %v", b, wait)
	}
	if _, b := l.Blocked("10.0.0.2:1"); b {
		t.Fatal("another source blocked")
	}
	now = now.Add(time.Minute)
	if _, b := l.Blocked("10.0.0.1:5000"); b {
		t.Fatal("still blocked after the window")
	}
	// IPv6 counts per /64.
	for i := 0; i < 3; i++ {
		l.Fail("[2001:db8::" + string(rune('1'+i)) + "]:1")
	}
	if _, b := l.Blocked("[2001:db8::ffff]:1"); !b {
		t.Fatal("an IPv6 /64 escapes by changing addresses")
	}
	// Beyond the table's size, new sources share the overflow window: the
	// table never grows, and churning addresses does not escape.
	for i := 0; i < 10; i++ {
		l.Fail("192.0.2." + string(rune('0'+i)) + ":1")
	}
	if len(l.m) > 2 {
		t.Fatalf("table holds %d sources, limit 2", len(l.m))
	}
	if _, b := l.Blocked("198.51.100.1:1"); !b {
		t.Fatal("a new source escapes the overflow window")
	}
}

func req(method, host string, header ...string) *http.Request {
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{}`)
	}
	r := httptest.NewRequest(method, "/v1/ns/default/queues/q/purge", body)
	r.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestGuard(t *testing.T) {
	allowed := []*http.Request{
		req("POST", "127.0.0.1:8080"),
		req("POST", "localhost:8080"),
		req("POST", "LOCALHOST"),
		req("POST", "127.1.2.3"),
		req("POST", "[::1]:8080"),
		req("POST", "127.0.0.1:8080", "Content-Type", "application/x-www-form-urlencoded"), // curl -d
		req("POST", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080", "Content-Type", "application/json"),
		req("GET", "127.0.0.1:8080", "Sec-Fetch-Site", "none"),
	}
	for _, r := range allowed {
		if msg := Guard(r); msg != "" {
			t.Errorf("%s Host %s %v refused: %s", r.Method, r.Host, r.Header, msg)
		}
	}
	refused := []struct {
		r    *http.Request
		want string
	}{
		{req("POST", "evil.example:8080"), "Host"},
		{req("GET", "attacker.test"), "Host"},
		{req("POST", "10.1.2.3:8080"), "Host"},
		{req("POST", "127.0.0.1:8080", "Origin", "https://evil.example", "Content-Type", "application/json"), "cross-origin"},
		{req("POST", "127.0.0.1:8080", "Origin", "null"), "cross-origin"},
		{req("GET", "127.0.0.1:8080", "Sec-Fetch-Site", "cross-site"), "cross-site"},
		{req("POST", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080", "Content-Type", "text/plain"), "text/plain"},
		{req("POST", "127.0.0.1:8080", "Sec-Fetch-Site", "same-origin", "Content-Type", "multipart/form-data; boundary=x"), "multipart/form-data"},
		{req("POST", "127.0.0.1:8080", "Sec-Fetch-Site", "same-origin"), "none"},
	}
	for _, c := range refused {
		msg := Guard(c.r)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s Host %s %v: %q, want a refusal naming %q", c.r.Method, c.r.Host, c.r.Header, msg, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	toks := map[string]string{"ns-token-aaaaaaaaaa": "a"}
	now := time.Now()
	a := &Auth{AdminToken: "admin-token-0123456789",
		HasTokens:      func() bool { return true },
		TokenNamespace: func(tok string) (string, bool) { ns, ok := toks[tok]; return ns, ok },
		Failures:       NewFailureLimiter(2, time.Minute, 0, func() time.Time { return now })}
	r := req("GET", "127.0.0.1")
	for _, c := range []struct {
		need Need
		ns   string
		tok  string
		want Reason
	}{
		{NeedNamespace, "a", "", Missing},
		{NeedNamespace, "a", "admin-token-0123456789", Allowed},
		{NeedNamespace, "a", "ns-token-aaaaaaaaaa", Allowed},
		{NeedNamespace, "b", "ns-token-aaaaaaaaaa", WrongNamespace},
		{NeedAdmin, "", "ns-token-aaaaaaaaaa", NotAdmin},
		{NeedAdmin, "", "admin-token-0123456789", Allowed},
		{NeedNamespace, "a", "guess-1", Unknown},
		{NeedNamespace, "a", "guess-2", Unknown},
		// two failures: the source is braked, even with a good token
		{NeedNamespace, "a", "admin-token-0123456789", Throttled},
	} {
		if v := a.Decide(r, c.need, c.ns, c.tok); v.Reason != c.want {
			t.Fatalf("need %v ns %q token %q: reason %v, want %v", c.need, c.ns, c.tok, v.Reason, c.want)
		}
	}
	// Open mode: no credential asked, but the browser guard applies.
	open := &Auth{HasTokens: func() bool { return false }}
	if v := open.Decide(req("POST", "127.0.0.1"), NeedNamespace, "a"); !v.OK() {
		t.Fatalf("open mode refused a local call: %+v", v)
	}
	if v := open.Decide(req("POST", "rebound.example"), NeedAdmin, ""); v.Reason != Foreign {
		t.Fatalf("open mode answered a foreign Host: %+v", v)
	}
}

func TestBodyBudget(t *testing.T) {
	b := NewBodyBudget(100)
	var readErr error
	release := make(chan struct{})
	entered := make(chan struct{})
	h := b.Wrap(1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		if r.Header.Get("X-Hold") != "" {
			close(entered)
			<-release
		}
	}))
	// A body within the budget is read, and its bytes are held until the
	// handler returns.
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 80)))
		r.Header.Set("X-Hold", "1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-entered
	if b.InUse() != 80 {
		t.Fatalf("in use %d, want 80", b.InUse())
	}
	// A second body that does not fit is refused with an unavailable error.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("y", 40))))
	var ee *engine.Error
	if !errors.As(readErr, &ee) || ee.Code != engine.CodeUnavailable {
		t.Fatalf("second body: %v, want an unavailable error", readErr)
	}
	close(release)
	<-done
	if b.InUse() != 0 {
		t.Fatalf("in use %d after both requests ended", b.InUse())
	}
	// Unknown length: reserved in chunks, all released.
	r := httptest.NewRequest("POST", "/", io.MultiReader(strings.NewReader(strings.Repeat("z", 50))))
	r.ContentLength = -1
	big := NewBodyBudget(1 << 20)
	big.Wrap(1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) != 50 {
			t.Errorf("chunked body: %d bytes, %v", len(body), err)
		}
	})).ServeHTTP(httptest.NewRecorder(), r)
	if big.InUse() != 0 {
		t.Fatalf("in use %d after a chunked body", big.InUse())
	}
}
