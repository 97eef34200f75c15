package realtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/engine"
)

// A revoked namespace token used to keep working on every WebSocket and
// SSE connection already open with it.
func TestRevokedTokenClosesConnections(t *testing.T) {
	e := newEnv(t, ws.Options{AdminToken: rootToken})
	ctx := context.Background()
	if _, _, err := e.b.CreateNamespace(ctx, "billing", engine.NamespaceConfig{AutoCreateQueues: true}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.b.CreateToken(ctx, "billing", "doomed")
	if err != nil {
		t.Fatal(err)
	}
	keep, err := e.b.CreateToken(ctx, "billing", "kept")
	if err != nil {
		t.Fatal(err)
	}
	c := e.connect(tok)
	c.ok("subscribe", map[string]any{"channel": "billing/news"})
	other := e.connect(keep)
	other.ok("subscribe", map[string]any{"channel": "billing/news"})
	sse, resp := e.sse("channel=billing/news", http.Header{"Authorization": {"Bearer " + tok}})
	if sse == nil {
		t.Fatalf("SSE: status %d", resp.StatusCode)
	}
	if ev := sse.next(); ev.name != "subscribed" {
		t.Fatalf("SSE first event %q", ev.name)
	}

	if err := e.b.RevokeToken(ctx, "billing", tok); err != nil {
		t.Fatal(err)
	}
	if code, disc := c.closed(); code != 4503 || disc.str("reason") != "token_revoked" || string(disc["reconnect"]) != "false" {
		t.Errorf("WebSocket after revocation: close %d, disconnect %v; want 4503 token_revoked, no reconnect", code, disc)
	}
	var ev event
	for ev = sse.next(); ev.name == "pub"; ev = sse.next() {
	}
	if ev.name != "disconnect" || ev.data.num("code") != 4503 {
		t.Errorf("SSE after revocation: event %q %v; want disconnect 4503", ev.name, ev.data)
	}
	// The other token's connection lives on.
	e.publish("billing", "news", `"after"`)
	if p := other.pub(); string(p["data"]) != `"after"` {
		t.Errorf("other token's connection: %v", p)
	}
}

// /admin/disconnect takes a namespace token's id (its SHA-256 hex, as the
// admin API lists tokens; or the token) like a JWT's jti, and answers a
// namespace token with 403 like every admin route.
func TestAdminDisconnectNamespaceToken(t *testing.T) {
	e := newEnv(t, ws.Options{AdminToken: rootToken})
	ctx := context.Background()
	tok, err := e.b.CreateToken(ctx, "default", "svc")
	if err != nil {
		t.Fatal(err)
	}
	if st, m := e.adminPost("/admin/disconnect", tok, `{"user":"42"}`); st != http.StatusForbidden || m.obj("error").str("code") != "forbidden" {
		t.Errorf("with a namespace token: %d %s, want 403 forbidden", st, m["error"])
	}
	if st, _ := e.adminPost("/admin/disconnect", "nope", `{"user":"42"}`); st != http.StatusUnauthorized {
		t.Errorf("with an unknown token: %d, want 401", st)
	}
	sum := sha256.Sum256([]byte(tok))
	for _, id := range []string{hex.EncodeToString(sum[:]), tok} {
		a, b := e.connect(tok), e.connect(tok)
		st, m := e.adminPost("/admin/disconnect", rootToken, `{"token_id":"`+id+`"}`)
		if st != 200 || m.num("disconnected") != 2 {
			t.Fatalf("disconnect token_id %.12s...: %d %v, want 2", id, st, m)
		}
		for _, c := range []*client{a, b} {
			if code, _ := c.closed(); code != 4502 {
				t.Errorf("token_id %.12s...: close %d, want 4502", id, code)
			}
		}
	}
}

// exp past 2262 overflowed UnixNano: the connection was dropped as expired
// at once and, reconnecting, again, forever.
func TestJWTFarFutureExpiry(t *testing.T) {
	e := newEnv(t, ws.Options{JWT: ws.JWTOptions{HMACSecret: secret}})
	c := e.connect(token(t, userClaims("42", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))))
	c.ok("subscribe", map[string]any{"channel": "app/news"})
	e.publish("app", "news", `"hello"`)
	if p := c.pub(); string(p["data"]) != `"hello"` {
		t.Fatalf("JWT with exp in year 3000: %v", p)
	}
}

// A connection made without a token while none existed must not keep
// every right once the first token is created.
func TestAnonymousConnectionsClosedOnceATokenExists(t *testing.T) {
	e := newEnv(t, ws.Options{})
	c := e.connect("")
	c.ok("subscribe", map[string]any{"channel": "default/news"})
	if _, err := e.b.CreateToken(context.Background(), "default", "first"); err != nil {
		t.Fatal(err)
	}
	if code, disc := c.closed(); code != 4501 || string(disc["reconnect"]) != "false" {
		t.Errorf("anonymous connection after the first token: close %d %v, want 4501", code, disc)
	}
}
