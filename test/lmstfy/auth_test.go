package lmstfy_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestDevMode: with no token anywhere and no admin token, /api asks for
// none (lmstfy's dev mode); the first token ends that.
func TestDevMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.publish("ns", "q", "", nil, "x")
	tok := e.newToken("ns", "", nil)
	expect(t, "publish without a token once one exists", e.api("PUT", "/api/ns/q", nil, []byte("x")), 401, errBody("token not found"))
	e.publish("ns", "q", "", tokenHdr(tok), "x")
}

// TestRequireAuth: a server told to require auth does so with no token yet.
func TestRequireAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{requireAuth: true})
	expect(t, "publish", e.api("PUT", "/api/ns/q", nil, []byte("x")), 401, errBody("token not found"))
	expect(t, "size stays public", e.api("GET", "/api/ns/q/size", nil, nil), 200, "")
}

// TestTokens: X-Token, ?token=, pool: prefix, missing and wrong tokens on
// every protected route; public routes; the admin token; revocation.
func TestTokens(t *testing.T) {
	t.Parallel()
	const admin = "the-admin-token-0123"
	e := newEnv(t, envOpts{adminToken: admin})
	adm := map[string]string{"Authorization": "Bearer " + admin}
	tok := e.newToken("ns", "", adm)
	other := e.newToken("other", "", adm)

	protected := []struct{ method, path string }{
		{"PUT", "/api/ns/q"},
		{"PUT", "/api/ns/q/bulk"},
		{"PUT", "/api/ns/q/job/x"},
		{"GET", "/api/ns/q"},
		{"GET", "/api/ns/q,r"},
		{"GET", "/api/ns/q/peek"},
		{"GET", "/api/ns/q/job/x"},
		{"DELETE", "/api/ns/q/job/x"},
		{"DELETE", "/api/ns/q"},
		{"GET", "/api/ns/q/deadletter"},
		{"PUT", "/api/ns/q/deadletter"},
		{"DELETE", "/api/ns/q/deadletter"},
	}
	for _, p := range protected {
		what := p.method + " " + p.path
		expect(t, what+" without a token", e.api(p.method, p.path, nil, []byte("[1]")), 401, errBody("token not found"))
		expect(t, what+" with an empty pool: prefix", e.api(p.method, p.path, tokenHdr("default:"), []byte("[1]")), 401, errBody("token not found"))
		expect(t, what+" with a wrong token", e.api(p.method, p.path, tokenHdr("nope"), []byte("[1]")), 401, errBody("invalid token"))
		expect(t, what+" with another namespace's token", e.api(p.method, p.path, tokenHdr(other), []byte("[1]")), 401, errBody("invalid token"))
		sep := "?"
		if strings.Contains(p.path, "?") {
			sep = "&"
		}
		expect(t, what+" with a wrong ?token=", e.api(p.method, p.path+sep+"token=nope", nil, []byte("[1]")), 401, errBody("invalid token"))
		if r := e.api(p.method, p.path, tokenHdr(tok), []byte("[1]")); r.status == 401 {
			t.Errorf("%s with the right token: %d %s", what, r.status, r.raw)
		}
	}
	// The public routes need nothing, and ignore a wrong token.
	for _, p := range []string{"/api/ns/q/size", "/api/ns/q/deadletter/size"} {
		expect(t, "GET "+p, e.api("GET", p, nil, nil), 200, "")
		expect(t, "GET "+p+" with a wrong token", e.api("GET", p, tokenHdr("nope"), nil), 200, "")
	}

	// Every way of passing the token works; X-Token wins over ?token=.
	id := e.publish("ns", "t", "", tokenHdr(tok), "1")
	e.publish("ns", "t", "?token="+url.QueryEscape(tok), nil, "2")
	e.publish("ns", "t", "", tokenHdr("default:"+tok), "3")
	e.publish("ns", "t", "", tokenHdr("any-pool:"+tok), "4")
	e.publish("ns", "t", "?token=p:"+url.QueryEscape(tok), nil, "5")
	e.publish("ns", "t", "?token=nope", tokenHdr(tok), "6")
	expect(t, "wrong X-Token, right ?token=", e.api("PUT", "/api/ns/t?token="+url.QueryEscape(tok), tokenHdr("nope"), []byte("7")), 401, errBody("invalid token"))
	if n := e.size("ns", "t", "/size"); n != 6 {
		t.Errorf("size %d, want 6", n)
	}
	// The admin token is every namespace's token.
	if j := e.consume("ns", "t", "", tokenHdr(admin)); j == nil || j.ID != id {
		t.Errorf("consume with the admin token: %+v", j)
	}
	e.publish("brand-new", "q", "", tokenHdr(admin), "x")

	// Revocation takes effect at once, by token or by listed hash.
	expect(t, "revoke", e.adm("DELETE", "/token/ns/"+tok, adm, nil), 204, "")
	expect(t, "publish with a revoked token", e.api("PUT", "/api/ns/t", tokenHdr(tok), []byte("x")), 401, errBody("invalid token"))
	expect(t, "revoke again", e.adm("DELETE", "/token/ns/"+tok, adm, nil), 204, "")
	expect(t, "revoke in a namespace that does not exist", e.adm("DELETE", "/token/nope/"+tok, adm, nil), 204, "")
	var list struct {
		Tokens map[string]string `json:"tokens"`
	}
	r := e.adm("GET", "/token/other", adm, nil)
	if r.status != 200 || json.Unmarshal(r.raw, &list) != nil || len(list.Tokens) != 1 {
		t.Fatalf("list tokens: %d %s", r.status, r.raw)
	}
	for h, d := range list.Tokens {
		if !strings.HasPrefix(h, "sha256:") || len(h) != 7+64 || d != "test" {
			t.Errorf("listed token %q: %q", h, d)
		}
		expect(t, "revoke by listed hash", e.adm("DELETE", "/token/other/"+h, adm, nil), 204, "")
	}
	expect(t, "token revoked by hash", e.api("PUT", "/api/other/q", tokenHdr(other), []byte("x")), 401, errBody("invalid token"))
}

