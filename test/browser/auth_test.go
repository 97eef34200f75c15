package browser

import (
	"strings"
	"testing"
	"time"
)

const authAdminToken = "browser-test-admin-token"

// testAuth runs a server with JWTs (--jwt-secret) and an admin token. The
// page gets its JWTs from the page server's /token, as an application
// would from its own backend.
func (e *env) testAuth(t *testing.T) {
	srv := e.authSrv
	srv.t = t
	server := "http://" + srv.httpAddr

	// alice: a JWT valid for 11 s, refreshed 10 s before it expires, that
	// is after about a second, on the open connection.
	e.d.eval(t, js("start", "jwt", opts{"server": server, "channel": "default/news", "tokenUrl": "/token?sub=alice&ttl=11", "refreshBefore": 10000}), nil)
	// bob: disconnected by the admin, without reconnect.
	e.d.eval(t, js("start", "kicked", opts{"server": server, "channel": "default/news", "tokenUrl": "/token?sub=bob&ttl=600"}), nil)
	// a token the server does not know: close 4501, never retried.
	e.d.eval(t, js("start", "badtoken", opts{"server": server, "channel": "default/news", "token": "not-a-token"}), nil)
	// carol may only use "news": her subscription to "secret" is refused,
	// her connection stays.
	e.d.eval(t, js("start", "forbidden", opts{"server": server, "channel": "default/secret", "tokenUrl": "/token?sub=carol&ttl=600&channels=news"}), nil)

	// SSE with a JWT in ?token=, and with a bad token: 401 before the
	// stream, which EventSource does not report; the client asks and stops.
	e.d.eval(t, js("start", "ssejwt", opts{"server": server, "channel": "default/news", "transport": "sse", "sseUrl": "/auth/v1/sse", "tokenUrl": "/token?sub=dave&ttl=600"}), nil)
	e.d.eval(t, js("start", "ssebad", opts{"server": server, "channel": "default/news", "transport": "sse", "sseUrl": "/auth/v1/sse", "token": "not-a-token"}), nil)

	first, ok := e.waitFor(t, "jwt", "subscribed with a JWT", 15*time.Second, func(p panel) bool { return p.Ready && p.State == "connected" })
	if !ok {
		return
	}
	exp0 := first.Session.Expires
	if first.Session.User != "alice" || first.Session.Namespace != "default" || exp0 == "" {
		t.Errorf("jwt: connect answer %+v, want user alice, namespace default, an expiry", first.Session)
	}
	e.waitFor(t, "ssejwt", "subscribed over SSE with a JWT", 15*time.Second, func(p panel) bool { return p.Ready && p.State == "connected" })
	srv.publish("default/news", 1)
	p, ok := e.waitFor(t, "jwt", "token refreshed on the connection", 10*time.Second, func(p panel) bool {
		return p.TokenCalls >= 2 && p.Session.Expires != exp0 && len(p.Pubs) >= 1
	})
	if ok && p.Reconnects != 0 {
		t.Errorf("jwt: %d reconnects: the refresh should keep the connection", p.Reconnects)
	}
	srv.publish("default/news", 2)
	for _, name := range []string{"jwt", "ssejwt"} {
		if p, ok := e.waitFor(t, name, "publications 1, 2", 10*time.Second, func(p panel) bool { return len(p.Pubs) >= 2 }); ok {
			if got := p.ns(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
				t.Errorf("%s: received %v, want [1 2]", name, got)
			}
		}
	}
	p, ok = e.waitFor(t, "ssebad", "closed for good after 401", 10*time.Second, func(p panel) bool { return p.State == "closed" })
	if ok {
		if len(p.Disconnects) != 1 || p.Disconnects[0].Code != 401 || p.Disconnects[0].Reconnect {
			t.Errorf("ssebad: disconnects %+v, want one {401 unauthorized reconnect:false}", p.Disconnects)
		}
		if !anyContains(p.Errors, "unauthorized") {
			t.Errorf("ssebad: errors %v, want unauthorized", p.Errors)
		}
	}

	if _, ok := e.waitFor(t, "kicked", "subscribed", 15*time.Second, func(p panel) bool { return p.Ready && p.State == "connected" }); ok {
		var res struct {
			Disconnected int `json:"disconnected"`
		}
		st, raw := srv.call(srv.adminAddr, "POST", "/admin/disconnect", map[string]any{"user": "bob"})
		if st != 200 || !strings.Contains(string(raw), `"disconnected":1`) {
			t.Errorf("POST /admin/disconnect: %d %s (%+v), want 200 disconnected 1", st, raw, res)
		}
		p, ok := e.waitFor(t, "kicked", "closed for good after the admin disconnect", 10*time.Second, func(p panel) bool { return p.State == "closed" })
		if ok && (len(p.Disconnects) != 1 || p.Disconnects[0].Code != 4502 || p.Disconnects[0].Reconnect) {
			t.Errorf("kicked: disconnects %+v, want one {4502 disconnected reconnect:false}", p.Disconnects)
		}
	}

	p, ok = e.waitFor(t, "badtoken", "closed for good after unauthorized", 10*time.Second, func(p panel) bool { return p.State == "closed" })
	if ok {
		if len(p.Disconnects) != 1 || p.Disconnects[0].Code != 4501 || p.Disconnects[0].Reconnect {
			t.Errorf("badtoken: disconnects %+v, want one {4501 reconnect:false}", p.Disconnects)
		}
		if !anyContains(p.Errors, "unauthorized") {
			t.Errorf("badtoken: errors %v, want unauthorized", p.Errors)
		}
	}

	p, ok = e.waitFor(t, "forbidden", "subscription refused", 10*time.Second, func(p panel) bool { return anyContains(p.Errors, "forbidden") })
	if ok && (p.State != "connected" || p.Ready) {
		t.Errorf("forbidden: state %q ready %v, want the connection up and the subscription not ready", p.State, p.Ready)
	}
}

func anyContains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}
