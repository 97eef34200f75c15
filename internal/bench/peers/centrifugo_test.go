package peers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/bench"
)

// fakeCentrifugo speaks the part of Centrifugo's protocol the target
// uses: connect and subscribe replies, publications pushed several to a
// frame (one JSON object per line) after a ping, and the HTTP publish API.
type fakeCentrifugo struct {
	t       *testing.T
	mu      sync.Mutex
	subs    []*websocket.Conn
	pong    chan string
	channel string
}

func (f *fakeCentrifugo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/connection/websocket":
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			var cmd struct {
				ID        uint32           `json:"id"`
				Connect   *json.RawMessage `json:"connect"`
				Subscribe *struct {
					Channel string `json:"channel"`
				} `json:"subscribe"`
			}
			json.Unmarshal(msg, &cmd)
			switch {
			case cmd.Connect != nil:
				c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{"client":"c1","version":"6.9.1","ping":25,"pong":true}}`))
			case cmd.Subscribe != nil:
				// f.mu also orders every write to the socket
				f.mu.Lock()
				c.WriteMessage(websocket.TextMessage, []byte(`{"id":2,"subscribe":{}}`))
				f.channel = cmd.Subscribe.Channel
				f.subs = append(f.subs, c)
				f.mu.Unlock()
			default:
				f.pong <- string(msg)
			}
		}
	case "/api/publish":
		if r.Header.Get("X-API-Key") != "k" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Channel string          `json:"channel"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			f.t.Errorf("publish body %q: %v", body, err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if p.Channel != f.channel {
			w.Write([]byte(`{"error":{"code":102,"message":"unknown channel"}}`))
			return
		}
		push := `{"push":{"channel":"` + p.Channel + `","pub":{"data":` + string(p.Data) + `,"offset":1}}}`
		for _, c := range f.subs {
			// a ping, then the publication twice in one frame
			c.WriteMessage(websocket.TextMessage, []byte("{}"))
			c.WriteMessage(websocket.TextMessage, []byte(push+"\n"+push))
		}
		w.Write([]byte(`{"result":{}}`))
	}
}

func TestCentrifugoTarget(t *testing.T) {
	f := &fakeCentrifugo{t: t, pong: make(chan string, 4)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tgt, err := openCentrifugo(ctx, bench.Config{Token: "k"}, addr, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if _, err := tgt.Connect(ctx); err == nil {
		t.Fatal("queue connection: want unsupported")
	}
	got := make(chan string, 4)
	sub, err := tgt.(bench.FanoutTarget).Subscribe(ctx, func(p []byte) { got <- string(p) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := tgt.(bench.FanoutTarget).Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case p := <-got:
			if p != "hello" {
				t.Fatalf("publication %d: %q, want hello", i, p)
			}
		case <-ctx.Done():
			t.Fatalf("publication %d never arrived", i)
		}
	}
	select {
	case p := <-f.pong:
		if p != "{}" {
			t.Fatalf("answer to the ping: %q, want {}", p)
		}
	case <-ctx.Done():
		t.Fatal("the ping was not answered")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("subscriber failed: %v", err)
	}

	other, _ := openCentrifugo(ctx, bench.Config{Token: "k"}, addr, "run-2")
	defer other.Close()
	p2, _ := other.(bench.FanoutTarget).Publisher(ctx)
	if err := p2.Publish(ctx, []byte("x")); err == nil || !strings.Contains(err.Error(), "unknown channel") {
		t.Fatalf("publication refused by the API: got %v, want its error", err)
	}
	bad, _ := openCentrifugo(ctx, bench.Config{Token: "wrong"}, addr, "run-1")
	defer bad.Close()
	p3, _ := bad.(bench.FanoutTarget).Publisher(ctx)
	if err := p3.Publish(ctx, []byte("x")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong key: got %v, want HTTP 401", err)
	}
}
