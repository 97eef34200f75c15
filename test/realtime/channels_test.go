package realtime

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/pubsub"
)

func TestSubscribePublishOrder(t *testing.T) {
	e := newEnv(t, ws.Options{})
	sub := e.connect("")
	pubr := e.connect("")
	r := sub.ok("subscribe", map[string]any{"channel": "default/news"})
	if r.str("channel") != "default/news" || r.num("offset") != 0 || r.str("epoch") == "" || r["recovered"] != nil {
		t.Fatalf("subscribe answer: %v", r)
	}
	epoch := r.str("epoch")
	for i := 1; i <= 50; i++ {
		res := pubr.ok("publish", map[string]any{"channel": "default/news", "data": map[string]int{"n": i}})
		if res.num("offset") != int64(i) || res.str("epoch") != epoch {
			t.Fatalf("publish %d: %v", i, res)
		}
	}
	// Publications made through the broker (the HTTP API's path) reach
	// socket subscribers too.
	e.publish("default", "news", `"via http"`)
	for i := 1; i <= 51; i++ {
		p := sub.pub()
		if p.num("offset") != int64(i) || p.str("channel") != "default/news" || p.str("epoch") != epoch {
			t.Fatalf("pub %d: %v", i, p)
		}
		want := fmt.Sprintf(`{"n":%d}`, i)
		if i == 51 {
			want = `"via http"`
		}
		if string(p["data"]) != want {
			t.Fatalf("pub %d data %s, want %s", i, p["data"], want)
		}
	}
	// A bare name means the connection's namespace ("default" here).
	sub.ok("unsubscribe", map[string]any{"channel": "news"})
	pubr.ok("publish", map[string]any{"channel": "news", "data": 1})
	sub.ok("subscribe", map[string]any{"channel": "other"})
	pubr.ok("publish", map[string]any{"channel": "other", "data": 2})
	if p := sub.pub(); p.str("channel") != "default/other" {
		t.Fatalf("after unsubscribe, got a pub of %v", p)
	}
	if code := sub.callErr("subscribe", map[string]any{"channel": "other"}); code != "conflict" {
		t.Errorf("second subscribe to a channel: %q, want conflict", code)
	}
	for _, bad := range []string{"", "a b", "ns/", "x/y/z", "bad ns/ch"} {
		if code := sub.callErr("subscribe", map[string]any{"channel": bad}); code != "bad_request" {
			t.Errorf("subscribe %q: %q, want bad_request", bad, code)
		}
	}
}

// TestRecovery: a client that comes back with {since, epoch} gets every
// missed publication, in order, before live ones; after history loss or an
// epoch change it is told recovered:false and gets nothing stale.
func TestRecovery(t *testing.T) {
	e := newEnv(t, ws.Options{})
	e.b.Channels().Configure("small", pubsub.Config{HistorySize: 5})
	c := e.connect("")
	r := c.ok("subscribe", map[string]any{"channel": "default/feed"})
	epoch := r.str("epoch")
	for i := 0; i < 3; i++ {
		e.publish("default", "feed", fmt.Sprint(i))
	}
	last := c.pub()
	for last.num("offset") < 3 {
		last = c.pub()
	}
	c.c.Close() // disconnected; the world goes on
	for i := 3; i < 10; i++ {
		e.publish("default", "feed", fmt.Sprint(i))
	}

	c = e.connect("")
	r = c.ok("subscribe", map[string]any{"channel": "default/feed", "since": 3, "epoch": epoch})
	if string(r["recovered"]) != "true" || r.num("offset") != 10 {
		t.Fatalf("resubscribe: %v", r)
	}
	e.publish("default", "feed", "10") // live, after the recovered ones
	for want := int64(4); want <= 11; want++ {
		p := c.pub()
		if p.num("offset") != want || string(p["data"]) != fmt.Sprint(want-1) {
			t.Fatalf("after recovery: offset %d data %s, want %d", p.num("offset"), p["data"], want)
		}
	}

	// History loss: the ring of "small" holds 5; since=2 needs 3..12.
	s := e.connect("")
	s.ok("subscribe", map[string]any{"channel": "small/x"})
	for i := 0; i < 12; i++ {
		e.publish("small", "x", fmt.Sprint(i))
	}
	r = s.ok("unsubscribe", map[string]any{"channel": "small/x"})
	r = s.ok("subscribe", map[string]any{"channel": "small/x", "since": 2, "epoch": pubEpoch(t, s)})
	if string(r["recovered"]) != "false" || r.num("offset") != 12 {
		t.Fatalf("after history loss: %v", r)
	}
	e.publish("small", "x", `"live"`)
	if p := s.pub(); p.num("offset") != 13 {
		t.Fatalf("after recovered:false the next push must be live, got %v", p)
	}

	// Epoch change: a client from before a restart (another epoch).
	r = c.ok("subscribe", map[string]any{"channel": "default/other", "since": 1, "epoch": "0123456789abcdef"})
	if string(r["recovered"]) != "false" {
		t.Fatalf("foreign epoch: %v", r)
	}
	// An offset without an epoch cannot prove anything either.
	r = c.ok("subscribe", map[string]any{"channel": "default/third", "since": 0})
	if string(r["recovered"]) != "true" {
		t.Fatalf("since 0 on a fresh channel: %v", r)
	}
}

