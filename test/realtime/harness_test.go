// Package realtime holds the black-box tests of chronoq's real-time API:
// the real server (internal/server, as cmd/chronoq starts it) on a
// temporary directory and loopback ports, and Go WebSocket and SSE
// clients speaking the protocol of docs/realtime.md. Nothing waits on a clock to decide an outcome: each
// test waits for the event it expects, with a generous deadline that only
// a broken server reaches.
package realtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
	"github.com/chronoq/chronoq/internal/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// wait bounds every blocking read in these tests.
const wait = 15 * time.Second

type env struct {
	t     *testing.T
	b     *broker.Broker
	rt    *ws.Server
	srv   listener // the main listener: /v1/ws, /v1/sse
	admin listener // the admin listener: /admin/disconnect
}

// listener is one of the server's HTTP listeners.
type listener struct{ URL string }

// newEnv starts a server. opts.JWT and opts.AdminToken become the
// server's own settings; the other non-zero fields of opts replace the
// real-time defaults (tests shrink limits and timers).
func newEnv(t *testing.T, opts ws.Options) *env {
	t.Helper()
	cfg := server.Default()
	cfg.DataDir, cfg.Logger, cfg.Sync, cfg.SegmentSize = t.TempDir(), quiet, wal.SyncNever, 1<<20
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.JWT, cfg.AdminToken = opts.JWT, opts.AdminToken
	if opts.Logger != nil {
		cfg.Logger = opts.Logger
	}
	cfg.Tune.Realtime = func(o *ws.Options) {
		set := func(v *int, to int) {
			if to != 0 {
				*v = to
			}
		}
		setDur := func(v *time.Duration, to time.Duration) {
			if to != 0 {
				*v = to
			}
		}
		set(&o.MaxConnections, opts.MaxConnections)
		set(&o.ConnectBurst, opts.ConnectBurst)
		set(&o.MaxQueue, opts.MaxQueue)
		set(&o.MaxQueueBytes, opts.MaxQueueBytes)
		set(&o.MaxSubscriptions, opts.MaxSubscriptions)
		set(&o.MaxInflight, opts.MaxInflight)
		set(&o.MaxPrefetch, opts.MaxPrefetch)
		if opts.ConnectRate != 0 {
			o.ConnectRate = opts.ConnectRate
		}
		if opts.MaxMessageSize != 0 {
			o.MaxMessageSize = opts.MaxMessageSize
		}
		setDur(&o.PingInterval, opts.PingInterval)
		setDur(&o.PongTimeout, opts.PongTimeout)
		setDur(&o.WriteTimeout, opts.WriteTimeout)
		setDur(&o.ConnectTimeout, opts.ConnectTimeout)
		setDur(&o.ExpiryGrace, opts.ExpiryGrace)
		setDur(&o.ConsumeWait, opts.ConsumeWait)
		if opts.CheckOrigin != nil {
			o.CheckOrigin = opts.CheckOrigin
		}
		if opts.Clock != nil {
			o.Clock = opts.Clock
		}
	}
	s := servertest.Start(t, cfg, wait)
	e := &env{t: t, b: s.Broker(), rt: s.Realtime()}
	e.srv.URL, e.admin.URL = servertest.URL(s, server.HTTP), servertest.URL(s, server.Admin)
	return e
}

func (e *env) wsURL() string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v1/ws" }

// msg is one server message, its top-level fields still raw.
type msg map[string]json.RawMessage

func (m msg) str(k string) string {
	var s string
	json.Unmarshal(m[k], &s)
	return s
}

func (m msg) obj(k string) msg {
	var o msg
	json.Unmarshal(m[k], &o)
	return o
}

func (m msg) num(k string) int64 {
	var n int64
	json.Unmarshal(m[k], &n)
	return n
}

type client struct {
	t      *testing.T
	c      *websocket.Conn
	id     uint64
	pushes []msg // read while waiting for an answer
}

func (e *env) dial() *client {
	e.t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(e.wsURL(), nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		e.t.Fatalf("dial: %v (status %d)", err, status)
	}
	cl := &client{t: e.t, c: c}
	e.t.Cleanup(func() { c.Close() })
	return cl
}

// connect dials and sends connect with tok.
func (e *env) connect(tok string) *client {
	e.t.Helper()
	c := e.dial()
	if r := c.call("connect", map[string]any{"token": tok}); r["error"] != nil {
		e.t.Fatalf("connect: %s", r["error"])
	}
	return c
}

