package realtime

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/engine"
)

var secret = []byte("test-secret-test-secret-test-secret")

func token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func userClaims(sub string, exp time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "exp": exp.Unix(), "ns": "app", "channels": []string{"news", "user#*", "chat.*"}}
}

func TestJWTPermissions(t *testing.T) {
	e := newEnv(t, ws.Options{JWT: ws.JWTOptions{HMACSecret: secret}})
	c := e.connect(token(t, userClaims("42", time.Now().Add(time.Hour))))
	for _, tc := range []struct {
		ch, code string
	}{
		{"app/news", ""},
		{"news", ""}, // the token's namespace
		{"app/user#42", ""},
		{"app/user#41", "forbidden"},   // another user's channel
		{"app/user#41,42", "conflict"}, // not forbidden: 42 is listed (conflict: see below)
		{"app/chat.room1", ""},
		{"app/secret", "forbidden"}, // not in channels
		{"other/news", "forbidden"}, // another namespace
	} {
		if tc.code == "conflict" {
			// First subscribe succeeds; a second one conflicts, which
			// proves the first was allowed.
			if code := c.callErr("subscribe", map[string]any{"channel": tc.ch}); code != "" {
				t.Errorf("subscribe %s: %q", tc.ch, code)
			}
		}
		if code := c.callErr("subscribe", map[string]any{"channel": tc.ch}); code != tc.code && !(tc.ch == "news" && code == "conflict") {
			t.Errorf("subscribe %s: %q, want %q", tc.ch, code, tc.code)
		}
	}
	// No publish claim: subscribe only. Queue commands need a namespace token.
	if code := c.callErr("publish", map[string]any{"channel": "app/news", "data": 1}); code != "forbidden" {
		t.Errorf("publish without the claim: %q", code)
	}
	if code := c.callErr("consume", map[string]any{"queues": []string{"q"}}); code != "forbidden" {
		t.Errorf("consume with a JWT: %q", code)
	}
	cl := userClaims("7", time.Now().Add(time.Hour))
	cl["publish"] = true
	p := e.connect(token(t, cl))
	if code := p.callErr("publish", map[string]any{"channel": "app/news", "data": 1}); code != "" {
		t.Errorf("publish with publish:true: %q", code)
	}
	if code := p.callErr("publish", map[string]any{"channel": "app/user#42", "data": 1}); code != "forbidden" {
		t.Errorf("publish to another user's channel: %q", code)
	}

	// Bad tokens end the connection with "do not reconnect".
	for _, tok := range []string{"garbage", token(t, jwt.MapClaims{"sub": "1", "ns": "app"}) /* no exp */, "a.b.c"} {
		d := e.dial()
		if code := d.callErr("connect", map[string]any{"token": tok}); code != "unauthorized" {
			t.Errorf("connect with %.20q: %q", tok, code)
		}
		if code, disc := d.closed(); code != 4501 || string(disc["reconnect"]) != "false" {
			t.Errorf("after a bad token: close %d %v", code, disc)
		}
	}
	d := e.dial()
	if code := d.callErr("connect", map[string]any{"token": token(t, userClaims("1", time.Now().Add(-time.Minute)))}); code != "token_expired" {
		t.Errorf("expired token: %q", code)
	}
	if code, disc := d.closed(); code != 4003 || string(disc["reconnect"]) != "true" {
		t.Errorf("after an expired token: close %d %v", code, disc)
	}
	// Without a token when credentials exist.
	d = e.dial()
	if code := d.callErr("connect", map[string]any{}); code != "unauthorized" {
		t.Errorf("no token: %q", code)
	}
}

func TestJWTPublicKeys(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var pemData []byte
	for _, k := range []crypto.PublicKey{&rk.PublicKey, &ek.PublicKey} {
		der, _ := x509.MarshalPKIXPublicKey(k)
		pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	keys, err := ws.ParsePublicKeysPEM(pemData)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ParsePublicKeysPEM: %v %d", err, len(keys))
	}
	e := newEnv(t, ws.Options{JWT: ws.JWTOptions{PublicKeys: keys}})
	cl := userClaims("9", time.Now().Add(time.Hour))
	rs, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, cl).SignedString(rk)
	es, _ := jwt.NewWithClaims(jwt.SigningMethodES256, cl).SignedString(ek)
	hs := token(t, cl) // HS256 is not configured here
	for tok, want := range map[string]string{rs: "", es: "", hs: "unauthorized"} {
		d := e.dial()
		if code := d.callErr("connect", map[string]any{"token": tok}); code != want {
			t.Errorf("connect: %q, want %q", code, want)
		}
	}
}

