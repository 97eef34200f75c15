package ws

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// tcpConn returns a WebSocket server connection over a real loopback TCP
// socket (the flushers need its raw descriptor) and the client's end.
func tcpConn(t *testing.T, s *Server) (*conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	c := &conn{s: s, nc: srv, raw: rawConnOf(srv)}
	if c.raw == nil {
		t.Skip("no raw socket access on this platform")
	}
	return c, cli.(*net.TCPConn)
}

func testPub(off uint64, data string) *pubsub.Publication {
	return &pubsub.Publication{Namespace: "app", Channel: "news", Offset: off, Epoch: "e1", Data: []byte(data)}
}

// readFrame reads one unmasked server frame.
func readFrame(t *testing.T, r *bufio.Reader) (op byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatalf("reading a frame header (%d buffered): %v", r.Buffered(), err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("reading a frame of %d bytes: %v", n, err)
	}
	return h[0] & 0x0f, payload
}

// readPubOffset reads one frame and returns the offset of the publication
// it must hold.
func readPubOffset(t *testing.T, r *bufio.Reader) uint64 {
	t.Helper()
	op, b := readFrame(t, r)
	var m struct {
		Pub struct {
			Offset uint64 `json:"offset"`
		} `json:"pub"`
	}
	if err := json.Unmarshal(b, &m); op != 1 || err != nil || m.Pub.Offset == 0 {
		t.Fatalf("want a pub text frame, got opcode %d %q (%v)", op, b, err)
	}
	return m.Pub.Offset
}

func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.writing
}

