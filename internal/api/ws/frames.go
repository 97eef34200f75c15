package ws

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	gws "github.com/gobwas/ws"
	"github.com/gorilla/websocket"
)

// Reading client frames (RFC 6455 §5). gorilla/websocket does the
// handshake; frames are parsed with gobwas/ws's low-level API (header, then
// the payload into our own buffer) because what an idle connection costs is
// mostly the stack of the goroutine blocked reading it. Blocked in
// gorilla's reader that stack is 4 KB; blocked in the shallow nc.Read of
// readMessage it stays at Go's minimum 2 KB once the GC has shrunk it
// after the last command. Client→server traffic is small commands, so a
// 128-byte buffer in the conn struct serves it.
//
// A frame's payload buffer grows as its bytes arrive, never from the length
// its header announces: a header is a few bytes any peer can send, and
// trusting it let sockets without a token pin megabytes each. Before
// connect succeeds a message may be at most MaxConnectMessage bytes
// (docs/realtime.md, Limits).

type protocolError struct{ reason disconnectReason }

func (e *protocolError) Error() string { return "websocket: " + e.reason.Reason }

func protoErr(code int, reason string) error {
	return &protocolError{disconnectReason{Code: code, Reason: reason}}
}

// errPeerClosed ends the read loop after the client's close frame.
var errPeerClosed = errors.New("websocket: closed by the client")

// readMessage returns the next complete text message. Control frames are
// handled on the way: a ping is answered through the outbox, a pong only
// proves the peer alive, a close frame is echoed and ends reading. A
// binary message comes back as nil.
func (c *conn) readMessage() ([]byte, error) {
	for {
		if c.rpos == c.rend {
			// The idle wait: as shallow as a read can be.
			if n, err := c.fill(); n == 0 && err != nil {
				return nil, err
			}
			c.lastRead.Store(time.Now().UnixNano())
		}
		msg, done, err := c.readFrame()
		if err != nil || done {
			return msg, err
		}
	}
}

// messageLimit is the largest message the connection may send now.
func (c *conn) messageLimit() int64 {
	if !c.connected.Load() {
		return c.s.opts.MaxConnectMessage
	}
	return c.s.opts.MaxMessageSize
}

// readFrame reads one frame; done reports a complete data message.
func (c *conn) readFrame() (msg []byte, done bool, err error) {
	src := (*frameSource)(c)
	h, err := gws.ReadHeader(src)
	if err != nil {
		if errors.Is(err, gws.ErrHeaderLengthMSB) || errors.Is(err, gws.ErrHeaderLengthUnexpected) {
			return nil, false, protoErr(websocket.CloseProtocolError, "invalid frame length")
		}
		return nil, false, err
	}
	state := gws.StateServerSide
	if c.inFrag {
		state = state.Set(gws.StateFragmented)
	}
	if err := gws.CheckHeader(h, state); err != nil {
		return nil, false, protoErr(websocket.CloseProtocolError, err.Error())
	}
	if h.OpCode.IsControl() {
		return nil, false, c.readControl(h)
	}
	limit := c.messageLimit()
	if h.Length > limit || int64(len(c.frag))+h.Length > limit {
		reason := fmt.Sprintf("message too big: the limit is %d bytes", limit)
		if !c.connected.Load() {
			reason = fmt.Sprintf("message too big: at most %d bytes before connect", limit)
		}
		return nil, false, protoErr(websocket.CloseMessageTooBig, reason)
	}
	if h.OpCode != gws.OpContinuation {
		c.fragOp = byte(h.OpCode)
	}
	start := len(c.frag)
	if err := c.readPayload(h.Length); err != nil {
		return nil, false, err
	}
	gws.Cipher(c.frag[start:], h.Mask, 0)
	if !h.Fin {
		c.inFrag = true
		return nil, false, nil
	}
	msg, c.frag, c.inFrag = c.frag, nil, false
	if c.fragOp == byte(gws.OpBinary) {
		return nil, true, nil
	}
	if !utf8.Valid(msg) {
		return nil, false, protoErr(websocket.CloseInvalidFramePayloadData, "text message is not UTF-8")
	}
	return msg, true, nil
}

// firstChunk is what a frame's buffer starts at (or the frame's size if
// smaller): one allocation for a typical command, and little for a peer
// that announces a big frame and sends nothing.
const firstChunk = 4 << 10

// readPayload appends n payload bytes to c.frag, growing it only as bytes
// arrive: beyond firstChunk, at most twice what the peer actually sent is
// ever allocated.
func (c *conn) readPayload(n int64) error {
	src := (*frameSource)(c)
	for n > 0 {
		if len(c.frag) == cap(c.frag) {
			c.frag = slices.Grow(c.frag, int(min(n, int64(max(cap(c.frag), firstChunk)))))
		}
		room := c.frag[len(c.frag):cap(c.frag)]
		if int64(len(room)) > n {
			room = room[:n]
		}
		k, err := src.Read(room)
		c.frag = c.frag[:len(c.frag)+k]
		n -= int64(k)
		if err != nil && n > 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (c *conn) readControl(h gws.Header) error {
	var buf [gws.MaxControlFramePayloadSize]byte
	p := buf[:h.Length]
	if _, err := io.ReadFull((*frameSource)(c), p); err != nil {
		return err
	}
	gws.Cipher(p, h.Mask, 0)
	switch h.OpCode {
	case gws.OpPing:
		c.send(outMsg{kind: kindPong, bounded: true, data: append([]byte(nil), p...)})
	case gws.OpPong:
	case gws.OpClose:
		code := websocket.CloseNormalClosure
		if len(p) >= 2 {
			sc, reason := gws.ParseCloseFrameData(p)
			if gws.CheckCloseFrameData(sc, reason) == nil {
				code = int(sc)
			}
		}
		c.mu.Lock()
		c.closeLocked(disconnectReason{Code: code}, false)
		c.mu.Unlock()
		return errPeerClosed
	}
	return nil
}

// frameSource reads from the connection's small buffer, then the socket:
// a frame's header and a small payload usually cost one read together, and
// a large payload is read straight into its own buffer.
type frameSource conn

func (f *frameSource) Read(p []byte) (int, error) {
	c := (*conn)(f)
	if c.rpos == c.rend {
		if len(p) >= len(c.rbuf) {
			c.releaseRead()
			return c.nc.Read(p)
		}
		if n, err := c.fill(); n == 0 {
			return 0, err
		}
	}
	n := copy(p, c.buffered())
	c.rpos += n
	return n, nil
}

// fill replaces the used-up read buffer with what the socket has next,
// waiting for it: into a shared buffer where the socket allows raw reads
// (a whole command in one read(2)), else into rbuf.
func (c *conn) fill() (n int, err error) {
	c.releaseRead()
	if c.raw != nil {
		n, err = c.readRaw()
	} else {
		n, err = c.nc.Read(c.rbuf[:])
	}
	c.rpos, c.rend = 0, n
	return n, err
}

// buffered is what the read buffer holds and no frame has used yet.
func (c *conn) buffered() []byte {
	if c.pooled != nil {
		return (*c.pooled)[c.rpos:c.rend]
	}
	return c.rbuf[c.rpos:c.rend]
}
