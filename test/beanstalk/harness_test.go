// Package beanstalk_test holds the black-box conformance tests of
// chronoq's beanstalkd protocol. Every test speaks raw bytes over TCP and
// runs twice: against chronoq (a real broker on a temporary directory
// behind the protocol server on a loopback listener) and, when the
// beanstalkd binary is installed, against the original, so the expected
// bytes are checked against beanstalkd itself and not only against our
// reading of its documentation.
package beanstalk_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
	"github.com/chronoq/chronoq/internal/broker"
	"github.com/chronoq/chronoq/internal/testbin"
	"github.com/chronoq/chronoq/internal/wal"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// target is one server under test.
type target struct {
	t       *testing.T
	name    string // "chronoq" or "beanstalkd"
	addr    string
	version string // as stats reports it
	opts    serverOpts

	// chronoq
	b   *broker.Broker
	srv *beanstalk.Server
	dir string
	// beanstalkd
	cmd *exec.Cmd
}

type serverOpts struct {
	maxJob  int           // -z; 0: default
	durable bool          // chronoq: sync always; beanstalkd: -b DIR -f0
	idle    time.Duration // chronoq only: Options.IdleTimeout
}

func (s *target) chronoq() bool { return s.name == "chronoq" }

// quotes reports whether this server quotes string values in stats the
// way 1.13 does (the beanstalkd in Debian 12 is 1.12, which does not).
func (s *target) quotes() bool { return s.version != "1.12" }

// q renders a stats string value as this server prints it.
func (s *target) q(v string) string {
	if s.quotes() {
		return `"` + v + `"`
	}
	return v
}

// each runs fn against chronoq and against beanstalkd, in parallel.
func each(t *testing.T, fn func(t *testing.T, s *target)) { eachWith(t, serverOpts{}, fn) }

func eachWith(t *testing.T, o serverOpts, fn func(t *testing.T, s *target)) {
	t.Parallel()
	t.Run("chronoq", func(t *testing.T) {
		t.Parallel()
		fn(t, startChronoq(t, o))
	})
	t.Run("beanstalkd", func(t *testing.T) {
		t.Parallel()
		fn(t, startBeanstalkd(t, o))
	})
}

func startChronoq(t *testing.T, o serverOpts) *target {
	t.Helper()
	s := &target{t: t, name: "chronoq", version: "1.13", opts: o, dir: t.TempDir()}
	s.open()
	t.Cleanup(s.stop)
	return s
}

func (s *target) open() {
	t := s.t
	sync := wal.SyncNever
	if s.opts.durable {
		sync = wal.SyncAlways
	}
	b, err := broker.Open(broker.Options{Dir: s.dir, Logger: quiet, WAL: wal.Options{Sync: sync, Logger: quiet}})
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	s.b = b
	s.srv = beanstalk.New(b, beanstalk.Options{MaxJobSize: s.opts.maxJob, NoBinlog: !s.opts.durable, IdleTimeout: s.opts.idle, Logger: quiet})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go s.srv.Serve(ln)
}

func (s *target) stop() {
	switch {
	case s.srv != nil:
		if err := s.srv.Close(); err != nil {
			s.t.Errorf("server close: %v", err)
		}
		if err := s.b.Close(); err != nil {
			s.t.Errorf("broker close: %v", err)
		}
		s.srv, s.b = nil, nil
	case s.cmd != nil:
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
		s.cmd = nil
	}
}

// restart stops the server and starts it again on the same data.
func (s *target) restart() {
	s.stop()
	if s.chronoq() {
		s.open()
		return
	}
	s.exec()
}

// drain puts the server in drain mode (beanstalkd: SIGUSR1).
func (s *target) drain() {
	if s.chronoq() {
		s.srv.SetDraining(true)
		return
	}
	s.cmd.Process.Signal(syscall.SIGUSR1)
	time.Sleep(50 * time.Millisecond) // the signal is handled asynchronously
}

func startBeanstalkd(t *testing.T, o serverOpts) *target {
	t.Helper()
	if _, err := exec.LookPath("beanstalkd"); err != nil {
		t.Skip("beanstalkd is not installed (apt-get install beanstalkd): skipping the check against the original")
	}
	s := &target{t: t, name: "beanstalkd", opts: o, dir: t.TempDir()}
	s.exec()
	t.Cleanup(s.stop)
	c := s.dial()
	c.send("stats\r\n")
	m := parseYAML(c.data())
	s.version = strings.Trim(m["version"], `"`)
	c.close()
	return s
}

