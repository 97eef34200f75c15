package httpapi

import (
	"net/http"
	"testing"
)

func TestAuthOpenMode(t *testing.T) {
	e := newEnv(t, Options{})
	e.main("GET", "/v1/ns/any/queues", ``).status(http.StatusOK)
	e.admin("GET", "/admin/namespaces", ``).status(http.StatusOK)
	// A header that is present but useless changes nothing in open mode.
	e.main("GET", "/v1/ns/any/queues", ``, "Authorization", "Bearer junk").status(http.StatusOK)
}

func TestAuthNamespaceTokens(t *testing.T) {
	e := newEnv(t, Options{})
	e.f.hasTokens = true
	e.f.tokens = map[string]string{"tok-a": "a", "tok-b": "b"}

	r := e.main("GET", "/v1/ns/a/queues", ``)
	r.apiErr(401, "unauthorized")
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Bearer nope").apiErr(401, "unauthorized")
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Basic dG9rLWE=").apiErr(401, "unauthorized")
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Bearer ").apiErr(401, "unauthorized")
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Bearer tok-a").status(http.StatusOK)
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "bearer tok-a").status(http.StatusOK)
	e.main("POST", "/v1/ns/b/queues/q/jobs", `{"payload":1}`, "Authorization", "Bearer tok-a").apiErr(403, "forbidden", `"a"`, `"b"`)
	if e.f.called("Put") {
		t.Fatal("a forbidden put reached the backend")
	}
	e.main("POST", "/v1/ns/b/queues/q/jobs", `{"payload":1}`, "Authorization", "Bearer tok-b").status(http.StatusCreated)
	// No admin token configured: the admin listener stays open.
	e.admin("GET", "/admin/namespaces", ``).status(http.StatusOK)
	// Health checks never need a token.
	e.main("GET", "/healthz", ``).status(http.StatusOK)
}

func TestAuthAdminToken(t *testing.T) {
	e := newEnv(t, Options{AdminToken: "adm"})
	e.f.tokens = map[string]string{"tok-a": "a"}
	e.f.hasTokens = true

	e.main("GET", "/v1/ns/a/queues", ``).apiErr(401, "unauthorized")
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Bearer adm").status(http.StatusOK)
	e.main("GET", "/v1/ns/zzz/queues", ``, "Authorization", "Bearer adm").status(http.StatusOK)
	e.main("GET", "/v1/ns/a/queues", ``, "Authorization", "Bearer admx").apiErr(401, "unauthorized")

	e.admin("GET", "/admin/namespaces", ``).apiErr(401, "unauthorized")
	e.admin("GET", "/admin/namespaces", ``, "Authorization", "Bearer wrong").apiErr(401, "unauthorized")
	e.admin("GET", "/admin/namespaces", ``, "Authorization", "Bearer tok-a").apiErr(403, "forbidden")
	e.admin("POST", "/admin/namespaces", `{"name":"x"}`, "Authorization", "Bearer tok-a").apiErr(403, "forbidden")
	e.admin("GET", "/admin/namespaces", ``, "Authorization", "Bearer adm").status(http.StatusOK)
	if e.f.called("CreateNamespace") {
		t.Fatal("a forbidden admin call reached the backend")
	}
	e.admin("GET", "/healthz", ``).status(http.StatusOK)
	e.admin("GET", "/readyz", ``).status(http.StatusOK)
}

func TestAuthAdminTokenAloneClosesMain(t *testing.T) {
	e := newEnv(t, Options{AdminToken: "adm"})
	e.main("GET", "/v1/ns/a/queues", ``).apiErr(401, "unauthorized")
}

func TestAuthRequired(t *testing.T) {
	e := newEnv(t, Options{RequireAuth: true})
	e.main("GET", "/v1/ns/a/queues", ``).apiErr(401, "unauthorized")
	e.main("GET", "/healthz", ``).status(http.StatusOK)
}

func TestAuthBeforeValidation(t *testing.T) {
	e := newEnv(t, Options{RequireAuth: true})
	// Without credentials nothing about the request is judged, not even its names.
	e.main("POST", "/v1/ns/bad!/queues/q/jobs", `{`).apiErr(401, "unauthorized")
}
