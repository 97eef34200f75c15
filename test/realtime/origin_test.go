package realtime

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/ws"
)

// While no credential is configured, a page of another origin must not be
// able to drive the server through a visitor's browser: WebSocket and SSE
// refuse a foreign Origin with 403. Same-origin pages and clients without
// an Origin (not browsers) pass; with a token configured every origin may
// connect, since the token is the guard.
func TestForeignOriginRefusedWhileOpen(t *testing.T) {
	e := newEnv(t, ws.Options{})
	host := strings.TrimPrefix(e.srv.URL, "http://")
	dialWith := func(origin string) (int, error) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), h)
		if c != nil {
			c.Close()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, err
	}
	sseWith := func(origin string) (int, string) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		s, resp := e.sse("channel=default/o", h)
		if s != nil {
			s.resp.Body.Close()
		}
		return resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin")
	}
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null"} {
		if st, _ := dialWith(origin); st != http.StatusForbidden {
			t.Errorf("WebSocket from %s: status %d, want 403", origin, st)
		}
		if st, acao := sseWith(origin); st != http.StatusForbidden || acao == "*" {
			t.Errorf("SSE from %s: status %d, Access-Control-Allow-Origin %q; want 403 without *", origin, st, acao)
		}
	}
	for _, origin := range []string{"", "http://" + host} {
		if st, err := dialWith(origin); st != http.StatusSwitchingProtocols {
			t.Errorf("WebSocket with Origin %q: status %d (%v), want 101", origin, st, err)
		}
		if st, _ := sseWith(origin); st != http.StatusOK {
			t.Errorf("SSE with Origin %q: status %d, want 200", origin, st)
		}
	}

	// DNS rebinding: a page of evil.example whose name now resolves to
	// 127.0.0.1 sends its own name as Host and Origin, so the two agree;
	// only the Host check refuses it.
	rebound := func(path string) int {
		req, err := http.NewRequest("GET", e.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example:" + strings.Split(host, ":")[1]
		req.Header.Set("Origin", "http://"+req.Host)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/v1/ws", "/v1/sse?channel=default/o"} {
		if st := rebound(path); st != http.StatusForbidden {
			t.Errorf("%s with a rebound Host and matching Origin: status %d, want 403", path, st)
		}
	}

	// A token now exists: the token is the guard, foreign pages may connect.
	tok, err := e.b.CreateToken(context.Background(), "default", "t")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := dialWith("http://evil.example"); st != http.StatusSwitchingProtocols {
		t.Errorf("WebSocket from a foreign origin with tokens configured: %d (%v), want 101", st, err)
	}
	if st, acao := sseWith("http://evil.example"); st != http.StatusUnauthorized || acao != "*" {
		t.Errorf("SSE without token from a foreign origin with tokens configured: %d, ACAO %q; want 401 readable by the page (*)", st, acao)
	}
	s, resp := e.sse("channel=default/o&token="+tok, http.Header{"Origin": {"http://evil.example"}})
	if s == nil || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("SSE with a token from a foreign origin: %d, ACAO %q; want 200 and *", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	} else {
		s.resp.Body.Close()
	}
}
