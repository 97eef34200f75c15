package browser

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/testbin"
	"github.com/golang-jwt/jwt/v5"
)

// ---------------------------------------------------------------------------
// Tools: node, chromium, playwright-core

type tools struct {
	root     string // module root
	dir      string // test/browser
	node     string
	chromium string
}

// findTools locates what the test needs; when something is missing it
// skips, or fails with CHRONOQ_REQUIRE_BROWSER=1 (CI).
func findTools(t *testing.T) tools {
	t.Helper()
	b := testbin.FindBrowser(t, "browser test")
	return tools{root: b.Root, dir: filepath.Join(b.Root, "test", "browser"), node: b.Node, chromium: b.Chromium}
}

// buildServer compiles ./cmd/chronoq into a temp dir.
func buildServer(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// ---------------------------------------------------------------------------
// The server process (a reduced copy of test/e2e's harness)

type logBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 4<<20 {
		l.b = append([]byte("...[truncated]...\n"), l.b[len(l.b)-2<<20:]...)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

type server struct {
	t         *testing.T
	bin, dir  string
	args      []string // extra flags of serve
	token     string   // bearer token for HTTP calls, if any
	httpAddr  string
	adminAddr string
	log       *logBuffer // every run's output, in order
	client    *http.Client

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// freePort: testbin.FreePort says why not a closed ":0" listener.
func freePort() (int, error) { return testbin.FreePort() }

// deadPort returns a loopback port where connections are accepted and
// closed at once, without a byte: what a client sees of a WebSocket
// blocked on the way, and of a network cut. Holding it (rather than
// picking a free port and letting it go) keeps another test's server from
// turning up there.
func deadPort(t *testing.T) (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 20 * time.Second,
		Transport: &http.Transport{
			Proxy:           nil,
			DialContext:     (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			IdleConnTimeout: 30 * time.Second,
		},
	}
}

// startServer runs `chronoq serve` on a fresh data dir with free loopback
// ports; restart() runs it again on the same dir and ports.
func startServer(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	s := &server{t: t, bin: bin, dir: t.TempDir(), args: args, log: &logBuffer{}, client: newHTTPClient()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (http %s, admin %s):\n%s", s.httpAddr, s.adminAddr, tail(s.log.String(), 32<<10))
		}
		s.kill()
		s.client.CloseIdleConnections()
	})
	for attempt := 0; ; attempt++ {
		hp, err1 := freePort()
		ap, err2 := freePort()
		if err1 != nil || err2 != nil {
			t.Fatalf("free ports: %v %v", err1, err2)
		}
		if hp == ap {
			continue
		}
		s.httpAddr = fmt.Sprintf("127.0.0.1:%d", hp)
		s.adminAddr = fmt.Sprintf("127.0.0.1:%d", ap)
		err := s.run()
		if err == nil {
			return s
		}
		if attempt == 2 || !strings.Contains(s.log.String(), "address already in use") {
			t.Fatalf("server: %v\n%s", err, tail(s.log.String(), 32<<10))
		}
	}
}

// run starts the process and waits for /healthz.
func (s *server) run() error {
	args := append([]string{"serve", "--data", s.dir, "--http", s.httpAddr, "--admin", s.adminAddr, "--beanstalk", ""}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	fmt.Fprintf(s.log, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	go func() {
		s.err = cmd.Wait()
		close(done)
	}()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("server exited early: %v", s.err)
		default:
		}
		resp, err := c.Get("http://" + s.httpAddr + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill()
	return errors.New("no 200 from /healthz within 15s")
}

func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// stop sends SIGTERM and expects a clean exit within 10 s.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if code := s.cmd.ProcessState.ExitCode(); code != 0 {
			s.t.Errorf("server exit code after SIGTERM = %d (%v), want 0", code, s.err)
		}
	case <-time.After(10 * time.Second):
		s.kill()
		s.t.Errorf("server did not exit within 10s of SIGTERM (killed)")
	}
	s.client.CloseIdleConnections()
}

