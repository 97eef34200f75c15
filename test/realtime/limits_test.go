package realtime

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/ws"
)

func TestMaxConnections(t *testing.T) {
	e := newEnv(t, ws.Options{MaxConnections: 3})
	var cs []*client
	for i := 0; i < 3; i++ {
		cs = append(cs, e.connect(""))
	}
	// The fourth is refused before the upgrade, with 503 and Retry-After;
	// SSE counts against the same cap.
	_, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), nil)
	if err == nil || resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: err %v resp %v", err, resp)
	}
	var body msg
	json.NewDecoder(resp.Body).Decode(&body)
	if body.obj("error").str("code") != "too_many_connections" {
		t.Errorf("body %v", body)
	}
	if _, resp := e.sse("channel=default/a", nil); resp.StatusCode != 503 {
		t.Errorf("sse over the cap: %d", resp.StatusCode)
	}
	// A closed connection frees its slot.
	cs[0].c.Close()
	deadline := time.Now().Add(wait)
	for e.rt.Stats().Connections > 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	e.connect("")
}

func TestConnectRate(t *testing.T) {
	e := newEnv(t, ws.Options{ConnectRate: 0.001, ConnectBurst: 2})
	e.connect("")
	e.connect("")
	_, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), nil)
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("third connection within the burst: err %v resp %v", err, resp)
	}
	var body msg
	json.NewDecoder(resp.Body).Decode(&body)
	if body.obj("error").str("code") != "rate_limited" {
		t.Errorf("body %v", body)
	}
}

// TestSlowConsumer: a subscriber that stops reading is cut off with 4002
// once its queue is full, and the publisher never waits for it.
func TestSlowConsumer(t *testing.T) {
	e := newEnv(t, ws.Options{MaxQueue: 8})
	slow := e.connect("")
	slow.ok("subscribe", map[string]any{"channel": "default/firehose"})
	fast := e.connect("")
	fast.ok("subscribe", map[string]any{"channel": "default/firehose"})
	data := `"` + strings.Repeat("x", 64<<10) + `"`
	// The slow client reads nothing, so the socket buffers fill, then its
	// queue; each publish returns at once regardless. Bounded: the kernel
	// buffers hold a few MB at most.
	n := 0
	for ; e.rt.Stats().SlowDisconnects == 0; n++ {
		if n == 5000 {
			t.Fatal("5000 publications of 64 KiB and the unread subscriber is still connected")
		}
		e.publish("default", "firehose", data)
		if n%8 == 7 { // the fast one keeps up
			for i := 0; i < 8; i++ {
				fast.pub()
			}
		}
	}
	code, disc := slow.closed()
	if code != 4002 || disc.str("reason") != "slow_consumer" || string(disc["reconnect"]) != "true" {
		t.Fatalf("slow consumer: close %d %v", code, disc)
	}
	for i := n - n%8; i < n; i++ {
		fast.pub()
	}
	e.publish("default", "firehose", `"after"`)
	if p := fast.pub(); string(p["data"]) != `"after"` {
		t.Fatalf("fast subscriber after the slow one left: %v", p)
	}
}

func TestBadFrames(t *testing.T) {
	e := newEnv(t, ws.Options{MaxMessageSize: 1024})
	c := e.connect("")
	// A known id with a bad command: an error answer, connection kept.
	for body, code := range map[string]string{
		`{"id":5,"nope":{}}`:                                  "bad_request",
		`{"id":5,"subscribe":{"channel":"a","bogus":1}}`:      "bad_request",
		`{"id":5,"subscribe":{"channel":1}}`:                  "bad_request",
		`{"id":5,"subscribe":{},"publish":{}}`:                "bad_request",
		`{"id":5,"connect":{}}`:                               "conflict",
		`{"id":5,"consume":{"queues":["q"],"prefetch":0}}`:    "bad_request",
		`{"id":5,"consume":{"queues":["bad name"]}}`:          "bad_request",
		`{"id":5,"publish":{"channel":"a"}}`:                  "bad_request",
		`{"id":5,"put":{"queue":"q"}}`:                        "bad_request",
		`{"id":5,"ack":{"queue":"q","id":"x","receipt":"r"}}`: "queue_not_found",
	} {
		c.c.WriteMessage(websocket.TextMessage, []byte(body))
		r := c.answer(5)
		if got := r.obj("error").str("code"); got != code {
			t.Errorf("%s: %q, want %q (%s)", body, got, code, r["error"])
		}
	}
	c.ok("subscribe", map[string]any{"channel": "still-works"})

	// No usable id: the connection is broken beyond repair.
	d := e.connect("")
	d.c.WriteMessage(websocket.TextMessage, []byte(`not json`))
	if code, disc := d.closed(); code != 4500 || string(disc["reconnect"]) != "false" {
		t.Errorf("garbage frame: close %d %v", code, disc)
	}
	// Commands before connect.
	d = e.dial()
	if code := d.callErr("subscribe", map[string]any{"channel": "a"}); code != "not_connected" {
		t.Errorf("before connect: %q", code)
	}
	// A frame over the limit: 1009 (message too big).
	d = e.connect("")
	d.c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"publish":{"channel":"a","data":"`+strings.Repeat("x", 2048)+`"}}`))
	if code, _ := d.closed(); code != websocket.CloseMessageTooBig {
		t.Errorf("oversized frame: close %d", code)
	}
}

func TestConnectTimeoutAndPing(t *testing.T) {
	e := newEnv(t, ws.Options{ConnectTimeout: 200 * time.Millisecond, PingInterval: 100 * time.Millisecond, PongTimeout: 5 * time.Second})
	d := e.dial()
	if code, disc := d.closed(); code != 4005 || string(disc["reconnect"]) != "true" {
		t.Errorf("no connect: close %d %v", code, disc)
	}
	// The server pings a connected client; gorilla's client answers.
	c := e.connect("")
	pinged := make(chan struct{}, 1)
	c.c.SetPingHandler(func(data string) error {
		select {
		case pinged <- struct{}{}:
		default:
		}
		return c.c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() {
		for {
			if _, _, err := c.c.ReadMessage(); err != nil {
				return
			}
		}
	}()
	select {
	case <-pinged:
	case <-time.After(wait):
		t.Fatal("no ping from the server")
	}
}

func TestShutdownDisconnects(t *testing.T) {
	e := newEnv(t, ws.Options{})
	c := e.connect("")
	s, _ := e.sse("channel=default/a", nil)
	s.next() // subscribed
	done := make(chan error, 1)
	go func() { done <- e.rt.Shutdown(t.Context()) }()
	if code, disc := c.closed(); code != 4001 || string(disc["reconnect"]) != "true" {
		t.Errorf("shutdown: close %d %v", code, disc)
	}
	if ev := s.next(); ev.name != "disconnect" || ev.data.num("code") != 4001 {
		t.Errorf("sse shutdown event: %+v", ev)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, resp, _ := websocket.DefaultDialer.Dial(e.wsURL(), nil); resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after shutdown: %v", resp)
	}
}