func (c *client) send(op string, body any) uint64 {
	c.t.Helper()
	c.id++
	b, _ := json.Marshal(map[string]any{"id": c.id, op: body})
	if err := c.c.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send %s: %v", op, err)
	}
	return c.id
}

// read returns the next message; a read error fails the test.
func (c *client) read() msg {
	c.t.Helper()
	m, err := c.tryRead()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

func (c *client) tryRead() (msg, error) {
	c.c.SetReadDeadline(time.Now().Add(wait))
	_, data, err := c.c.ReadMessage()
	if err != nil {
		return nil, err
	}
	var m msg
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("bad JSON from server: %v: %s", err, data)
	}
	return m, nil
}

// call sends a command and returns its answer ({"id","result"|"error"}),
// keeping pushes that arrive first.
func (c *client) call(op string, body any) msg {
	c.t.Helper()
	id := c.send(op, body)
	return c.answer(id)
}

func (c *client) answer(id uint64) msg {
	c.t.Helper()
	for {
		m := c.read()
		if _, ok := m["id"]; ok {
			if uint64(m.num("id")) != id {
				c.t.Fatalf("answer for id %d while waiting for %d: %v", m.num("id"), id, m)
			}
			return m
		}
		c.pushes = append(c.pushes, m)
	}
}

// ok calls and fails the test on an error answer.
func (c *client) ok(op string, body any) msg {
	c.t.Helper()
	r := c.call(op, body)
	if r["error"] != nil {
		c.t.Fatalf("%s %v: %s", op, body, r["error"])
	}
	return r.obj("result")
}

// callErr calls and returns the error code of the answer ("" on success).
func (c *client) callErr(op string, body any) string {
	c.t.Helper()
	r := c.call(op, body)
	return r.obj("error").str("code")
}

// push returns the next server push.
func (c *client) push() msg {
	c.t.Helper()
	if len(c.pushes) > 0 {
		m := c.pushes[0]
		c.pushes = c.pushes[1:]
		return m
	}
	m := c.read()
	if _, ok := m["id"]; ok {
		c.t.Fatalf("unexpected answer while waiting for a push: %v", m)
	}
	return m
}

// pub returns the next push, which must be a publication.
func (c *client) pub() msg {
	c.t.Helper()
	m := c.push()
	if m["pub"] == nil {
		c.t.Fatalf("want a pub, got %v", m)
	}
	return m.obj("pub")
}

// closed reads until the server closes and returns the close code and
// the disconnect push, if any.
func (c *client) closed() (int, msg) {
	c.t.Helper()
	var disc msg
	for _, p := range c.pushes {
		if p["disconnect"] != nil {
			disc = p.obj("disconnect")
		}
	}
	for {
		m, err := c.tryRead()
		if err != nil {
			var ce *websocket.CloseError
			if e, ok := err.(*websocket.CloseError); ok {
				ce = e
			}
			if ce == nil {
				c.t.Fatalf("connection ended without a close frame: %v", err)
			}
			return ce.Code, disc
		}
		if m["disconnect"] != nil {
			disc = m.obj("disconnect")
		}
	}
}

// sseStream is a parsed text/event-stream.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

type event struct {
	name, id string
	data     msg
}

func (e *env) sse(query string, header http.Header) (*sseStream, *http.Response) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/sse?"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		return nil, resp
	}
	return &sseStream{t: e.t, resp: resp, r: bufio.NewReader(resp.Body)}, resp
}

// next returns the next event, skipping comments (pings).
func (s *sseStream) next() event {
	s.t.Helper()
	type res struct {
		ev  event
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var ev event
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.name != "" {
					ch <- res{ev: ev}
					return
				}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.t.Fatalf("sse read: %v", r.err)
		}
		return r.ev
	case <-time.After(wait):
		s.t.Fatal("sse: no event in time")
	}
	return event{}
}

func (e *env) put(ns, q string, n int) []string {
	e.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		r, err := e.b.Put(context.Background(), ns, q, engine.PutRequest{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), PayloadJSON: true})
		if err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func (e *env) reserved(ns, q string) uint64 {
	e.t.Helper()
	info, err := e.b.GetQueue(context.Background(), ns, q)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Counts.Reserved
}

func (e *env) publish(ns, ch string, data string) (uint64, string) {
	e.t.Helper()
	off, epoch, err := e.b.Publish(context.Background(), ns, ch, []byte(data))
	if err != nil {
		e.t.Fatal(err)
	}
	return off, epoch
}

func (e *env) adminPost(path, tok, body string) (int, msg) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.admin.URL+path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m msg
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}