// restart starts the server again on the same data dir and ports.
func (s *server) restart() {
	s.t.Helper()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.run(); err == nil {
			return
		}
		if !strings.Contains(s.log.String(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port is ours; the kernel may need a moment
	}
	s.t.Fatalf("restart on %s: %v", s.httpAddr, err)
}

// call sends a JSON request and returns the status and the raw answer.
func (s *server) call(addr, method, path string, body any) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// expect is call that requires a status and decodes the answer into out.
func (s *server) expect(want int, method, path string, body, out any) {
	s.t.Helper()
	st, raw := s.call(s.httpAddr, method, path, body)
	if st != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// publish publishes {"n": n} and returns the offset.
func (s *server) publish(channel string, n int) int64 {
	s.t.Helper()
	ns, ch, _ := strings.Cut(channel, "/")
	var res struct {
		Offset int64  `json:"offset"`
		Epoch  string `json:"epoch"`
	}
	s.expect(200, "POST", "/v1/ns/"+ns+"/channels/"+url.PathEscape(ch)+"/publish", map[string]any{"data": map[string]int{"n": n}}, &res)
	return res.Offset
}

// jwtSecret is the HS256 secret of the auth server (--jwt-secret) and of the
// page server's token endpoint.
const jwtSecret = "browser-test-secret-browser-test-secret"

// ---------------------------------------------------------------------------
// The page server: the client module, the page, and SSE paths of the
// page's origin proxied to chronoq (how an app behind a reverse proxy
// uses it; pages may also use chronoq's /v1/sse across origins).

// servePage serves the page and the client; sse maps paths of the page's
// origin to chronoq servers whose /v1/sse they proxy ("/v1/sse" and, say,
// "/auth/v1/sse"); a path ending in "/" ("/v1/") proxies that subtree,
// WebSocket included.
func servePage(t *testing.T, tl tools, sse map[string]string) *httptest.Server {
	t.Helper()
	files := map[string]string{
		"/":                      filepath.Join(tl.dir, "page.html"),
		"/page.html":             filepath.Join(tl.dir, "page.html"),
		"/page.js":               filepath.Join(tl.dir, "page.js"),
		"/clients/js/chronoq.js": filepath.Join(tl.root, "clients", "js", "chronoq.js"),
	}
	mux := http.NewServeMux()
	for path, addr := range sse {
		target := &url.URL{Scheme: "http", Host: addr}
		mux.Handle(path, &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				if strings.HasSuffix(path, "/") {
					// A whole subtree, as a reverse proxy in front of
					// chronoq passes it on: path and Host kept, so the
					// page is same-origin for chronoq's Origin rule.
					r.Out.URL.Path = r.In.URL.Path
					r.Out.Host = r.In.Host
					return
				}
				r.Out.URL.Path = "/v1/sse"
			},
			Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext},
			// Streams cut by a server restart are expected here.
			ErrorLog: log.New(io.Discard, "", 0),
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadGateway)
				fmt.Fprintf(w, `{"error":{"code":"unavailable","message":%q}}`, err.Error())
			},
		})
	}
	// The application's token endpoint: a JWT for ?sub= valid for ?ttl=
	// seconds, allowed ?channels= (comma-separated patterns, default *) of
	// namespace default, publish allowed.
	var minted atomic.Int64
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ttl, err := strconv.Atoi(q.Get("ttl"))
		if err != nil || q.Get("sub") == "" {
			http.Error(w, "want ?sub=&ttl=", http.StatusBadRequest)
			return
		}
		chans := []string{"*"}
		if c := q.Get("channels"); c != "" {
			chans = strings.Split(c, ",")
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": q.Get("sub"), "exp": time.Now().Add(time.Duration(ttl) * time.Second).Unix(),
			"ns": "default", "channels": chans, "publish": true,
			"jti": fmt.Sprintf("%s-%d", q.Get("sub"), minted.Add(1)),
		}).SignedString([]byte(jwtSecret))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, tok)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFile(w, r, f)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// ---------------------------------------------------------------------------
// The browser: node drive.mjs, one JSON line per command and answer

type driver struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *logBuffer
	done   chan struct{}
	nextID int
}

func startDriver(t *testing.T, tl tools, pageURL, screenshot string) *driver {
	t.Helper()
	cmd := exec.Command(tl.node, filepath.Join(tl.dir, "drive.mjs"), "--page", pageURL, "--chromium", tl.chromium, "--screenshot", screenshot)
	cmd.Dir = tl.dir
	// Its own process group: the cleanup ends node and the Chromium it
	// started together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d := &driver{cmd: cmd, lines: make(chan []byte, 64), stderr: &logBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node drive.mjs: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			d.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(d.lines)
	}()
	go func() {
		cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser driver log:\n%s", tail(d.stderr.String(), 32<<10))
		}
		d.close()
	})

	select {
	case line, ok := <-d.lines:
		var m struct {
			Ready     bool   `json:"ready"`
			UserAgent string `json:"userAgent"`
			Fatal     string `json:"fatal"`
		}
		if !ok || json.Unmarshal(line, &m) != nil || !m.Ready {
			<-d.done
			t.Fatalf("browser driver did not start: %s %s\n%s", line, m.Fatal, tail(d.stderr.String(), 16<<10))
		}
		t.Logf("browser: %s", m.UserAgent)
	case <-time.After(40 * time.Second):
		t.Fatalf("browser driver not ready within 40s\n%s", tail(d.stderr.String(), 16<<10))
	}
	return d
}

// close asks the driver to close the browser, then ends the process group.
func (d *driver) close() {
	select {
	case <-d.done:
	default:
		d.stdin.Close() // EOF: the driver closes the browser and exits
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
		}
	}
	// Whatever is left of the group (a Chromium that outlived node).
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}

// do sends one command and decodes the answer's value into out.
func (d *driver) do(cmd map[string]any, out any) error {
	d.nextID++
	cmd["id"] = d.nextID
	b, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("driver: %v", err)
	}
	timeout := time.After(15 * time.Second)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				return errors.New("driver exited")
			}
			var m struct {
				ID    int             `json:"id"`
				Value json.RawMessage `json:"value"`
				Error string          `json:"error"`
			}
			if err := json.Unmarshal(line, &m); err != nil || m.ID != d.nextID {
				continue
			}
			if m.Error != "" {
				return errors.New(m.Error)
			}
			if out != nil {
				return json.Unmarshal(m.Value, out)
			}
			return nil
		case <-timeout:
			return errors.New("driver: no answer within 15s")
		}
	}
}

// eval evaluates a JS expression in the page (awaiting a promise).
func (d *driver) eval(t *testing.T, expr string, out any) {
	t.Helper()
	if err := d.do(map[string]any{"eval": expr}, out); err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
}

func (d *driver) screenshot(t *testing.T, path string) {
	t.Helper()
	if err := d.do(map[string]any{"screenshot": path}, nil); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
}
