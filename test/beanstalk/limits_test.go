package beanstalk_test

import (
	"bytes"
	"errors"
	"net"
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
