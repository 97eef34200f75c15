package ws

import (
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// scripted is a socket that yields its script, then reports it is out of
// data on starved and blocks until closed.
type scripted struct {
	*pipeEnd
	script  []byte
	starved chan struct{}
}

func newScripted(b []byte) *scripted {
	return &scripted{pipeEnd: newPipeEnd(), script: b, starved: make(chan struct{}, 1)}
}

func (s *scripted) Read(p []byte) (int, error) {
	if len(s.script) > 0 {
		n := copy(p, s.script)
		s.script = s.script[n:]
		return n, nil
	}
	select {
	case s.starved <- struct{}{}:
	default:
	}
	<-s.closed
	return 0, net.ErrClosed
}

// clientFrame is a masked client frame header announcing size bytes,
// followed by the first len(payload) of them.
func clientFrame(op byte, fin bool, size uint64, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	switch {
	case size < 126:
		b = append(b, 0x80|byte(size))
	case size <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(size))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, size)
	}
	mask := [4]byte{1, 2, 3, 4}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i&3])
	}
	return b
}

// A header announcing a big frame used to make the server allocate all of
// it at once, before a byte of it arrived: cheap sockets pinned megabytes.
func TestFrameBufferGrowsAsBytesArrive(t *testing.T) {
	s := testServer(t)
	sent := []byte(strings.Repeat("x", 100))
	sock := newScripted(clientFrame(websocket.TextMessage, true, 1<<20, sent))
	c := &conn{s: s, nc: sock}
	c.connected.Store(true) // after connect, 1 MiB is within the limit
	done := make(chan error, 1)
	go func() {
		_, err := c.readMessage()
		done <- err
	}()
	select {
	case <-sock.starved:
	case err := <-done:
		t.Fatalf("reader ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("reader never waited for the rest of the frame")
	}
	if got := cap(c.frag); got > 4<<10 {
		t.Errorf("after %d bytes of an announced 1 MiB frame the buffer holds %d bytes", len(sent), got)
	}
	sock.Close()
	<-done
}

// Before connect a message may be at most MaxConnectMessage bytes: a bigger
// announced frame ends the connection with 1009 before its payload is read.
func TestPreConnectFrameLimit(t *testing.T) {
	s := testServer(t)
	lim := uint64(s.opts.MaxConnectMessage)
	for _, tc := range []struct {
		connected bool
		size      uint64
		ok        bool
	}{
		{false, 2 << 20, false},
		{false, lim + 1, false},
		{false, lim, true},
		{true, lim + 1, true},
	} {
		payload := make([]byte, 0, 64)
		if tc.ok {
			payload = []byte(strings.Repeat("a", int(tc.size)))
		}
		sock := newScripted(clientFrame(websocket.TextMessage, true, tc.size, payload))
		c := &conn{s: s, nc: sock}
		c.connected.Store(tc.connected)
		type result struct {
			msg []byte
			err error
		}
		res := make(chan result, 1)
		go func() {
			msg, err := c.readMessage()
			res <- result{msg, err}
		}()
		var msg []byte
		var err error
		select {
		case r := <-res:
			msg, err = r.msg, r.err
		case <-sock.starved:
			t.Errorf("connected=%v size %d: the reader waits for the payload", tc.connected, tc.size)
			sock.Close()
			<-res
			continue
		}
		var pe *protocolError
		switch {
		case tc.ok && (err != nil || uint64(len(msg)) != tc.size):
			t.Errorf("connected=%v size %d: got %d bytes, err %v; want the message", tc.connected, tc.size, len(msg), err)
		case !tc.ok && !errors.As(err, &pe):
			t.Errorf("connected=%v size %d: err %v, want close 1009", tc.connected, tc.size, err)
		case !tc.ok && (pe.reason.Code != websocket.CloseMessageTooBig || !strings.Contains(pe.reason.Reason, "before connect")):
			t.Errorf("connected=%v size %d: close %d %q, want 1009 naming the pre-connect limit", tc.connected, tc.size, pe.reason.Code, pe.reason.Reason)
		case !tc.ok && cap(c.frag) > 0:
			t.Errorf("size %d: %d bytes allocated for a refused frame", tc.size, cap(c.frag))
		}
		sock.Close()
	}
}

// RFC 6455 §8.1: a text message must be UTF-8, else close 1007.
func TestTextFrameMustBeUTF8(t *testing.T) {
	s := testServer(t)
	sock := newScripted(clientFrame(websocket.TextMessage, true, 4, []byte{'"', 0xff, 0xfe, '"'}))
	c := &conn{s: s, nc: sock}
	_, err := c.readMessage()
	var pe *protocolError
	if !errors.As(err, &pe) || pe.reason.Code != websocket.CloseInvalidFramePayloadData {
		t.Fatalf("err %v, want close 1007", err)
	}
	sock.Close()
}
