package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/chronoq/chronoq/internal/engine"
)

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
		msg    string
	}{
		{&engine.Error{Code: engine.CodeBadRequest, Field: "cron", Message: "bad spec"}, 400, "bad_request", "cron: bad spec"},
		{&engine.Error{Code: engine.CodeNamespaceNotFound, Message: "namespace x not found"}, 404, "namespace_not_found", "namespace x not found"},
		{&engine.Error{Code: engine.CodeQueueNotFound, Message: "m"}, 404, "queue_not_found", "m"},
		{&engine.Error{Code: engine.CodeJobNotFound, Message: "m"}, 404, "job_not_found", "m"},
		{&engine.Error{Code: engine.CodeConflict, Message: "m"}, 409, "conflict", "m"},
		{&engine.Error{Code: engine.CodePayloadTooLarge, Field: "payload", Message: "m"}, 413, "payload_too_large", "payload: m"},
		{&engine.Error{Code: engine.CodeQueueFull, Message: "queue full"}, 429, "queue_full", "queue full"},
		{&engine.Error{Code: engine.CodeUnavailable, Message: "log not writable"}, 503, "unavailable", "log not writable"},
		{&engine.Error{Code: engine.CodeForbidden, Message: "m"}, 403, "forbidden", "m"},
		{fmt.Errorf("put: %w", &engine.Error{Code: engine.CodeConflict, Message: "wrapped"}), 409, "conflict", "wrapped"},
		{fmt.Errorf("%w: fsync failed", ErrUnavailable), 503, "unavailable", "unavailable: fsync failed"},
		{errors.New("disk on fire at /var/lib/x"), 500, "internal", "internal error"},
		{&engine.Error{Code: "mystery", Message: "m"}, 500, "internal", "internal error"},
	} {
		e := newEnv(t, Options{})
		e.f.err = tc.err
		r := e.main("GET", "/v1/ns/default/queues", ``)
		r.apiErr(tc.status, tc.code)
		if msg := r.json()["error"].(map[string]any)["message"]; msg != tc.msg {
			t.Errorf("%v: message %q, want %q", tc.err, msg, tc.msg)
		}
		if got, want := r.header.Get("Retry-After"), map[bool]string{true: "1"}[tc.status == 503]; got != want {
			t.Errorf("%v: Retry-After %q, want %q", tc.err, got, want)
		}
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("GET", "/nope", ``).apiErr(404, "not_found")
	e.main("GET", "/v1/ns/default", ``).apiErr(404, "not_found")
	e.main("GET", "/v1/ns/default/queues/q/jobs/J1/explode", ``).apiErr(404, "not_found")
	e.admin("GET", "/admin/nope", ``).apiErr(404, "not_found")

	r := e.main("POST", "/v1/ns/default/queues/q", ``)
	r.apiErr(405, "method_not_allowed")
	if allow := r.header.Get("Allow"); allow == "" {
		t.Fatal("405 without Allow")
	}
	e.main("GET", "/v1/ns/default/queues/q/take", ``).apiErr(405, "method_not_allowed")
	e.main("PUT", "/v1/ns/default/queues/q/jobs/J1", ``).apiErr(405, "method_not_allowed")
	e.admin("PUT", "/admin/namespaces", ``).apiErr(405, "method_not_allowed")
}

func TestUnauthorizedBeatsNotFound(t *testing.T) {
	// Routing happens before auth, so an unknown route is 404 for everyone;
	// a known route without credentials is 401.
	e := newEnv(t, Options{RequireAuth: true})
	e.main("GET", "/nope", ``).apiErr(404, "not_found")
	e.main("GET", "/v1/ns/a/queues/q", ``).apiErr(401, "unauthorized")
}

func TestPanicRecovered(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.panicOnPeek = true
	e.main("GET", "/v1/ns/default/queues/q/jobs/J1", ``).apiErr(500, "internal")
	// The server keeps serving.
	e.main("GET", "/healthz", ``).status(http.StatusOK)
}

func TestPathCleaningRedirects(t *testing.T) {
	e := newEnv(t, Options{})
	r := e.main("GET", "/v1/ns/default//queues", ``)
	if r.code != http.StatusTemporaryRedirect && r.code != http.StatusMovedPermanently {
		t.Fatalf("status %d for an unclean path, want a redirect", r.code)
	}
}
