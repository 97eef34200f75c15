package ws

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
)

// TestPutRefusesDotNames: "." and ".." are no queue names (engine.ValidName;
// an HTTP path holding them is cleaned away), so a WebSocket put to them is
// refused like an HTTP one, and nothing is created.
func TestPutRefusesDotNames(t *testing.T) {
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := New(b, b.Channels(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer := func(frame string) map[string]json.RawMessage {
		t.Helper()
		if err := c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("answer %q: %v", msg, err)
		}
		return m
	}
	if m := answer(`{"id":1,"connect":{}}`); m["error"] != nil {
		t.Fatalf("connect: %s", m["error"])
	}
	for i, q := range []string{"..", "."} {
		m := answer(`{"id":` + string(rune('2'+i)) + `,"put":{"queue":"` + q + `","payload":1}}`)
		if m["error"] == nil || !strings.Contains(string(m["error"]), "bad_request") {
			t.Fatalf("put to %q: %v", q, m)
		}
	}
	qs, err := b.ListQueues(t.Context(), "default")
	if err != nil || len(qs) != 0 {
		t.Fatalf("queues after refused puts: %v %+v", err, qs)
	}
	if m := answer(`{"id":9,"put":{"queue":"ok","payload":1}}`); m["error"] != nil {
		t.Fatalf("put to a valid queue: %s", m["error"])
	}
	// consume inherits the engine's cap on the queues of one take.
	names := make([]string, engine.MaxTakeQueues+1)
	for i := range names {
		names[i] = fmt.Sprintf(`"q%d"`, i)
	}
	m := answer(`{"id":10,"consume":{"queues":[` + strings.Join(names, ",") + `]}}`)
	if m["error"] == nil || !strings.Contains(string(m["error"]), "at most 100") {
		t.Fatalf("consume over %d queues: %v", len(names), m)
	}
}
