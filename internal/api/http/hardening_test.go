package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/engine"
)

// TestOpenModeRefusesBrowsers: with no credential configured (the open,
// loopback-only mode) a web page may not drive the server: a blind
// cross-site text/plain POST, a DNS-rebound Host and a foreign Origin are
// refused on /v1 and on the admin listener, while curl -d (form type, no
// Origin) keeps working.
func TestOpenModeRefusesBrowsers(t *testing.T) {
	e := newEnv(t, Options{})
	purge := "/v1/ns/default/queues/q/purge"
	e.main("POST", purge, `{}`, "Content-Type", "text/plain", "Origin", "https://evil.example").
		apiErr(http.StatusForbidden, "forbidden", "cross-origin")
	e.main("POST", purge, `{}`, "Content-Type", "text/plain", "Sec-Fetch-Site", "same-origin").
		apiErr(http.StatusForbidden, "forbidden", "text/plain")
	e.main("POST", purge, `{}`, "Content-Type", "application/x-www-form-urlencoded", "Origin", "http://127.0.0.1:8080").
		apiErr(http.StatusForbidden, "forbidden", "application/x-www-form-urlencoded")
	e.main("GET", "/v1/ns/default/queues", ``, "Host", "rebound.evil.example:8080").
		apiErr(http.StatusForbidden, "forbidden", "rebound.evil.example", "DNS rebinding")
	e.admin("POST", "/admin/namespaces", `{"name":"x"}`, "Host", "rebound.evil.example").
		apiErr(http.StatusForbidden, "forbidden", "DNS rebinding")
	e.admin("POST", "/admin/namespaces", `{"name":"x"}`, "Origin", "https://evil.example", "Content-Type", "application/json").
		apiErr(http.StatusForbidden, "forbidden", "cross-origin")
	if _, called := e.f.calls["PurgeQueue"]; called {
		t.Fatal("a refused request reached the backend")
	}
	// curl -d '{...}': form type, no Origin.
	e.main("POST", purge, `{}`, "Content-Type", "application/x-www-form-urlencoded").status(http.StatusOK)
	e.main("POST", purge, `{}`, "Host", "localhost:7700", "Content-Type", "application/json").status(http.StatusOK)
	// Health probes are never refused.
	e.main("GET", "/healthz", ``, "Host", "10.0.0.5:8080").status(http.StatusOK)

	// With a token configured, the token is the protection: other Hosts
	// (a proxy, a public name) are served.
	a := newEnv(t, Options{AdminToken: "admin-token-0123456789"})
	a.main("POST", purge, `{}`, "Host", "queue.example.com", "Authorization", "Bearer admin-token-0123456789").status(http.StatusOK)
}

// TestAuthFailuresThrottled: after 10 failed authentications in a minute a
// source gets 429 with Retry-After, even with a good token.
func TestAuthFailuresThrottled(t *testing.T) {
	e := newEnv(t, Options{AdminToken: "admin-token-0123456789"})
	for i := 0; i < httpkit.DefaultFailures; i++ {
		e.main("GET", "/v1/ns/default/queues", ``, "Authorization", fmt.Sprintf("Bearer guess-%d", i)).
			apiErr(http.StatusUnauthorized, "unauthorized")
	}
	r := e.main("GET", "/v1/ns/default/queues", ``, "Authorization", "Bearer admin-token-0123456789")
	r.apiErr(http.StatusTooManyRequests, "rate_limited", "too many failed")
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	// The admin listener shares the brake.
	e.admin("GET", "/admin/namespaces", ``, "Authorization", "Bearer admin-token-0123456789").apiErr(http.StatusTooManyRequests, "rate_limited")
}

