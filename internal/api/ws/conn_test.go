package ws

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// pipeEnd is a net.Conn whose reads and writes block until the test lets
// them fail, so that the order of a reader's and a writer's failure can be
// chosen (or raced) at will.
type pipeEnd struct {
	gone      chan struct{} // closed: the peer vanished; reads and writes fail
	writing   chan struct{} // receives once per write that started
	closeOnce sync.Once
	closed    chan struct{}
	panicOn   string // "read" or "write": that call panics instead
}

func newPipeEnd() *pipeEnd {
	return &pipeEnd{gone: make(chan struct{}), writing: make(chan struct{}, 64), closed: make(chan struct{})}
}

func (p *pipeEnd) Read(b []byte) (int, error) {
	if p.panicOn == "read" {
		panic("read exploded")
	}
	select {
	case <-p.gone:
	case <-p.closed:
	}
	return 0, io.EOF
}

func (p *pipeEnd) Write(b []byte) (int, error) {
	if p.panicOn == "write" {
		panic("write exploded")
	}
	select {
	case p.writing <- struct{}{}:
	default:
	}
	select {
	case <-p.gone:
	case <-p.closed:
	}
	return 0, io.ErrClosedPipe
}

func (p *pipeEnd) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}

func (p *pipeEnd) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (p *pipeEnd) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (p *pipeEnd) SetDeadline(time.Time) error      { return nil }
func (p *pipeEnd) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeEnd) SetWriteDeadline(time.Time) error { return nil }
func (p *pipeEnd) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

func testServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(nil, nil, Options{Logger: quietLog, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTestConn registers a WebSocket connection over p, as serveWS does.
func newTestConn(s *Server, p *pipeEnd) *conn {
	c := &conn{s: s, nc: p}
	s.active.Add(1)
	s.register(c)
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The reader noticing a dead peer first (closing set, no close frame) and
// a write failing after it used to close a nil channel: a panic that took
// the whole server down.
func TestWriteFailsAfterReaderFailed(t *testing.T) {
	s := testServer(t)
	p := newPipeEnd()
	c := newTestConn(s, p)
	c.send(outMsg{kind: kindText, bounded: true, data: []byte(`{"a":1}`)})
	<-p.writing // the writer is inside its write
	c.readFailed(io.EOF)
	close(p.gone) // ...which now fails
	waitFor(t, "the writer to finish", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.writing && c.finalDone
	})
	if !p.isClosed() {
		t.Error("socket not closed after the failed write")
	}
	if n := s.Stats().PanicsWS; n != 0 {
		t.Fatalf("%d connection goroutines panicked", n)
	}
}

// TestReaderWriterFailureRace lets a connection's reader and writer see the
// peer vanish at the same moment, many times: whichever notices first, the
// connection must end cleanly, without a panic.
func TestReaderWriterFailureRace(t *testing.T) {
	s := testServer(t)
	const rounds = 300
	for i := 0; i < rounds; i++ {
		p := newPipeEnd()
		c := newTestConn(s, p)
		go c.readLoop()
		c.send(outMsg{kind: kindText, bounded: true, data: []byte(`{"a":1}`)})
		if i%2 == 0 {
			<-p.writing
		}
		if i%3 == 0 {
			c.disconnect(discShutdown)
		}
		close(p.gone)
	}
	waitFor(t, "every connection to end", func() bool { return s.Stats().Connections == 0 })
	if n := s.Stats().PanicsWS; n != 0 {
		t.Fatalf("%d connection goroutines panicked", n)
	}
}

// A panic in one connection's goroutine closes that connection, is
// counted, and leaves the process and the other connections alone.
func TestConnectionPanicIsContained(t *testing.T) {
	for _, where := range []string{"read", "write"} {
		t.Run(where, func(t *testing.T) {
			s := testServer(t)
			bystander := newPipeEnd()
			other := newTestConn(s, bystander)
			go other.readLoop()

			p := newPipeEnd()
			p.panicOn = where
			c := newTestConn(s, p)
			go c.readLoop()
			if where == "write" {
				c.send(outMsg{kind: kindText, bounded: true, data: []byte(`{"a":1}`)})
			}
			waitFor(t, "the panicking connection to end", func() bool { return s.Stats().Connections == 1 })
			if n := s.Stats().PanicsWS; n != 1 {
				t.Errorf("PanicsWS = %d, want 1", n)
			}
			if !p.isClosed() {
				t.Error("the panicking connection's socket is still open")
			}
			if bystander.isClosed() || other.isClosing() {
				t.Error("another connection was closed too")
			}
			close(bystander.gone)
			waitFor(t, "the other connection to end", func() bool { return s.Stats().Connections == 0 })
		})
	}
}

func TestExpiryBeyondUnixNano(t *testing.T) {
	s := testServer(t)
	c := &conn{s: s}
	c.setIdentity(&identity{kind: authJWT, user: "u", exp: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)})
	defer c.expTimer.Stop()
	if d := c.untilExpiry(); d < 200*365*24*time.Hour {
		t.Fatalf("a token valid until year 3000 expires in %v", d)
	}
}

// TestNextWriteDeadline: a write always has at least nine tenths of the
// write timeout; the deadline is only moved when it would have less.
func TestNextWriteDeadline(t *testing.T) {
	const timeout = 10 * time.Second
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	d, set := nextWriteDeadline(time.Time{}, t0, timeout)
	if !set || !d.Equal(t0.Add(timeout)) {
		t.Fatalf("first write: %v %v", d, set)
	}
	for _, tc := range []struct {
		after time.Duration
		set   bool
	}{{0, false}, {time.Second, false}, {time.Second + time.Nanosecond, true}, {time.Hour, true}} {
		now := t0.Add(tc.after)
		got, set := nextWriteDeadline(d, now, timeout)
		if set != tc.set {
			t.Fatalf("after %v: set %v, want %v", tc.after, set, tc.set)
		}
		if left := got.Sub(now); left < timeout-timeout/10 || left > timeout {
			t.Fatalf("after %v: the write gets %v", tc.after, left)
		}
	}
}
