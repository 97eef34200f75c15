// Package browser tests clients/js/chronoq.js in a real browser: Debian's
// Chromium, headless, driven by playwright-core (drive.mjs) against the real
// chronoq binary. It skips when node, chromium or test/browser/node_modules
// are missing, unless CHRONOQ_REQUIRE_BROWSER=1 (CI), which makes that a
// failure.
package browser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type pubRec struct {
	Offset int64           `json:"offset"`
	Epoch  string          `json:"epoch"`
	Data   json.RawMessage `json:"data"`
}

type position struct {
	Offset int64  `json:"offset"`
	Epoch  string `json:"epoch"`
}

type jobEvent struct {
	Event     string          `json:"event"`
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Namespace string          `json:"namespace"`
	State     string          `json:"state"`
	Attempt   int             `json:"attempt"`
	Result    json.RawMessage `json:"result"`
}

type panel struct {
	Channel    string `json:"channel"`
	State      string `json:"state"`
	Transport  string `json:"transport"`
	Reconnects int    `json:"reconnects"`
	Ready      bool   `json:"ready"`
	Pubs       []pubRec
	Resets     []struct {
		Offset   int64    `json:"offset"`
		Epoch    string   `json:"epoch"`
		Previous position `json:"previous"`
		At       int      `json:"at"` // publications received before it
	} `json:"resets"`
	Recovered []struct {
		From  int64  `json:"from"`
		To    int64  `json:"to"`
		Epoch string `json:"epoch"`
	} `json:"recovered"`
	Errors      []string `json:"errors"`
	Disconnects []struct {
		Code      int    `json:"code"`
		Reason    string `json:"reason"`
		Reconnect bool   `json:"reconnect"`
	} `json:"disconnects"`
	Events     []jobEvent `json:"events"`
	Done       *jobEvent  `json:"done"`
	Transports []string   `json:"transports"`
	TokenCalls int        `json:"tokenCalls"`
	Session    struct {
		Namespace string `json:"namespace"`
		User      string `json:"user"`
		Expires   string `json:"expires"`
	} `json:"session"`
}

// ns returns the "n" of every publication received, in order.
func (p panel) ns() []int {
	out := make([]int, 0, len(p.Pubs))
	for _, x := range p.Pubs {
		var d struct{ N int }
		json.Unmarshal(x.Data, &d)
		out = append(out, d.N)
	}
	return out
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func hasPrefix(a, p []int) bool {
	return len(a) >= len(p) && fmt.Sprint(a[:len(p)]) == fmt.Sprint(p)
}

func (p panel) brief() string {
	b, _ := json.Marshal(map[string]any{
		"state": p.State, "transport": p.Transport, "reconnects": p.Reconnects, "ready": p.Ready,
		"n": p.ns(), "resets": p.Resets, "recovered": p.Recovered, "errors": p.Errors,
		"disconnects": p.Disconnects, "events": p.Events, "done": p.Done,
	})
	return string(b)
}

// The channels of the test. "web" is created with durable channel history,
// "default" keeps history in memory only.
const (
	chDurable = "web/news"     // WebSocket, durable namespace
	chDefault = "default/news" // WebSocket, memory-only history
	chSSE     = "web/feed"     // SSE forced, durable namespace
	chFall    = "default/feed" // auto: WebSocket cannot connect, falls back to SSE
	chJobs    = "web/jobs"     // job notifications
)

// TestBrowserClient runs clients/js/chronoq.js in headless Chromium against
// the real server. One browser, one page, a panel (client) per case:
//   - channels: live publications in order, recovery after a network cut,
//     a server restart with durable history (no gap, same epoch) and
//     without (the app is told to reload), SSE forced and as a fallback,
//     watching a job to completion, publishing from the browser;
//   - auth: JWTs from getToken refreshed on the open connection, a bad
//     token and an admin disconnect that must not be retried, a refused
//     subscription.
func TestBrowserClient(t *testing.T) {
	start := time.Now()
	tl := findTools(t)
	e := &env{tl: tl, start: start}
	e.bin = buildServer(t)
	t.Logf("built the server in %v", time.Since(start).Round(time.Millisecond))
	dead, err := deadPort(t)
	if err != nil {
		t.Fatal(err)
	}
	e.dead = dead
	shot := os.Getenv("CHRONOQ_BROWSER_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "browser.png")
	}
	// The servers belong to the whole test, so that the screenshot at the
	// end shows every client still connected.
	e.srv = startServer(t, e.bin)
	e.authSrv = startServer(t, e.bin, "--jwt-secret", jwtSecret, "--admin-token", authAdminToken)
	e.authSrv.token = authAdminToken
	// The plain server has no credential, so chronoq refuses pages of
	// other origins (docs/realtime.md, Origin): the page reaches it through
	// its own origin's /v1/, as an app behind a reverse proxy would. The
	// auth server's WebSocket goes across origins (a token is configured);
	// its SSE goes through a same-origin path too.
	e.page = servePage(t, tl, map[string]string{"/auth/v1/sse": e.authSrv.httpAddr, "/v1/": e.srv.httpAddr})
	e.d = startDriver(t, tl, fmt.Sprintf("%s/page.html?dead=%d", e.page.URL, dead), shot)
	t.Logf("browser up after %v", time.Since(start).Round(time.Millisecond))

	t.Run("channels", e.testChannels)
	t.Run("auth", e.testAuth)

	// A screenshot of the page, for people: every panel with what it got.
	e.d.screenshot(t, shot)
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot %s: %d bytes, not a PNG", shot, len(png))
	}
	t.Logf("screenshot %s (%d bytes); done after %v", shot, len(png), time.Since(start).Round(time.Millisecond))
}

