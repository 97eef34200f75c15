// Package names_test puts one list of names through every protocol that
// takes a queue or channel name, against one real server, and checks that
// they agree: a name refused by one is refused by all. The rule they share
// is the engine's (engine.ValidName, engine.ValidChannel).
//
// Two exceptions are part of the protocols and stated here:
//   - beanstalkd maps tube names onto queue names (internal/api/beanstalk/names.go):
//     tubes may hold "+/;$()" and dot runs, which become "..XX" escapes, so
//     "..", "." and "a/b" are good tubes. The queue a tube maps to must
//     still pass the engine's rule and be addressable over HTTP, which the
//     test checks for every queue that exists at the end.
//   - lmstfy's own rule (^[-_[:alnum:]]+$, and no queue starting with "_")
//     is narrower: it refuses names with a dot, which the others accept.
package names_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/wal"
	"github.com/gorilla/websocket"
)

const wait = 10 * time.Second

type env struct {
	t         *testing.T
	http, bs  string
	cli       *http.Client
	ws        *websocket.Conn
	wsID      uint64
	beanstalk *bufio.ReadWriter
}

func start(t *testing.T) *env {
	t.Helper()
	cfg := server.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.AdminAddr, cfg.BeanstalkAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Sync = wal.SyncNever
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	e := &env{t: t, http: "http://" + s.Addr(server.HTTP), bs: s.Addr(server.Beanstalk)}
	// No redirects: a path the router cleans ("/./") is a refusal here.
	e.cli = &http.Client{Timeout: wait, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.http, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	e.ws = ws
	if r := e.wsCall("connect", map[string]any{"token": ""}); r["error"] != nil {
		t.Fatalf("connect: %s", r["error"])
	}

	c, err := net.DialTimeout("tcp", e.bs, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	e.beanstalk = bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
	return e
}

// pathSeg escapes a name for one path segment, dots included, so "." and
// ".." reach the router as names rather than as path steps.
func pathSeg(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), ".", "%2E")
}

func (e *env) do(method, path string, body []byte) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http+path, bytes.NewReader(body))
	if err != nil {
		// A name that makes no URL is refused before any protocol sees it.
		return 0, err.Error()
	}
	resp, err := e.cli.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) wsCall(op string, body any) map[string]any {
	e.t.Helper()
	e.wsID++
	b, _ := json.Marshal(map[string]any{"id": e.wsID, op: body})
	if err := e.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		e.t.Fatal(err)
	}
	for {
		_ = e.ws.SetReadDeadline(time.Now().Add(wait))
		_, data, err := e.ws.ReadMessage()
		if err != nil {
			e.t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			e.t.Fatalf("%v: %s", err, data)
		}
		if id, ok := m["id"].(float64); ok && uint64(id) == e.wsID {
			return m
		}
	}
}

func (e *env) bsLine(cmd string) string {
	e.t.Helper()
	if _, err := e.beanstalk.WriteString(cmd + "\r\n"); err != nil {
		e.t.Fatal(err)
	}
	if err := e.beanstalk.Flush(); err != nil {
		e.t.Fatal(err)
	}
	line, err := e.beanstalk.ReadString('\n')
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimRight(line, "\r\n")
}

// Each protocol's verdict on one name: accepted, and what it answered.
type verdict struct {
	ok     bool
	answer string
}

func (e *env) queueVerdicts(name string) map[string]verdict {
	out := map[string]verdict{}
	code, body := e.do("POST", "/v1/ns/default/queues/"+pathSeg(name)+"/jobs", []byte(`{"payload":1}`))
	out["http put"] = verdict{code == http.StatusCreated, fmt.Sprint(code, " ", body)}
	code, body = e.do("PUT", "/api/default/"+pathSeg(name)+"?delay=0", []byte("x"))
	out["lmstfy publish"] = verdict{code == http.StatusCreated, fmt.Sprint(code, " ", body)}
	r := e.wsCall("put", map[string]any{"queue": name, "payload": 1})
	out["websocket put"] = verdict{r["error"] == nil, fmt.Sprint(r)}
	line := "(not sent: the name holds a line break or is empty)"
	ok := false
	if name != "" && !strings.ContainsAny(name, "\r\n") {
		line = e.bsLine("use " + name)
		ok = line == "USING "+name
		if ok {
			if put := e.bsLine("put 0 0 60 1\r\nx"); !strings.HasPrefix(put, "INSERTED ") {
				e.t.Errorf("beanstalk put into %q: %s", name, put)
			}
		}
	}
	out["beanstalk use"] = verdict{ok, line}
	return out
}