func (s *target) exec() {
	t := s.t
	port := freePort(t)
	if s.addr != "" {
		_, port, _ = net.SplitHostPort(s.addr)
	}
	args := []string{"-l", "127.0.0.1", "-p", port}
	if s.opts.maxJob > 0 {
		args = append(args, "-z", strconv.Itoa(s.opts.maxJob))
	}
	if s.opts.durable {
		args = append(args, "-b", s.dir, "-f0")
	}
	cmd := exec.Command("beanstalkd", args...)
	cmd.Stderr = io.Discard // it complains about every DRAINING answer
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting beanstalkd: %v", err)
	}
	s.cmd = cmd
	s.addr = net.JoinHostPort("127.0.0.1", port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("beanstalkd did not listen on %s: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePort: testbin.FreePort says why not a closed ":0" listener.
func freePort(t *testing.T) string {
	port, err := testbin.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// client is a raw protocol connection.
type client struct {
	t *testing.T
	s *target
	c net.Conn
	r *bufio.Reader
}

// readTimeout bounds every wait for an answer; protocol waits in the
// tests are far shorter.
const readTimeout = 5 * time.Second

func (s *target) dial() *client {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, readTimeout)
	if err != nil {
		s.t.Fatalf("dial %s: %v", s.addr, err)
	}
	cl := &client{t: s.t, s: s, c: c, r: bufio.NewReader(c)}
	s.t.Cleanup(func() { c.Close() })
	return cl
}

func (c *client) close() { c.c.Close() }

func (c *client) send(s string) {
	c.t.Helper()
	c.c.SetWriteDeadline(time.Now().Add(readTimeout))
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatalf("%s: send %q: %v", c.s.name, s, err)
	}
}

// expect reads exactly len(want) bytes and compares them.
func (c *client) expect(want string) {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(readTimeout))
	got := make([]byte, len(want))
	n, err := io.ReadFull(c.r, got)
	if err != nil || string(got) != want {
		c.t.Fatalf("%s: got %q (%v), want %q", c.s.name, got[:n], err, want)
	}
}

// line reads one answer line, CRLF included.
func (c *client) line() string {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(readTimeout))
	s, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("%s: reading a line: %v (got %q)", c.s.name, err, s)
	}
	return s
}

// data reads "OK <n>\r\n" and its n bytes and CRLF, answering the bytes.
func (c *client) data() string {
	c.t.Helper()
	l := c.line()
	var n int
	if _, err := fmt.Sscanf(l, "OK %d\r\n", &n); err != nil {
		c.t.Fatalf("%s: want OK <bytes>, got %q", c.s.name, l)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		c.t.Fatalf("%s: reading %d bytes of data: %v", c.s.name, n, err)
	}
	if string(buf[n:]) != "\r\n" {
		c.t.Fatalf("%s: data not followed by CRLF: %q", c.s.name, buf)
	}
	return string(buf[:n])
}

// nothing checks that no byte arrives within d.
func (c *client) nothing(d time.Duration) {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.ReadByte()
	if err == nil {
		rest, _ := c.r.Peek(c.r.Buffered())
		c.t.Fatalf("%s: unexpected answer %q", c.s.name, string(b)+string(rest))
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("%s: connection failed while waiting: %v", c.s.name, err)
	}
}

// closed checks that the server closes the connection.
func (c *client) closed() {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(readTimeout))
	b, err := c.r.ReadByte()
	if err == nil {
		c.t.Fatalf("%s: want the connection closed, got byte %q", c.s.name, b)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("%s: want the connection closed, got %v", c.s.name, err)
	}
}

// put puts a job and answers its id.
func (c *client) put(pri, delay, ttr int, body string) uint64 {
	c.t.Helper()
	c.send(fmt.Sprintf("put %d %d %d %d\r\n%s\r\n", pri, delay, ttr, len(body), body))
	l := c.line()
	var id uint64
	if _, err := fmt.Sscanf(l, "INSERTED %d\r\n", &id); err != nil {
		c.t.Fatalf("%s: put: got %q", c.s.name, l)
	}
	return id
}

// statsJob answers one field of stats-job.
func (c *client) statsJob(id uint64) map[string]string {
	c.t.Helper()
	c.send(fmt.Sprintf("stats-job %d\r\n", id))
	return parseYAML(c.data())
}

func (c *client) statsTube(name string) map[string]string {
	c.t.Helper()
	c.send("stats-tube " + name + "\r\n")
	return parseYAML(c.data())
}

func (c *client) stats() map[string]string {
	c.t.Helper()
	c.send("stats\r\n")
	return parseYAML(c.data())
}

// parseYAML reads beanstalkd's flat "key: value" documents, keeping the
// values as printed (quotes included).
func parseYAML(doc string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(doc, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

// keysOf lists the keys of a stats document in order, checking its frame.
func keysOf(t *testing.T, doc string) []string {
	t.Helper()
	if !strings.HasPrefix(doc, "---\n") || !strings.HasSuffix(doc, "\n") {
		t.Fatalf("not a beanstalkd YAML document: %q", doc)
	}
	var keys []string
	line := regexp.MustCompile(`^([a-z-]+): (\S.*)$`)
	for _, l := range strings.Split(strings.TrimSuffix(doc[4:], "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("bad YAML line %q in %q", l, doc)
		}
		keys = append(keys, m[1])
	}
	return keys
}

// okData is the answer carrying a YAML document.
func okData(doc string) string { return "OK " + strconv.Itoa(len(doc)) + "\r\n" + doc + "\r\n" }
