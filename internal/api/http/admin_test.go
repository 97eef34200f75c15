package httpapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/chronoq/chronoq/internal/engine"
)

func TestCreateNamespace(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.created = true
	e.admin("POST", "/admin/namespaces", `{"name":"billing","auto_create_queues":false}`).
		status(http.StatusCreated).exact(`{"name":"billing","auto_create_queues":false}`)
	if args := e.f.last(t, "CreateNamespace"); args[0] != "billing" || args[1].(engine.NamespaceConfig).AutoCreateQueues {
		t.Fatalf("create %v", args)
	}
	e.admin("POST", "/admin/namespaces", `{"name":"billing"}`).status(http.StatusCreated).exact(`{"name":"billing","auto_create_queues":true}`)
	e.f.created = false
	e.admin("POST", "/admin/namespaces", `{"name":"billing"}`).status(http.StatusOK)

	e.admin("POST", "/admin/namespaces", `{}`).badReq("name")
	e.admin("POST", "/admin/namespaces", `{"name":"bad name"}`).badReq("name")
	e.admin("POST", "/admin/namespaces", `{"name":"a","auto_create_queues":"yes"}`).badReq("auto_create_queues")
	e.admin("POST", "/admin/namespaces", `{"name":"a","tokens":[]}`).apiErr(400, "bad_request", `unknown field "tokens"`)
}

func TestListNamespaces(t *testing.T) {
	e := newEnv(t, Options{})
	e.admin("GET", "/admin/namespaces", ``).status(http.StatusOK).exact(`{"namespaces":[]}`)
	e.f.namespaces = []engine.NamespaceInfo{{Name: "default", Config: engine.NamespaceConfig{AutoCreateQueues: true}}, {Name: "b"}}
	e.admin("GET", "/admin/namespaces", ``).status(http.StatusOK).exact(
		`{"namespaces":[{"name":"default","auto_create_queues":true},{"name":"b","auto_create_queues":false}]}`)
}

// TestRevokeUnknownToken: revoking a token that does not exist (or belongs
// to another namespace) is 404, so a typo does not read as success.
func TestRevokeUnknownToken(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.tokens = map[string]string{"tok-1": "billing"}
	e.admin("DELETE", "/admin/namespaces/billing/tokens/nope", ``).apiErr(http.StatusNotFound, "not_found", "no such token")
	e.admin("DELETE", "/admin/namespaces/other/tokens/tok-1", ``).apiErr(http.StatusNotFound, "not_found")
	if args, ok := e.f.calls["RevokeToken"]; ok {
		t.Fatalf("backend asked to revoke an unknown token: %v", args)
	}
	e.admin("DELETE", "/admin/namespaces/billing/tokens/tok-1", ``).status(http.StatusNoContent)
}

func TestTokens(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.token = "tok-1"
	e.admin("POST", "/admin/namespaces/billing/tokens", `{"description":"ci"}`).status(http.StatusCreated).exact(`{"token":"tok-1"}`)
	if args := e.f.last(t, "CreateToken"); args[0] != "billing" || args[1] != "ci" {
		t.Fatalf("create token %v", args)
	}
	e.admin("POST", "/admin/namespaces/billing/tokens", ``).status(http.StatusCreated)
	e.admin("POST", "/admin/namespaces/billing/tokens", `{"description":1}`).badReq("description")
	e.admin("POST", "/admin/namespaces/bad!/tokens", ``).badReq("namespace")
	e.f.tokens = map[string]string{"tok-1": "billing"}
	r := e.admin("DELETE", "/admin/namespaces/billing/tokens/tok-1", ``).status(http.StatusNoContent)
	if r.body != "" {
		t.Fatalf("204 with body %q", r.body)
	}
	if args := e.f.last(t, "RevokeToken"); args[0] != "billing" || args[1] != "tok-1" {
		t.Fatalf("revoke %v", args)
	}
	e.f.err = &engine.Error{Code: engine.CodeNamespaceNotFound, Message: "namespace billing not found"}
	e.admin("POST", "/admin/namespaces/billing/tokens", ``).apiErr(404, "namespace_not_found")
}

func TestHealth(t *testing.T) {
	e := newEnv(t, Options{AdminToken: "adm", RequireAuth: true})
	e.main("GET", "/healthz", ``).status(http.StatusOK).exact(`{"status":"ok"}`)
	e.admin("GET", "/healthz", ``).status(http.StatusOK).exact(`{"status":"ok"}`)
	e.admin("GET", "/readyz", ``).status(http.StatusOK).exact(`{"status":"ready"}`)
	e.f.ready = errors.New("recovering")
	r := e.admin("GET", "/readyz", ``)
	r.apiErr(503, "unavailable", "recovering")
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	e.main("GET", "/readyz", ``).apiErr(404, "not_found")
}

func TestAdminRoutesNotOnMain(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("GET", "/admin/namespaces", ``).apiErr(404, "not_found")
	e.main("GET", "/debug/pprof/", ``).apiErr(404, "not_found")
	e.admin("GET", "/v1/ns/default/queues", ``).apiErr(404, "not_found")
}

func TestPprofAndMetrics(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("up 1\n")) })
	e := newEnv(t, Options{AdminToken: "adm", Metrics: metrics})
	e.admin("GET", "/debug/pprof/", ``).apiErr(401, "unauthorized")
	r := e.admin("GET", "/debug/pprof/", ``, "Authorization", "Bearer adm").status(http.StatusOK)
	if len(r.body) == 0 {
		t.Fatal("empty pprof index")
	}
	e.admin("GET", "/debug/pprof/cmdline", ``, "Authorization", "Bearer adm").status(http.StatusOK)
	e.admin("GET", "/metrics", ``).apiErr(401, "unauthorized")
	if r := e.admin("GET", "/metrics", ``, "Authorization", "Bearer adm").status(http.StatusOK); r.body != "up 1\n" {
		t.Fatalf("metrics %q", r.body)
	}
	newEnv(t, Options{}).admin("GET", "/metrics", ``).apiErr(404, "not_found")
}