func (e *env) channelVerdicts(name string) map[string]verdict {
	out := map[string]verdict{}
	code, body := e.do("POST", "/v1/ns/default/channels/"+pathSeg(name)+"/publish", []byte(`{"data":1}`))
	out["http publish"] = verdict{code == http.StatusOK, fmt.Sprint(code, " ", body)}
	r := e.wsCall("publish", map[string]any{"channel": "default/" + name, "data": 1})
	out["websocket publish"] = verdict{r["error"] == nil, fmt.Sprint(r)}
	return out
}

func TestNamesAgreeAcrossProtocols(t *testing.T) {
	e := start(t)
	long := func(n int) string { return strings.Repeat("q", n) }
	for _, tc := range []struct {
		name string
		ok   bool
		// exceptions: protocols whose verdict is the opposite, for the
		// reasons in the package comment.
		exceptions []string
	}{
		{name: "ok-name", ok: true},
		{name: "Ok_Name-9", ok: true},
		{name: long(engine.MaxQueueNameLen), ok: true},
		{name: "a.b", ok: true, exceptions: []string{"lmstfy publish"}},
		{name: "_under", ok: true, exceptions: []string{"lmstfy publish"}},
		{name: "", ok: false},
		{name: ".", ok: false, exceptions: []string{"beanstalk use"}},
		{name: "..", ok: false, exceptions: []string{"beanstalk use"}},
		{name: "a/b", ok: false, exceptions: []string{"beanstalk use"}},
		{name: "a b", ok: false},
		{name: "a:b", ok: false},
		{name: "a#b", ok: false},
		{name: "é", ok: false},
		{name: "a\x00b", ok: false},
		{name: long(engine.MaxQueueNameLen + 1), ok: false},
		{name: long(300), ok: false},
	} {
		got := e.queueVerdicts(tc.name)
		for proto, v := range got {
			want := tc.ok
			for _, x := range tc.exceptions {
				if x == proto {
					want = !want
				}
			}
			if v.ok != want {
				t.Errorf("queue %.40q through %s: accepted %v, want %v (%s)", tc.name, proto, v.ok, want, v.answer)
			}
		}
		if engine.ValidQueueName(tc.name) != tc.ok {
			t.Errorf("queue %.40q: engine.ValidQueueName %v, the table says %v", tc.name, !tc.ok, tc.ok)
		}
	}

	// Every queue that now exists, beanstalk's mapped ones included, has
	// a name by the engine's rule and is reachable over HTTP.
	code, body := e.do("GET", "/v1/ns/default/queues", nil)
	if code != http.StatusOK {
		t.Fatalf("list queues: %d %s", code, body)
	}
	var list struct {
		Queues []struct {
			Name string `json:"name"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Queues) < 5+3 { // the accepted names, and beanstalk's three mapped ones
		t.Errorf("only %d queues exist: %s", len(list.Queues), body)
	}
	for _, q := range list.Queues {
		if !engine.ValidQueueName(q.Name) {
			t.Errorf("queue %q exists but fails engine.ValidQueueName", q.Name)
		}
		if code, body := e.do("GET", "/v1/ns/default/queues/"+pathSeg(q.Name), nil); code != http.StatusOK {
			t.Errorf("queue %q exists but GET over HTTP answers %d %s", q.Name, code, body)
		}
	}
}

func TestChannelNamesAgreeAcrossProtocols(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"news", true},
		{"chat.room-1", true},
		{"user#42", true},
		{"user#4,2", true},
		{strings.Repeat("c", engine.MaxQueueNameLen), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a b", false},
		{"a:b", false},
		{"é", false},
		{"user#", false},
		{"user#a,,b", false},
		{strings.Repeat("c", engine.MaxQueueNameLen+1), false},
		{"u#" + strings.Repeat("9", engine.MaxChannelNameLen), false},
	} {
		for proto, v := range e.channelVerdicts(tc.name) {
			if v.ok != tc.ok {
				t.Errorf("channel %.40q through %s: accepted %v, want %v (%s)", tc.name, proto, v.ok, tc.ok, v.answer)
			}
		}
		if engine.ValidChannel(tc.name) != tc.ok {
			t.Errorf("channel %.40q: engine.ValidChannel %v, the table says %v", tc.name, !tc.ok, tc.ok)
		}
	}
}
