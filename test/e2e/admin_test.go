package e2e

import (
	"encoding/base64"
	"net/url"
	"testing"
)

// TestAdmin covers the admin listener without an admin token: health,
// namespaces, tokens, metrics, and unknown routes on the HTTP listener.
func TestAdmin(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())

	t.Run("health", func(t *testing.T) {
		s := srv.as(t)
		if st, _, raw := s.do("GET", "/healthz", nil); st != 200 {
			t.Errorf("GET /healthz on the HTTP listener: %d %s", st, raw)
		}
		if st, _, raw := s.admin("GET", "/healthz", nil); st != 200 {
			t.Errorf("GET /healthz on the admin listener: %d %s", st, raw)
		}
		if st, _, raw := s.admin("GET", "/readyz", nil); st != 200 {
			t.Errorf("GET /readyz on the admin listener: %d %s", st, raw)
		}
		if st, _, raw := s.admin("GET", "/metrics", nil); st != 200 || len(raw) == 0 {
			t.Errorf("GET /metrics: %d (%d bytes)", st, len(raw))
		}
		if st, _, _ := s.admin("GET", "/debug/pprof/", nil); st != 200 {
			t.Errorf("GET /debug/pprof/: %d", st)
		}
	})

	t.Run("unknown_route", func(t *testing.T) {
		s := srv.as(t)
		for _, p := range []string{"/v1/nope", "/nope", "/v1/ns/default/queues/q/jobs/x/frobnicate"} {
			st, m, raw := s.do("GET", p, nil)
			if st != 404 {
				t.Errorf("GET %s: %d, want 404", p, st)
			}
			if jstr(m, "error", "code") == "" || jstr(m, "error", "message") == "" {
				t.Errorf("GET %s: body %s, want {\"error\":{\"code\",\"message\"}}", p, trunc(raw))
			}
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		s := srv.as(t)
		s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "billing", "auto_create_queues": true})
		s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "manual", "auto_create_queues": false})
		m, raw := s.expectAdmin(200, "GET", "/admin/namespaces", nil)
		got := map[string]any{}
		for _, e := range jarr(m, "namespaces") {
			em, _ := e.(map[string]any)
			if _, ok := em["auto_create_queues"].(bool); !ok || jstr(em, "name") == "" {
				t.Errorf("namespace entry %v, want {name, auto_create_queues}", e)
			}
			got[jstr(em, "name")] = em["auto_create_queues"]
		}
		want := map[string]any{"default": true, "billing": true, "manual": false}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("namespaces listing %s: %s has auto_create_queues %v, want %v", trunc(raw), k, got[k], v)
			}
		}
		if len(got) != 3 {
			t.Errorf("namespaces listing has %d entries, want 3: %s", len(got), trunc(raw))
		}
		st, em, eraw := s.admin("POST", "/admin/namespaces", map[string]any{"name": "bad name!"})
		wantError(t, "create namespace with a bad name", st, em, eraw, 400, "bad_request", "name")
		st, em, eraw = s.admin("POST", "/admin/namespaces", map[string]any{"name": "x", "bogus": 1})
		wantError(t, "create namespace with an unknown field", st, em, eraw, 400, "bad_request", "bogus")
		// The new namespace works.
		s.expect(201, "POST", nsqp("billing", "invoices")+"/jobs", map[string]any{"payload": 1})
	})

	t.Run("tokens", func(t *testing.T) {
		s := srv.as(t)
		st, em, eraw := s.admin("POST", "/admin/namespaces/no-such-ns/tokens", map[string]any{"description": "x"})
		wantError(t, "token for an unknown namespace", st, em, eraw, 404, "namespace_not_found", "")
		s.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "tok-ns", "auto_create_queues": true})
		m, _ := s.expectAdmin(201, "POST", "/admin/namespaces/tok-ns/tokens", map[string]any{"description": "ci"})
		tok := jstr(m, "token")
		if tok == "" {
			t.Fatalf("token answer %v", m)
		}
		m, _ = s.expectAdmin(201, "POST", "/admin/namespaces/tok-ns/tokens", map[string]any{"description": "second"})
		tok2 := jstr(m, "token")
		if tok2 == "" || tok2 == tok {
			t.Fatalf("second token %q (first %q)", tok2, tok)
		}
		s.withToken(tok).expect(201, "POST", nsqp("tok-ns", "q")+"/jobs", map[string]any{"payload": 1})
		st, _, raw := s.admin("DELETE", "/admin/namespaces/tok-ns/tokens/"+url.PathEscape(tok), nil)
		if st != 204 {
			t.Errorf("revoke token: %d %s, want 204", st, raw)
		}
		st, em, eraw = s.withToken(tok).do("POST", nsqp("tok-ns", "q")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "revoked token (another token still exists)", st, em, eraw, 401, "unauthorized", "")
		s.withToken(tok2).expect(201, "POST", nsqp("tok-ns", "q")+"/jobs", map[string]any{"payload": 1})
	})
}