// TestJWTExpiry: the server disconnects at exp (plus the grace) with
// token_expired and "reconnect", unless the client refreshed in time.
func TestJWTExpiry(t *testing.T) {
	e := newEnv(t, ws.Options{JWT: ws.JWTOptions{HMACSecret: secret}, ExpiryGrace: 100 * time.Millisecond})
	// JWT exp has one-second resolution: a token that expires in about 1–2 s.
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)

	c := e.connect(token(t, userClaims("42", exp)))
	c.ok("subscribe", map[string]any{"channel": "app/news"})
	code, disc := c.closed()
	if code != 4003 || disc.str("reason") != "token_expired" || string(disc["reconnect"]) != "true" {
		t.Fatalf("at expiry: close %d, disconnect %v", code, disc)
	}

	// Refresh before exp: the connection lives past the old exp.
	exp = time.Now().Add(2 * time.Second).Truncate(time.Second)
	r := e.connect(token(t, userClaims("42", exp)))
	res := r.ok("refresh", map[string]any{"token": token(t, userClaims("42", time.Now().Add(time.Hour)))})
	if res.str("expires") == "" {
		t.Fatalf("refresh answer: %v", res)
	}
	// A refresh may not change who the connection is.
	if code := r.callErr("refresh", map[string]any{"token": token(t, userClaims("43", time.Now().Add(time.Hour)))}); code != "forbidden" {
		t.Errorf("refresh as another user: %q", code)
	}
	r.ok("subscribe", map[string]any{"channel": "app/news"})
	// Let the old exp and its grace pass, then prove the socket still
	// works. This wait decides nothing by itself: if refresh were ignored,
	// the publish below would find a closed socket.
	time.Sleep(time.Until(exp.Add(500 * time.Millisecond)))
	e.publish("app", "news", `"still here"`)
	if p := r.pub(); string(p["data"]) != `"still here"` {
		t.Fatalf("after the old exp: %v", p)
	}

	// A narrower refreshed token drops the subscriptions it no longer allows.
	narrow := userClaims("42", time.Now().Add(time.Hour))
	narrow["channels"] = []string{"user#*"}
	r.ok("refresh", map[string]any{"token": token(t, narrow)})
	var unsub msg
	for _, m := range r.pushes {
		if m["unsubscribed"] != nil {
			unsub = m.obj("unsubscribed")
		}
	}
	if unsub.str("channel") != "app/news" {
		t.Fatalf("narrowed refresh: pushes %v", r.pushes)
	}
}

func TestAdminDisconnect(t *testing.T) {
	e := newEnv(t, ws.Options{JWT: ws.JWTOptions{HMACSecret: secret}, AdminToken: rootToken})
	exp := time.Now().Add(time.Hour)
	withJTI := func(sub, jti string) string {
		cl := userClaims(sub, exp)
		cl["jti"] = jti
		return token(t, cl)
	}
	a1 := e.connect(withJTI("42", "t1"))
	a2 := e.connect(withJTI("42", "t2"))
	b := e.connect(withJTI("7", "t3"))
	svc := e.connect(rootToken)

	if st, _ := e.adminPost("/admin/disconnect", "", `{"user":"42"}`); st != 401 {
		t.Fatalf("without the admin token: %d", st)
	}
	if st, m := e.adminPost("/admin/disconnect", rootToken, `{"user":"42","token_id":"t1"}`); st != 400 {
		t.Fatalf("both user and token_id: %d %v", st, m)
	}
	st, m := e.adminPost("/admin/disconnect", rootToken, `{"user":"42"}`)
	if st != 200 || m.num("disconnected") != 2 {
		t.Fatalf("disconnect user 42: %d %v", st, m)
	}
	for _, c := range []*client{a1, a2} {
		if code, disc := c.closed(); code != 4502 || string(disc["reconnect"]) != "false" {
			t.Errorf("user 42: close %d %v", code, disc)
		}
	}
	// Others are untouched.
	b.ok("subscribe", map[string]any{"channel": "news"})
	svc.ok("publish", map[string]any{"channel": "app/news", "data": 1})
	b.pub()

	st, m = e.adminPost("/admin/disconnect", rootToken, `{"token_id":"t3","reconnect":true}`)
	if st != 200 || m.num("disconnected") != 1 {
		t.Fatalf("disconnect t3: %d %v", st, m)
	}
	if code, disc := b.closed(); code != 4004 || string(disc["reconnect"]) != "true" {
		t.Errorf("token t3: close %d %v", code, disc)
	}
	if _, m := e.adminPost("/admin/disconnect", rootToken, `{"user":"nobody"}`); m.num("disconnected") != 0 {
		t.Errorf("unknown user: %v", m)
	}
}

func TestNamespaceTokens(t *testing.T) {
	e := newEnv(t, ws.Options{})
	ctx := context.Background()
	if _, _, err := e.b.CreateNamespace(ctx, "billing", engine.NamespaceConfig{AutoCreateQueues: true}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.b.CreateToken(ctx, "billing", "test")
	if err != nil {
		t.Fatal(err)
	}
	c := e.connect(tok)
	if code := c.callErr("subscribe", map[string]any{"channel": "billing/x"}); code != "" {
		t.Errorf("own namespace: %q", code)
	}
	if code := c.callErr("subscribe", map[string]any{"channel": "default/x"}); code != "forbidden" {
		t.Errorf("other namespace: %q", code)
	}
	// Services may use users' channels: they are what publishes to them.
	if code := c.callErr("publish", map[string]any{"channel": "billing/user#5", "data": 1}); code != "" {
		t.Errorf("service to a user channel: %q", code)
	}
	// Once a token exists, anonymous connections are refused.
	d := e.dial()
	if code := d.callErr("connect", map[string]any{}); code != "unauthorized" {
		t.Errorf("anonymous with tokens configured: %q", code)
	}
}

// rootToken is an admin token long enough for the server's minimum.
const rootToken = "root-admin-token-0123"