// pubEpoch drains the pubs a client got and returns their epoch.
func pubEpoch(t *testing.T, c *client) string {
	t.Helper()
	var epoch string
	for _, m := range c.pushes {
		if m["pub"] != nil {
			epoch = m.obj("pub").str("epoch")
		}
	}
	c.pushes = nil
	for epoch == "" {
		epoch = c.pub().str("epoch")
	}
	return epoch
}

func TestSSE(t *testing.T) {
	e := newEnv(t, ws.Options{})
	s, resp := e.sse("channel=default/a&channel=default/b", nil)
	if s == nil {
		t.Fatalf("sse: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	// No credential is configured: only the server's own origin may read
	// the stream, which needs no CORS header (origin_test.go has the rest).
	if o := resp.Header.Get("Access-Control-Allow-Origin"); o != "" {
		t.Errorf("Access-Control-Allow-Origin %q on a server without credentials", o)
	}
	a := s.next()
	b := s.next()
	if a.name != "subscribed" || b.name != "subscribed" || b.id == "" {
		t.Fatalf("subscribed events: %+v %+v", a, b)
	}
	ea, eb := a.data.str("epoch"), b.data.str("epoch")
	if b.id != ea+":0,"+eb+":0" {
		t.Fatalf("id %q, want %q", b.id, ea+":0,"+eb+":0")
	}
	e.publish("default", "a", `1`)
	e.publish("default", "b", `"x"`)
	e.publish("default", "a", `2`)
	var lastID string
	for i, want := range []string{"default/a:1", "default/b:1", "default/a:2"} {
		ev := s.next()
		got := fmt.Sprintf("%s:%d", ev.data.str("channel"), ev.data.num("offset"))
		if ev.name != "pub" || got != want {
			t.Fatalf("event %d: %s %v, want %s", i, ev.name, ev.data, want)
		}
		lastID = ev.id
	}
	if lastID != ea+":2,"+eb+":1" {
		t.Fatalf("last id %q", lastID)
	}
	s.resp.Body.Close()

	// Missed while away; the browser comes back with Last-Event-ID.
	e.publish("default", "b", `"y"`)
	e.publish("default", "a", `3`)
	s, _ = e.sse("channel=default/a&channel=default/b", http.Header{"Last-Event-Id": {lastID}})
	got := map[string]bool{}
	for i := 0; i < 4; i++ {
		ev := s.next()
		switch ev.name {
		case "subscribed":
			if string(ev.data["recovered"]) != "true" {
				t.Fatalf("not recovered: %v", ev.data)
			}
		case "pub":
			got[fmt.Sprintf("%s:%d", ev.data.str("channel"), ev.data.num("offset"))] = true
		}
	}
	if !got["default/a:3"] || !got["default/b:2"] {
		t.Fatalf("recovered pubs: %v", got)
	}

	// A stale id: recovered false, never a silent gap.
	s, _ = e.sse("channel=default/a&since=1&epoch=feedfacefeedface", nil)
	if ev := s.next(); ev.name != "subscribed" || string(ev.data["recovered"]) != "false" {
		t.Fatalf("stale position: %+v", ev)
	}

	if _, resp := e.sse("", nil); resp.StatusCode != 400 {
		t.Errorf("no channel: %d", resp.StatusCode)
	}
	if _, resp := e.sse("channel="+url.QueryEscape("a b"), nil); resp.StatusCode != 400 {
		t.Errorf("bad channel: %d", resp.StatusCode)
	}
}