// On a hot connection (publications written less than PubWriteInterval
// ago) the next publications wait for the shared tick and then go out
// together, in order; a connection that wrote none recently writes at once.
func TestHotConnectionWaitsForTheTick(t *testing.T) {
	s, err := New(nil, nil, Options{Logger: quietLog, PubWriteInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, cli := tcpConn(t, s)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(cli)

	c.Deliver(testPub(1, `"first"`)) // nothing written yet: at once
	if got := readPubOffset(t, r); got != 1 {
		t.Fatalf("first frame: offset %d, want 1", got)
	}
	waitFor(t, "the flusher to give the connection back", c.idle)

	for off := uint64(2); off <= 11; off++ {
		c.Deliver(testPub(off, `"burst"`))
	}
	s.flush.mu.Lock()
	parked := len(s.flush.later) == 1 && s.flush.later[0] == c
	s.flush.mu.Unlock()
	c.mu.Lock()
	queued := len(c.q)
	c.mu.Unlock()
	if !parked || queued != 10 {
		t.Fatalf("after a burst on a hot connection: parked %v with %d queued, want parked with 10", parked, queued)
	}

	s.flushLater() // the tick
	for want := uint64(2); want <= 11; want++ {
		if got := readPubOffset(t, r); got != want {
			t.Fatalf("after the tick: offset %d, want %d", got, want)
		}
	}
	waitFor(t, "the connection to go idle", c.idle)
}

// Without an interval nothing waits: each publication is handed to a
// flusher at once.
func TestNoIntervalNeverParks(t *testing.T) {
	s, err := New(nil, nil, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c, cli := tcpConn(t, s)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(cli)
	for off := uint64(1); off <= 50; off++ {
		c.Deliver(testPub(off, `"x"`))
		s.flush.mu.Lock()
		parked := len(s.flush.later)
		s.flush.mu.Unlock()
		if parked != 0 {
			t.Fatalf("publication %d: %d connections parked without an interval", off, parked)
		}
	}
	for want := uint64(1); want <= 50; want++ {
		if got := readPubOffset(t, r); got != want {
			t.Fatalf("offset %d, want %d", got, want)
		}
	}
}

// A client that does not read fills its socket: the flusher's
// non-blocking write takes part of a batch and the connection's writer
// goroutine must write the rest, then everything queued after it, with
// no byte lost or reordered.
func TestFlusherHandsTheRestToTheWriter(t *testing.T) {
	s, err := New(nil, nil, Options{Logger: quietLog, WriteTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, cli := tcpConn(t, s)
	// Small enough that the publications cannot all fit, large enough
	// (over loopback's MSS) that the window always reopens at once.
	c.nc.(*net.TCPConn).SetWriteBuffer(128 << 10)
	cli.SetReadBuffer(128 << 10)
	const n, size = 100, 32 << 10 // 3.2 MB: far more than both socket buffers
	for off := uint64(1); off <= n; off++ {
		data := fmt.Sprintf("%q", strings.Repeat(string(rune('a'+off%26)), size))
		if !c.Deliver(testPub(off, data)) {
			t.Fatalf("publication %d refused", off)
		}
	}
	c.reply(7, map[string]int{"answer": 42}) // a reply queued behind them
	c.mu.Lock()
	c.q = append(c.q, outMsg{kind: kindPing}) // and a control frame
	c.kickLocked()
	c.mu.Unlock()

	cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReaderSize(cli, 4<<10)
	for want := uint64(1); want <= n; want++ {
		op, b := readFrame(t, r)
		var m struct {
			Pub struct {
				Offset uint64 `json:"offset"`
				Data   string `json:"data"`
			} `json:"pub"`
		}
		if err := json.Unmarshal(b, &m); op != 1 || err != nil {
			t.Fatalf("frame %d: opcode %d, %v", want, op, err)
		}
		if m.Pub.Offset != want || m.Pub.Data != strings.Repeat(string(rune('a'+want%26)), size) {
			t.Fatalf("frame %d: offset %d, data of %d bytes not the one published", want, m.Pub.Offset, len(m.Pub.Data))
		}
	}
	if op, b := readFrame(t, r); op != 1 || string(b) != `{"id":7,"result":{"answer":42}}` {
		t.Fatalf("after the publications: opcode %d %q, want the reply", op, b)
	}
	if op, _ := readFrame(t, r); op != 9 {
		t.Fatalf("last: opcode %d, want the ping (9)", op)
	}
	waitFor(t, "the writer to finish", c.idle)
}

// A connection whose writer goroutine once set a write deadline that has
// passed since (a reply, a ping long ago) must still get publications
// through the flushers: the stale deadline used to fail their write and
// close the connection (1006) ten seconds after its last reply.
func TestFlusherIgnoresAStaleWriteDeadline(t *testing.T) {
	s, err := New(nil, nil, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c, cli := tcpConn(t, s)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(cli)
	c.reply(1, struct{}{}) // through flushWS, which sets a deadline
	if op, b := readFrame(t, r); op != 1 || string(b) != `{"id":1,"result":{}}` {
		t.Fatalf("reply: opcode %d %q", op, b)
	}
	waitFor(t, "the writer to finish", c.idle)
	past := time.Now().Add(-time.Second) // as if WriteTimeout had passed since
	c.mu.Lock()
	c.nc.SetWriteDeadline(past)
	c.wdeadline = past
	c.mu.Unlock()
	c.Deliver(testPub(1, `"after"`))
	if got := readPubOffset(t, r); got != 1 {
		t.Fatalf("offset %d, want 1", got)
	}
	if c.isClosing() {
		t.Fatal("the connection is closing")
	}
}

// Put answers are written by the goroutine that ran the put (sendNow);
// when the client does not read, that goroutine must not wait for it:
// what the socket does not take goes to the writer goroutine, and every
// answer arrives once, in order, byte for byte.
func TestPutAnswersNeverWaitForTheClient(t *testing.T) {
	s, err := New(nil, nil, Options{Logger: quietLog, WriteTimeout: 10 * time.Second, MaxQueueBytes: 64 << 20, MaxQueue: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c, cli := tcpConn(t, s)
	c.nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
	cli.SetReadBuffer(64 << 10)
	const n = 20000 // ~2.4 MB of answers: far more than both socket buffers
	r := engine.PutResult{ID: "01JD3W1A2B3C4D5E6F7G8H9J0K", State: engine.StateReady}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := uint64(1); id <= n; id++ {
			c.replyPut(id, r)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("answering waited for a client that does not read")
	}
	cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(cli, 4<<10)
	for id := uint64(1); id <= n; id++ {
		op, b := readFrame(t, br)
		want := appendPutReply(nil, id, r)
		if op != 1 || string(b) != string(want) {
			t.Fatalf("answer %d: opcode %d, %s; want %s", id, op, b, want)
		}
	}
}
