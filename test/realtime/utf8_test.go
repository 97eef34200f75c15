package realtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/ws"
)

// A lone surrogate escape in a publication used to be stored as sent and
// handed to every subscriber; it is refused, naming the field, and the
// connection stays usable.
func TestLoneSurrogateRefusedOverWebSocket(t *testing.T) {
	e := newEnv(t, ws.Options{})
	c := e.connect("")
	c.ok("subscribe", map[string]any{"channel": "default/u"})
	c.id++
	frame := `{"id":` + itoa(c.id) + `,"publish":{"channel":"default/u","data":{"text":"\ud800"}}}`
	if err := c.c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	ans := c.answer(c.id)
	var e1 struct{ Code, Message string }
	json.Unmarshal(ans["error"], &e1)
	if e1.Code != "bad_request" || !strings.HasPrefix(e1.Message, "data: ") {
		t.Fatalf("publish with \\ud800: %s", ans)
	}
	// Still connected, and a proper pair is fine.
	c.ok("publish", map[string]any{"channel": "default/u", "data": "😀"})
	if p := c.pub(); string(p["data"]) != `"😀"` {
		t.Fatalf("pub %s", p["data"])
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