// TestInvalidUTF8Refused: every body that carries client strings refuses
// bytes that are not UTF-8 and unpaired surrogate escapes, naming the field,
// instead of storing them (they used to come back as invalid JSON).
func TestInvalidUTF8Refused(t *testing.T) {
	bad := []string{"\xff", `\ud800`, `\udc00x`, `\ud800\u0041`}
	cases := []struct{ method, path, body, field string }{
		{"POST", "/v1/ns/default/queues/q/jobs", `{"payload":"%s"}`, "payload"},
		{"POST", "/v1/ns/default/queues/q/jobs", `{"payload":{"k":["%s"]}}`, "payload"},
		{"POST", "/v1/ns/default/queues/q/jobs", `{"payload":1,"tags":{"a":"%s"}}`, "tags"},
		{"POST", "/v1/ns/default/queues/q/jobs", `{"payload":1,"key":"%s"}`, "key"},
		{"POST", "/v1/ns/default/queues/q/jobs/batch", `{"jobs":[{"payload":1},{"payload":"%s"}]}`, "jobs[1].payload"},
		{"POST", "/v1/ns/default/queues/q/jobs/J1/ack", `{"receipt":"r","result":"%s"}`, "result"},
		{"POST", "/v1/ns/default/queues/q/jobs/J1/nack", `{"receipt":"r","error":"%s"}`, "error"},
		{"POST", "/v1/ns/default/channels/c/publish", `{"data":"%s"}`, "data"},
		{"POST", "/v1/ns/default/queues/q/call", `{"payload":"%s"}`, "payload"},
		{"PATCH", "/v1/ns/default/queues/q/jobs/J1", `{"payload":"%s"}`, "payload"},
		{"PATCH", "/v1/ns/default/queues/q/jobs/J1", `{"tags":{"%s":"v"}}`, "tags"},
	}
	e := newEnv(t, Options{})
	for _, c := range cases {
		for _, b := range bad {
			e.main(c.method, c.path, fmt.Sprintf(c.body, b), "Content-Type", "application/json").badReq(c.field)
		}
	}
	// Valid text, surrogate pairs included, still passes.
	e.main("POST", "/v1/ns/default/queues/q/jobs", `{"payload":"h\u00e9 \ud83d\ude00 \\ud800 é"}`).status(http.StatusCreated)
}

// TestTakeQueueLimit: a multi-queue take names at most 100 queues; the
// decoder refuses more before the broker sees the request.
func TestTakeQueueLimit(t *testing.T) {
	e := newEnv(t, Options{})
	names := make([]string, engine.MaxTakeQueues+1)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fmt.Sprintf("q%d", i))
	}
	r := e.main("POST", "/v1/ns/default/take", `{"queues":[`+strings.Join(names, ",")+`]}`)
	r.badReq("queues")
	r.apiErr(http.StatusBadRequest, "bad_request", "at most 100")
	if _, called := e.f.calls["Take"]; called {
		t.Fatal("over-long take reached the backend")
	}
	e.main("POST", "/v1/ns/default/take", `{"queues":[`+strings.Join(names[:engine.MaxTakeQueues], ",")+`]}`).status(http.StatusOK)
}

// TestQueueListPaging: GET queues takes limit and cursor and answers
// next_cursor; the default page is 1000 queues.
func TestQueueListPaging(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("GET", "/v1/ns/default/queues", ``).status(http.StatusOK)
	if args := e.f.last(t, "QueuePage"); args[1] != (engine.QueueListRequest{Limit: 1000}) {
		t.Fatalf("default page %v", args)
	}
	e.main("GET", "/v1/ns/default/queues?limit=2&cursor=b", ``).status(http.StatusOK)
	if args := e.f.last(t, "QueuePage"); args[1] != (engine.QueueListRequest{Limit: 2, Cursor: "b"}) {
		t.Fatalf("page %v", args)
	}
	e.main("GET", "/v1/ns/default/queues?limit=0", ``).badReq("limit")
	e.main("GET", "/v1/ns/default/queues?limit=1001", ``).badReq("limit")
}

// TestBodyBudget: beyond the shared budget of in-flight body bytes a
// request is answered 503 with Retry-After, before it holds more memory.
func TestBodyBudget(t *testing.T) {
	e := newEnv(t, Options{Bodies: httpkit.NewBodyBudget(64)})
	r := e.main("POST", "/v1/ns/default/queues/q/jobs", `{"payload":"`+strings.Repeat("x", 100)+`"}`)
	r.apiErr(http.StatusServiceUnavailable, "unavailable", "too many request bodies")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	e.main("POST", "/v1/ns/default/queues/q/jobs", `{"payload":1}`).status(http.StatusCreated)
}
