package beanstalk_test

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// Input pipelined behind a waiting reserve is read only up to a bound;
// past it the server stops reading, so the client's writes stall (TCP
// back-pressure) instead of the server buffering whatever it is sent.
func TestPipelinedInputBounded(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("reserve\r\n")
		junk := bytes.Repeat([]byte("peek-ready\r\n"), 64<<20/12) // 64 MiB
		c.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		n, err := c.c.Write(junk)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: wrote all %d bytes behind a waiting reserve (err %v): the server buffers without bound", s.name, n, err)
		}
		t.Logf("%s: accepted %d bytes before the write stalled", s.name, n)
	})
}

// A web page can make a browser send an HTTP request to the port (a fetch
// POST); its body would be read as commands. chronoq closes a connection
// at the first line that looks like HTTP, without an answer; beanstalkd
// answers UNKNOWN_COMMAND to each header line and runs the body.
func TestCrossProtocolHTTP(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		body := "put 0 0 10 5\r\nhello\r\n"
		c.send("POST /x HTTP/1.1\r\nHost: 127.0.0.1:11300\r\nContent-Type: text/plain\r\n" +
			"Content-Length: " + itoa(uint64(len(body))) + "\r\n\r\n" + body)
		o := s.dial()
		if s.chronoq() {
			c.closed()
			o.send("peek-ready\r\n")
			o.expect("NOT_FOUND\r\n")
		} else {
			for range 5 { // request line, 3 headers, the empty line
				if l := c.line(); l != "UNKNOWN_COMMAND\r\n" {
					t.Fatalf("%s: got %q", s.name, l)
				}
			}
			if l := c.line(); !strings.HasPrefix(l, "INSERTED ") {
				t.Fatalf("%s: the body's put: got %q", s.name, l)
			}
			o.send("peek-ready\r\n")
			o.expect("FOUND ")
		}
		// Each form alone, after ordinary commands, on chronoq.
		if !s.chronoq() {
			return
		}
		for _, l := range []string{"GET / HTTP/1.1", "PUT /tube HTTP/1.0", "OPTIONS * HTTP/1.1", "host: evil.example", "HOST:x", "BREW /pot HTTP/1.1"} {
			c := s.dial()
			c.send("list-tube-used\r\n" + l + "\r\nlist-tube-used\r\n")
			c.expect("USING default\r\n")
			c.closed()
		}
		// Lower-case commands and tube names that merely contain the words
		// are unaffected.
		c = s.dial()
		c.send("use GET\r\nuse host\r\nput 0 0 1 3\r\nGET\r\n")
		c.expect("USING GET\r\nUSING host\r\nINSERTED ")
	})
}

// With an idle timeout (off by default, as beanstalkd has none), a
// connection that sends nothing is closed; one waiting in a reserve is
// not idle, however long it waits.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	s := startChronoq(t, serverOpts{idle: 200 * time.Millisecond})
	idle := s.dial()
	idle.send("list-tube-used\r\n")
	idle.expect("USING default\r\n")
	w := s.dial()
	w.send("reserve\r\n")
	idle.closed() // within readTimeout
	w.nothing(600 * time.Millisecond)
	id := s.dial().put(0, 0, 10, "late")
	w.expect("RESERVED " + itoa(id) + " 4\r\nlate\r\n")
	// After the reserve, the worker's silence counts again.
	w.closed()

	// Off by default: a silent connection stays open.
	d := startChronoq(t, serverOpts{})
	c := d.dial()
	c.nothing(600 * time.Millisecond)
	c.send("list-tube-used\r\n")
	c.expect("USING default\r\n")
}
