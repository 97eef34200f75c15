package e2e

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
)

// TestServeJWT: `serve --jwt-secret` accepts browser JWTs on /v1/ws; a
// user channel is delivered to its user only.
func TestServeJWT(t *testing.T) {
	t.Parallel()
	secret := "e2e-secret-0123456789"
	s := startServer(t, t.TempDir(), "--jwt-secret", secret)
	sign := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": sub, "exp": time.Now().Add(time.Hour).Unix(), "ns": "default", "channels": []string{"user#*"},
		}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dial := func(sub string) *websocket.Conn {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+s.httpAddr+"/v1/ws", nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	call := func(c *websocket.Conn, id int, op string, body any) map[string]any {
		t.Helper()
		if err := c.WriteJSON(map[string]any{"id": id, op: body}); err != nil {
			t.Fatal(err)
		}
		for {
			var m map[string]any
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			if jint(m, "id") == int64(id) {
				return m
			}
		}
	}
	u42 := dial("42")
	if m := call(u42, 1, "connect", map[string]any{"token": sign("42")}); m["result"] == nil {
		t.Fatalf("connect with a JWT: %v", m)
	}
	if m := call(u42, 2, "subscribe", map[string]any{"channel": "default/user#42"}); m["result"] == nil {
		t.Fatalf("subscribe to own channel: %v", m)
	}
	u41 := dial("41")
	call(u41, 1, "connect", map[string]any{"token": sign("41")})
	if m := call(u41, 2, "subscribe", map[string]any{"channel": "default/user#42"}); m["error"] == nil {
		t.Fatalf("user 41 subscribed to user#42: %v", m)
	}
	bad := dial("x")
	if m := call(bad, 1, "connect", map[string]any{"token": sign("42") + "x"}); m["error"] == nil {
		t.Fatalf("connect with a bad signature: %v", m)
	}

	s.expect(200, "POST", "/v1/ns/default/channels/"+url.PathEscape("user#42")+"/publish", map[string]any{"data": map[string]any{"hi": 42}})
	for {
		_, raw, err := u42.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for the publication: %v", err)
		}
		var m struct {
			Pub *struct {
				Channel string          `json:"channel"`
				Data    json.RawMessage `json:"data"`
			} `json:"pub"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Pub != nil {
			if m.Pub.Channel != "default/user#42" || !strings.Contains(string(m.Pub.Data), `"hi":42`) {
				t.Fatalf("publication %s", raw)
			}
			return
		}
	}
}
