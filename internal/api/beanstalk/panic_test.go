package beanstalk

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// panicky is a Backend whose every method panics (a nil embedded
// interface): a stand-in for a bug reached from one connection.
type panicky struct{ Backend }

// A panic in one connection's goroutine closes that connection only; the
// server keeps accepting and answering others.
func TestConnectionPanicIsContained(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(panicky{}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		s.Close()
		<-done
	}()

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	c1, r1 := dial()
	defer c1.Close()
	if _, err := io.WriteString(c1, "put 0 0 10 1\r\nx\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r1.ReadString('\n'); err != io.EOF {
		t.Fatalf("after a panic the connection answered %q (%v), want it closed", line, err)
	}
	if got := s.Panics(); got != 1 {
		t.Fatalf("Panics() = %d, want 1", got)
	}

	c2, r2 := dial()
	defer c2.Close()
	if _, err := io.WriteString(c2, "list-tube-used\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := r2.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "USING default") {
		t.Fatalf("a second connection after the panic got %q (%v), want USING default", line, err)
	}
}
