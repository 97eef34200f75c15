package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/engine"
)

// everyRoute is one valid request per /v1 route, with {ns} standing for
// the namespace so tests can vary it.
var everyRoute = []struct{ method, path, body string }{
	{"GET", "/v1/ns/{ns}/queues", ``},
	{"PUT", "/v1/ns/{ns}/queues/q", ``},
	{"GET", "/v1/ns/{ns}/queues/q", ``},
	{"DELETE", "/v1/ns/{ns}/queues/q", ``},
	{"POST", "/v1/ns/{ns}/queues/q/pause", ``},
	{"POST", "/v1/ns/{ns}/queues/q/resume", ``},
	{"POST", "/v1/ns/{ns}/queues/q/purge", ``},
	{"POST", "/v1/ns/{ns}/queues/q/jobs", `{"payload":1}`},
	{"POST", "/v1/ns/{ns}/queues/q/jobs/batch", `{"jobs":[{"payload":1}]}`},
	{"GET", "/v1/ns/{ns}/queues/q/jobs", ``},
	{"DELETE", "/v1/ns/{ns}/queues/q/jobs?state=ready", ``},
	{"GET", "/v1/ns/{ns}/queues/q/jobs/J1", ``},
	{"PATCH", "/v1/ns/{ns}/queues/q/jobs/J1", `{"priority":1}`},
	{"DELETE", "/v1/ns/{ns}/queues/q/jobs/J1", ``},
	{"POST", "/v1/ns/{ns}/queues/q/jobs/J1/ack", `{"receipt":"r"}`},
	{"POST", "/v1/ns/{ns}/queues/q/jobs/J1/nack", `{"receipt":"r"}`},
	{"POST", "/v1/ns/{ns}/queues/q/jobs/J1/touch", `{"receipt":"r"}`},
	{"POST", "/v1/ns/{ns}/queues/q/jobs/J1/bury", `{"receipt":"r"}`},
	{"GET", "/v1/ns/{ns}/queues/q/jobs/J1/result", ``},
	{"POST", "/v1/ns/{ns}/queues/q/take", ``},
	{"POST", "/v1/ns/{ns}/take", `{"queues":["q"]}`},
	{"POST", "/v1/ns/{ns}/queues/q/call", `{"payload":1}`},
	{"POST", "/v1/ns/{ns}/queues/q/dead/respawn", ``},
	{"DELETE", "/v1/ns/{ns}/queues/q/dead", ``},
	{"DELETE", "/v1/ns/{ns}/jobs?tag.a=b", ``},
	{"POST", "/v1/ns/{ns}/channels/c/publish", `{"data":1}`},
	{"GET", "/v1/ns/{ns}/channels/c/history", ``},
}

var everyAdminRoute = []struct{ method, path, body string }{
	{"POST", "/admin/namespaces", `{"name":"n"}`},
	{"GET", "/admin/namespaces", ``},
	{"POST", "/admin/namespaces/n/tokens", ``},
	{"DELETE", "/admin/namespaces/n/tokens/t", ``},
}

func TestEveryRouteUnavailable(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.err = fmt.Errorf("%w: shutting down", ErrUnavailable)
	e.f.tokens = map[string]string{"t": "n"}
	for _, rt := range everyRoute {
		r := e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "default"), rt.body)
		r.apiErr(http.StatusServiceUnavailable, "unavailable", "shutting down")
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("%s %s: Retry-After %q", rt.method, rt.path, r.header.Get("Retry-After"))
		}
	}
	for _, rt := range everyAdminRoute {
		e.admin(rt.method, rt.path, rt.body).apiErr(http.StatusServiceUnavailable, "unavailable")
	}
}

func TestEveryRouteChecksNamespace(t *testing.T) {
	e := newEnv(t, Options{})
	for _, rt := range everyRoute {
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "no%20spaces"), rt.body).badReq("namespace")
	}
	if len(e.f.order) != 0 {
		t.Fatalf("requests with a bad namespace reached the backend: %v", e.f.order)
	}
}

func TestEveryRouteChecksQueueAndID(t *testing.T) {
	e := newEnv(t, Options{})
	for _, rt := range everyRoute {
		p := strings.ReplaceAll(rt.path, "{ns}", "default")
		switch {
		case strings.Contains(p, "/jobs/J1"):
			e.main(rt.method, strings.Replace(p, "/J1", "/J%201", 1), rt.body).badReq("id")
			fallthrough
		case strings.Contains(p, "/queues/q"):
			e.main(rt.method, strings.Replace(p, "/queues/q", "/queues/q%21", 1), rt.body).badReq("queue")
		case strings.Contains(p, "/channels/c"):
			e.main(rt.method, strings.Replace(p, "/channels/c", "/channels/c%21", 1), rt.body).badReq("channel")
		}
	}
	if len(e.f.order) != 0 {
		t.Fatalf("requests with bad names reached the backend: %v", e.f.order)
	}
}

func TestEveryRouteForbidsOtherNamespaces(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.hasTokens = true
	e.f.tokens = map[string]string{"tok": "mine"}
	for _, rt := range everyRoute {
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "theirs"), rt.body, "Authorization", "Bearer tok").apiErr(403, "forbidden")
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "mine"), rt.body).apiErr(401, "unauthorized")
		r := e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "mine"), rt.body, "Authorization", "Bearer tok")
		if r.code >= 400 && r.code != http.StatusGatewayTimeout {
			t.Errorf("%s %s with its namespace's token: %d %s", rt.method, rt.path, r.code, r.body)
		}
	}
}

func TestEveryRouteBodyTooLarge(t *testing.T) {
	e := newEnv(t, Options{MaxBody: 8})
	for _, rt := range everyRoute {
		if rt.method == "GET" || rt.method == "DELETE" {
			continue
		}
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "default"), `{"x":"`+strings.Repeat("y", 16)+`"}`).apiErr(413, "payload_too_large")
	}
}

func TestEveryRouteRejectsUnknownFields(t *testing.T) {
	e := newEnv(t, Options{})
	for _, rt := range everyRoute {
		if rt.method == "GET" || rt.method == "DELETE" {
			continue
		}
		body := `{"bogus":1}`
		if rt.body != "" {
			body = strings.TrimSuffix(rt.body, "}") + `,"bogus":1}`
		}
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "default"), body).apiErr(400, "bad_request", `unknown field "bogus"`)
	}
	for _, rt := range everyAdminRoute {
		if rt.method != "POST" {
			continue
		}
		body := `{"bogus":1}`
		if rt.body != "" {
			body = strings.TrimSuffix(rt.body, "}") + `,"bogus":1}`
		}
		e.admin(rt.method, rt.path, body).apiErr(400, "bad_request", `unknown field "bogus"`)
	}
}

func TestEveryRouteNotFound(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.err = &engine.Error{Code: engine.CodeNamespaceNotFound, Message: "namespace default not found"}
	for _, rt := range everyRoute {
		e.main(rt.method, strings.ReplaceAll(rt.path, "{ns}", "default"), rt.body).apiErr(404, "namespace_not_found")
	}
}