// TestAuth runs a server with --admin-token and checks 401/403 (docs/api.md, Auth).
func TestAuth(t *testing.T) {
	t.Parallel()
	const adminTok = "admin-s3cret-token"
	srv := startServer(t, t.TempDir(), "--admin-token", adminTok)

	t.Run("health_needs_no_token", func(t *testing.T) {
		s := srv.as(t)
		if st, _, _ := s.do("GET", "/healthz", nil); st != 200 {
			t.Errorf("/healthz on HTTP: %d", st)
		}
		if st, _, _ := s.admin("GET", "/healthz", nil); st != 200 {
			t.Errorf("/healthz on admin: %d", st)
		}
		if st, _, _ := s.admin("GET", "/readyz", nil); st != 200 {
			t.Errorf("/readyz on admin: %d", st)
		}
	})

	t.Run("v1_without_token_before_namespace_tokens", func(t *testing.T) {
		s := srv.as(t)
		st, m, raw := s.do("POST", jobsp("auth-q"), map[string]any{"payload": 1})
		wantError(t, "put without token while an admin token is configured", st, m, raw, 401, "unauthorized", "")
	})

	t.Run("admin_needs_admin_token", func(t *testing.T) {
		s := srv.as(t)
		st, m, raw := s.admin("GET", "/admin/namespaces", nil)
		wantError(t, "admin list without token", st, m, raw, 401, "unauthorized", "")
		st, m, raw = s.admin("POST", "/admin/namespaces", map[string]any{"name": "sneaky"})
		wantError(t, "admin create without token", st, m, raw, 401, "unauthorized", "")
		st, m, raw = s.withToken("wrong").admin("GET", "/admin/namespaces", nil)
		wantError(t, "admin list with a wrong token", st, m, raw, 401, "unauthorized", "")
		a := s.withToken(adminTok)
		a.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "alpha", "auto_create_queues": true})
		a.expectAdmin(201, "POST", "/admin/namespaces", map[string]any{"name": "beta", "auto_create_queues": true})
		m, _ = a.expectAdmin(200, "GET", "/admin/namespaces", nil)
		names := map[string]bool{}
		for _, e := range jarr(m, "namespaces") {
			names[jstr(e, "name")] = true
		}
		if !names["alpha"] || !names["beta"] || !names["default"] || names["sneaky"] {
			t.Errorf("namespaces %v", m)
		}
	})

	t.Run("namespace_tokens", func(t *testing.T) {
		s := srv.as(t)
		a := s.withToken(adminTok)
		m, _ := a.expectAdmin(201, "POST", "/admin/namespaces/alpha/tokens", map[string]any{"description": "alpha worker"})
		tok := jstr(m, "token")
		if tok == "" {
			t.Fatalf("token answer %v", m)
		}
		if st, _, _ := s.admin("POST", "/admin/namespaces/alpha/tokens", map[string]any{}); st != 401 {
			t.Errorf("create token without the admin token: %d, want 401", st)
		}
		al := s.withToken(tok)
		al.expect(201, "POST", nsqp("alpha", "work")+"/jobs", map[string]any{"payload": 1})
		if jobs := jarr(func() map[string]any {
			m, _ := al.expect(200, "POST", nsqp("alpha", "work")+"/take", map[string]any{"max": 5})
			return m
		}(), "jobs"); len(jobs) != 1 {
			t.Errorf("take with the namespace token: %v", jobs)
		}
		st, em, raw := al.do("POST", nsqp("beta", "work")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "alpha token on beta", st, em, raw, 403, "forbidden", "")
		st, em, raw = al.do("GET", "/v1/ns/beta/queues", nil)
		wantError(t, "alpha token listing beta", st, em, raw, 403, "forbidden", "")
		st, em, raw = al.do("POST", jobsp("work"), map[string]any{"payload": 1})
		wantError(t, "alpha token on default", st, em, raw, 403, "forbidden", "")
		st, em, raw = s.do("POST", nsqp("alpha", "work")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "no token on alpha", st, em, raw, 401, "unauthorized", "")
		st, em, raw = s.withToken("garbage").do("POST", nsqp("alpha", "work")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "unknown token on alpha", st, em, raw, 401, "unauthorized", "")
		// The admin token is accepted on /v1 of any namespace.
		a.expect(201, "POST", nsqp("beta", "work")+"/jobs", map[string]any{"payload": 1})
		// A namespace token is not an admin token.
		if st, _, _ := al.admin("GET", "/admin/namespaces", nil); st != 401 && st != 403 {
			t.Errorf("namespace token on the admin API: %d, want 401 or 403", st)
		}
		// Revoked: 401.
		if st, _, raw := a.admin("DELETE", "/admin/namespaces/alpha/tokens/"+url.PathEscape(tok), nil); st != 204 {
			t.Errorf("revoke: %d %s", st, raw)
		}
		st, em, raw = al.do("POST", nsqp("alpha", "work")+"/jobs", map[string]any{"payload": 1})
		wantError(t, "revoked alpha token", st, em, raw, 401, "unauthorized", "")
	})
}

// TestServeFlags starts the server with the other documented flags: the
// sync policy, --max-payload and --max-connections are accepted, the server
// works, and --max-payload is the payload limit of an auto-created queue.
func TestServeFlags(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), "--sync", "interval", "--sync-interval", "10ms", "--max-payload", "1000", "--max-connections", "64")
	s.put("flags", map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 1000))})
	st, m, raw := s.do("POST", jobsp("flags"), map[string]any{"payload_base64": base64.StdEncoding.EncodeToString(make([]byte, 1001))})
	wantError(t, "put over --max-payload", st, m, raw, 413, "payload_too_large", "")
	if jobs := s.take("flags", map[string]any{"max": 10}); len(jobs) != 1 {
		t.Errorf("take: %d jobs, want 1", len(jobs))
	}
	s.stop()
	s = startServer(t, t.TempDir(), "--sync", "never")
	s.put("flags", map[string]any{"payload": 1})
	s.stop()
}