// env is what the subtests share: the server binary, the page and the
// browser.
type env struct {
	tl    tools
	bin   string
	page  *httptest.Server
	d     *driver
	dead  int // a loopback port that closes every connection at once
	start time.Time

	srv     *server // for channels: no credentials
	authSrv *server // for auth: JWT secret and admin token
}

func (e *env) snapshot(t *testing.T) map[string]panel {
	t.Helper()
	var s map[string]panel
	e.d.eval(t, "t.snapshot()", &s)
	return s
}

// waitFor polls the page until cond holds for the named panel; on timeout
// it reports the panel and returns false (the test goes on, so that one
// missing feature does not hide the others).
func (e *env) waitFor(t *testing.T, name, what string, limit time.Duration, cond func(p panel) bool) (panel, bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		p := e.snapshot(t)[name]
		if cond(p) {
			return p, true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %s: not within %v; panel: %s", name, what, limit, p.brief())
			return p, false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// js formats a call of the page's test API with JSON arguments.
func js(fn string, args ...any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			panic(err)
		}
		parts[i] = string(b)
	}
	return "t." + fn + "(" + strings.Join(parts, ", ") + ")"
}

type opts map[string]any

func (e *env) testChannels(t *testing.T) {
	srv := e.srv
	srv.t = t
	server := e.page.URL // proxied to srv (see the page server above)

	// The durable namespace. Created plainly when the server refuses the
	// channel_history setting, so that everything else is still checked.
	nsBody := map[string]any{"name": "web", "auto_create_queues": true, "channel_history": map[string]any{"durable": true}}
	if st, raw := srv.call(srv.adminAddr, "POST", "/admin/namespaces", nsBody); st != 201 {
		t.Errorf("POST /admin/namespaces with channel_history.durable: status %d: %s (durable channel history missing: the restart checks of %s and %s will fail)", st, bytes.TrimSpace(raw), chDurable, chSSE)
		delete(nsBody, "channel_history")
		if st, raw := srv.call(srv.adminAddr, "POST", "/admin/namespaces", nsBody); st != 201 {
			t.Fatalf("POST /admin/namespaces: status %d: %s", st, raw)
		}
	}

	subscribers := []string{"durable", "default", "sse", "fallback"}
	channelOf := map[string]string{"durable": chDurable, "default": chDefault, "sse": chSSE, "fallback": chFall}
	next := map[string]int{} // the next "n" per channel
	publishAll := func(k int) {
		t.Helper()
		for _, name := range subscribers {
			for i := 0; i < k; i++ {
				next[name]++
				srv.publish(channelOf[name], next[name])
			}
		}
	}

	// 1. Subscribe: two WebSocket clients, one forced to SSE, one whose
	// WebSocket URL leads nowhere (falls back to SSE after 2 failures), and
	// a job watcher.
	e.d.eval(t, js("start", "durable", opts{"server": server, "channel": chDurable}), nil)
	e.d.eval(t, js("start", "default", opts{"server": server, "channel": chDefault}), nil)
	e.d.eval(t, js("start", "sse", opts{"server": server, "channel": chSSE, "transport": "sse"}), nil)
	e.d.eval(t, js("start", "fallback", opts{"server": server, "channel": chFall, "fallbackAfter": 2,
		"wsUrl": fmt.Sprintf("ws://127.0.0.1:%d/v1/ws", e.dead)}), nil)
	e.d.eval(t, js("watch", "job", opts{"server": server, "channel": chJobs, "jobId": "job-1"}), nil)
	for _, name := range append(subscribers, "job") {
		if _, ok := e.waitFor(t, name, "subscribed", 15*time.Second, func(p panel) bool { return p.Ready && p.State == "connected" }); !ok {
			t.FailNow()
		}
	}
	s := e.snapshot(t)
	for name, want := range map[string]string{"durable": "websocket", "default": "websocket", "sse": "sse", "fallback": "sse", "job": "websocket"} {
		if s[name].Transport != want {
			t.Errorf("%s: transport %q, want %q", name, s[name].Transport, want)
		}
	}
	if fmt.Sprint(s["fallback"].Transports) != "[sse]" {
		t.Errorf("fallback: transport switches %v, want [sse]", s["fallback"].Transports)
	}

	// 2. Live publications arrive in order, once.
	publishAll(5)
	for _, name := range subscribers {
		e.waitFor(t, name, "publications 1..5", 10*time.Second, func(p panel) bool { return len(p.Pubs) >= 5 })
	}
	s = e.snapshot(t)
	epochs := map[string]string{}
	for _, name := range subscribers {
		p := s[name]
		if fmt.Sprint(p.ns()) != fmt.Sprint(seq(1, 5)) {
			t.Errorf("%s: received %v, want %v", name, p.ns(), seq(1, 5))
		}
		for i, x := range p.Pubs {
			if x.Offset != int64(i+1) || x.Epoch == "" || (i > 0 && x.Epoch != p.Pubs[0].Epoch) {
				t.Errorf("%s: publication %d at offset %d epoch %q", name, i+1, x.Offset, x.Epoch)
			}
		}
		if len(p.Pubs) > 0 {
			epochs[name] = p.Pubs[0].Epoch
		}
	}
	t.Logf("live publications checked after %v", time.Since(e.start).Round(time.Millisecond))

	// 3. Job watching: a job put with notify, taken and acked over HTTP.
	e.checkJob(t, srv)

	// 4. A network cut: the connections drop, publications go on, the
	// clients come back and recover from the (in-memory) history.
	for _, name := range subscribers {
		e.d.eval(t, js("cut", name), nil)
	}
	for _, name := range subscribers {
		e.waitFor(t, name, "noticed the cut", 5*time.Second, func(p panel) bool { return p.State != "connected" })
	}
	publishAll(3) // 6..8, missed while cut
	for _, name := range subscribers {
		e.d.eval(t, js("restore", name), nil)
	}
	for _, name := range subscribers {
		p, ok := e.waitFor(t, name, "recovered 6..8 after the cut", 15*time.Second, func(p panel) bool {
			return len(p.Pubs) >= 8 && len(p.Recovered) >= 1 && p.State == "connected"
		})
		if !ok {
			continue
		}
		if fmt.Sprint(p.ns()) != fmt.Sprint(seq(1, 8)) {
			t.Errorf("%s: after the cut received %v, want %v", name, p.ns(), seq(1, 8))
		}
		if len(p.Resets) != 0 {
			t.Errorf("%s: reset after a cut with history available: %+v", name, p.Resets)
		}
		if r := p.Recovered[0]; r.From != 5 || r.To != 8 || r.Epoch != epochs[name] {
			t.Errorf("%s: recovered %+v, want from 5 to 8 in epoch %s", name, r, epochs[name])
		}
		if p.Reconnects < 1 {
			t.Errorf("%s: reconnects %d after the cut", name, p.Reconnects)
		}
	}
	t.Logf("network cut checked after %v", time.Since(e.start).Round(time.Millisecond))

	// 5. Server restart (SIGTERM, same data dir and port). Publications
	// made right after it comes back may reach the clients live or through
	// recovery, depending on who is first: with durable history nothing
	// may be missing either way.
	srv.stop()
	for _, name := range subscribers {
		e.waitFor(t, name, "noticed the shutdown", 10*time.Second, func(p panel) bool { return p.State != "connected" })
	}
	srv.restart()
	t.Logf("server restarted after %v", time.Since(e.start).Round(time.Millisecond))
	publishAll(3) // 9..11
	for _, name := range subscribers {
		e.waitFor(t, name, "reconnected after the restart", 15*time.Second, func(p panel) bool {
			return p.State == "connected" && p.Reconnects >= 2 && (len(p.Resets) > 0 || len(p.Pubs) >= 11)
		})
	}
	publishAll(2) // 12..13, live
	for _, name := range []string{"durable", "sse"} {
		p, ok := e.waitFor(t, name, "every publication 1..13 across the restart", 10*time.Second, func(p panel) bool { return len(p.Pubs) >= 13 || len(p.Resets) > 0 })
		if !ok {
			continue
		}
		if len(p.Resets) != 0 {
			t.Errorf("%s (durable history): reset after the restart (recovered:false): %+v", name, p.Resets)
			continue
		}
		if fmt.Sprint(p.ns()) != fmt.Sprint(seq(1, 13)) {
			t.Errorf("%s: received %v, want %v", name, p.ns(), seq(1, 13))
		}
		for i, x := range p.Pubs {
			if x.Offset != int64(i+1) || x.Epoch != epochs[name] {
				t.Errorf("%s: publication %d at offset %d epoch %q, want offset %d epoch %s (same across the restart)", name, i+1, x.Offset, x.Epoch, i+1, epochs[name])
				break
			}
		}
		if len(p.Recovered) < 2 {
			t.Errorf("%s: onRecovered %d times, want a second one after the restart", name, len(p.Recovered))
		}
	}
	for _, name := range []string{"default", "fallback"} {
		p, ok := e.waitFor(t, name, "reset after the restart, then 12..13 live", 10*time.Second, func(p panel) bool {
			n := p.ns()
			return len(p.Resets) > 0 && len(n) > 0 && n[len(n)-1] == 13
		})
		if !ok {
			continue
		}
		if len(p.Resets) != 1 {
			t.Errorf("%s: %d resets, want 1: %+v", name, len(p.Resets), p.Resets)
		}
		r := p.Resets[0]
		if r.Previous.Epoch != epochs[name] || r.Previous.Offset != 8 || r.Epoch == "" || r.Epoch == epochs[name] || r.At != 8 {
			t.Errorf("%s: reset %+v, want previous {8 %s}, a new epoch, after 8 publications", name, r, epochs[name])
		}
		// Before the reset: 1..8. After it: whatever of 9..11 was
		// published after the resubscribe, then 12, 13 — contiguous, in
		// the new epoch, offsets following the reset's.
		n := p.ns()
		if !hasPrefix(n, seq(1, 8)) {
			t.Errorf("%s: received %v, want 1..8 first", name, n)
			continue
		}
		after := n[8:]
		if len(after) < 2 || fmt.Sprint(after) != fmt.Sprint(seq(14-len(after), 13)) {
			t.Errorf("%s: after the reset received %v, want a contiguous run ending with 12, 13", name, after)
		}
		for i, x := range p.Pubs[8:] {
			if x.Epoch != r.Epoch || x.Offset != r.Offset+int64(i)+1 {
				t.Errorf("%s: publication after the reset at offset %d epoch %q, want offset %d epoch %s", name, x.Offset, x.Epoch, r.Offset+int64(i)+1, r.Epoch)
				break
			}
		}
	}
	s = e.snapshot(t)
	for _, name := range []string{"durable", "default"} {
		found := false
		for _, x := range s[name].Disconnects {
			if x.Code == 4001 && x.Reason == "shutdown" && x.Reconnect {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no disconnect {4001 shutdown reconnect} seen at the restart: %+v", name, s[name].Disconnects)
		}
	}

	// 6. Publishing from the browser, over its WebSocket: it comes back
	// to the subscribers like any other publication.
	var res struct {
		Offset int64  `json:"offset"`
		Epoch  string `json:"epoch"`
	}
	e.d.eval(t, js("publish", "durable", map[string]int{"n": 14}), &res)
	if res.Offset != 14 || res.Epoch != epochs["durable"] {
		t.Errorf("publish from the browser: %+v, want offset 14 in epoch %s", res, epochs["durable"])
	}
	e.waitFor(t, "durable", "its own publication 14", 10*time.Second, func(p panel) bool {
		n := p.ns()
		return len(n) > 0 && n[len(n)-1] == 14
	})
	var sse struct {
		Message string `json:"message"`
	}
	e.d.eval(t, `t.publish("sse", {n: 99}).then(() => ({message: "published"}), (e) => ({message: e.message}))`, &sse)
	if !strings.Contains(sse.Message, "not_supported") {
		t.Errorf("publish over SSE: %q, want a not_supported error", sse.Message)
	}
	for name, p := range e.snapshot(t) {
		if len(p.Errors) > 0 {
			t.Logf("%s: errors reported by the client: %v", name, p.Errors)
		}
	}
}

// checkJob puts a job with notify, takes it and acks it with a result over
// HTTP; the page's watchJob must see reserved, then completed with the
// result, and its promise must resolve.
func (e *env) checkJob(t *testing.T, srv *server) {
	t.Helper()
	_, ch, _ := strings.Cut(chJobs, "/")
	put := map[string]any{"id": "job-1", "payload": map[string]string{"img": "cat.png"}, "notify": ch}
	st, raw := srv.call(srv.httpAddr, "POST", "/v1/ns/web/queues/tasks/jobs", put)
	if st != 201 {
		t.Errorf("put with notify: status %d: %s (job notifications missing on the server?)", st, bytes.TrimSpace(raw))
		return
	}
	var took struct {
		Jobs []struct {
			ID      string `json:"id"`
			Receipt string `json:"receipt"`
		} `json:"jobs"`
	}
	srv.expect(200, "POST", "/v1/ns/web/queues/tasks/take", map[string]any{"max": 1, "wait": "5s"}, &took)
	if len(took.Jobs) != 1 || took.Jobs[0].ID != "job-1" {
		t.Fatalf("take: %+v, want job-1", took.Jobs)
	}
	if _, ok := e.waitFor(t, "job", "reserved event", 10*time.Second, func(p panel) bool { return len(p.Events) >= 1 }); !ok {
		return
	}
	srv.expect(200, "POST", "/v1/ns/web/queues/tasks/jobs/job-1/ack", map[string]any{"receipt": took.Jobs[0].Receipt, "result": map[string]string{"thumb": "cat-64.png"}}, nil)
	p, ok := e.waitFor(t, "job", "completed event and done", 10*time.Second, func(p panel) bool { return p.Done != nil })
	if !ok {
		return
	}
	if len(p.Events) != 2 {
		t.Errorf("job events %+v, want reserved then completed", p.Events)
		return
	}
	r, c := p.Events[0], p.Events[1]
	if r.Event != "reserved" || r.ID != "job-1" || r.Queue != "tasks" || r.Namespace != "web" || r.State != "reserved" || r.Attempt != 1 {
		t.Errorf("first job event %+v, want reserved job-1 in web/tasks, state reserved, attempt 1", r)
	}
	if c.Event != "completed" || c.ID != "job-1" || c.Attempt != 1 || !jsonEqual(c.Result, `{"thumb":"cat-64.png"}`) {
		t.Errorf("second job event %+v (result %s), want completed with the result", c, c.Result)
	}
	if p.Done.Event != "completed" {
		t.Errorf("watchJob resolved with %+v, want the completed event", p.Done)
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