// TestAdminTokens: POST /token's parameters, caller-chosen tokens, pool
// prefixes, the listing, and the admin listener's own auth.
func TestAdminTokens(t *testing.T) {
	t.Parallel()
	const admin = "secret-admin-0123456"
	e := newEnv(t, envOpts{adminToken: admin})
	basic := map[string]string{"Authorization": "Basic " + b64("anyone:"+admin)}

	// Admin auth: basic password, bearer or X-Token; never ?token=.
	for what, h := range map[string]map[string]string{
		"no credentials":       nil,
		"wrong basic password": {"Authorization": "Basic " + b64("admin:nope")},
		"wrong bearer":         {"Authorization": "Bearer nope"},
	} {
		r := e.adm("GET", "/pools", h, nil)
		if r.status != 401 || r.header.Get("WWW-Authenticate") == "" || len(r.raw) != 0 {
			t.Errorf("admin call with %s: %d %q %s", what, r.status, r.header.Get("WWW-Authenticate"), r.raw)
		}
	}
	expect(t, "admin token in ?token=", e.adm("GET", "/pools?token="+admin, nil, nil), 401, "")
	for what, h := range map[string]map[string]string{
		"basic":   basic,
		"bearer":  {"Authorization": "Bearer " + admin},
		"X-Token": {"X-Token": admin},
	} {
		expect(t, "GET /pools with "+what, e.adm("GET", "/pools", h, nil), 200, "[\n    \"default\"\n]")
	}

	// Parameter errors.
	for _, c := range []struct{ path, msg string }{
		{"/token/ns", "invalid description"},
		{"/token/ns?description=", "invalid description"},
		{"/token/ns?description=d&token=short", "the user token was too short"},
		{"/token/" + strings.Repeat("n", 65) + "?description=d", "the namespace name was too long"},
		{"/token/n.s?description=d", "namespace name contains forbidden characters"},
	} {
		expect(t, "POST "+c.path, e.adm("POST", c.path, basic, nil), 400, errBody(c.msg))
	}

	// A generated token, answered as gin's IndentedJSON.
	r := e.adm("POST", "/token/ns?description=gen", basic, nil)
	var created struct {
		Token string `json:"token"`
	}
	if r.status != 201 || json.Unmarshal(r.raw, &created) != nil || string(r.raw) != "{\n    \"token\": \""+created.Token+"\"\n}" {
		t.Fatalf("POST /token: %d %s", r.status, r.raw)
	}
	// A chosen token, in the query or a form body; with a pool prefix it is
	// answered with the prefix and works with it.
	chosen := "abcdefghij0123456789"
	expect(t, "chosen token", e.adm("POST", "/token/ns?description=mine&token="+chosen, basic, nil), 201, "{\n    \"token\": \""+chosen+"\"\n}")
	expect(t, "same token again", e.adm("POST", "/token/ns?description=mine&token="+chosen, basic, nil), 400, errBody("token already exists"))
	expect(t, "same token in another namespace", e.adm("POST", "/token/ns2?description=mine&token="+chosen, basic, nil), 400, errBody("token already exists"))
	form := map[string]string{"Authorization": basic["Authorization"], "Content-Type": "application/x-www-form-urlencoded"}
	r = e.adm("POST", "/token/ns", form, []byte("description=form&token=pool1:zyxwvutsrqponmlkjihg"))
	expect(t, "chosen token with a pool, in a form", r, 201, "{\n    \"token\": \"pool1:zyxwvutsrqponmlkjihg\"\n}")
	r = e.adm("POST", "/token/ns?description=x&pool=p2", basic, nil)
	if tok, _ := r.json(t)["token"].(string); r.status != 201 || !strings.HasPrefix(tok, "p2:") {
		t.Errorf("generated token with ?pool=: %d %s", r.status, r.raw)
	} else {
		e.publish("ns", "q", "", tokenHdr(tok), "with pool")
	}
	e.publish("ns", "q", "", tokenHdr(created.Token), "x")
	e.publish("ns", "q", "", tokenHdr(chosen), "x")
	e.publish("ns", "q", "", tokenHdr("pool1:zyxwvutsrqponmlkjihg"), "x")
	e.publish("ns", "q", "", tokenHdr("zyxwvutsrqponmlkjihg"), "x")

	// The listing: four tokens of ns by hash, with their descriptions.
	var list struct {
		Tokens map[string]string `json:"tokens"`
	}
	r = e.adm("GET", "/token/ns", basic, nil)
	if r.status != 200 || json.Unmarshal(r.raw, &list) != nil || len(list.Tokens) != 4 || !strings.HasPrefix(string(r.raw), "{\n    \"tokens\": {") {
		t.Fatalf("GET /token/ns: %d %s", r.status, r.raw)
	}
	descs := map[string]int{}
	for _, d := range list.Tokens {
		descs[d]++
	}
	if descs["gen"] != 1 || descs["mine"] != 1 || descs["form"] != 1 || descs["x"] != 1 {
		t.Errorf("token descriptions %v", descs)
	}
	expect(t, "GET /token of an unknown namespace", e.adm("GET", "/token/nope", basic, nil), 200, "{\n    \"tokens\": {}\n}")
	// Unknown admin routes: gin's plain 404.
	for _, p := range []string{"/token/", "/token/a/b/c"} {
		expect(t, "GET "+p, e.adm("GET", p, basic, nil), 404, "404 page not found")
	}
	expect(t, "PUT /token/ns", e.adm("PUT", "/token/ns", basic, nil), 404, "404 page not found")
}

// TestAdminInfo: /info, /pools, /version.
func TestAdminInfo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.publish("alpha", "q2", "", nil, "x")
	e.publish("alpha", "q1", "", nil, "x")
	e.publish("default", "z", "", nil, "x")
	r := e.adm("GET", "/info", nil, nil)
	want := "{\n    \"alpha\": [\n        \"q1\",\n        \"q2\"\n    ],\n    \"default\": [\n        \"z\"\n    ]\n}\n"
	expect(t, "GET /info", r, 200, want)
	expect(t, "GET /pools", e.adm("GET", "/pools", nil, nil), 200, "[\n    \"default\"\n]")
	var v map[string]string
	r = e.adm("GET", "/version", nil, nil)
	if r.status != 200 || json.Unmarshal(r.raw, &v) != nil || len(v) != 3 || v["version"] == "" {
		t.Errorf("GET /version: %d %s", r.status, r.raw)
	}
	for _, k := range []string{"version", "build_commit", "build_date"} {
		if _, ok := v[k]; !ok {
			t.Errorf("GET /version lacks %s: %s", k, r.raw)
		}
	}
}
