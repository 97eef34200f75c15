package ws

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Reading client frames (RFC 6455 §5). gorilla/websocket does the
// handshake; frames are read here because what an idle connection costs is
// mostly the stack of the goroutine blocked reading it. Blocked in
// gorilla's reader that stack is 4 KB; blocked in the shallow nc.Read of
// readMessage it stays at Go's minimum 2 KB once the GC has shrunk it
// after the last command. Client→server traffic is small commands, so a
// 128-byte buffer in the conn struct serves it.

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
			n, err := c.nc.Read(c.rbuf[:])
			if err != nil {
				return nil, err
			}
			c.rpos, c.rend = 0, n
			c.lastRead.Store(time.Now().UnixNano())
		}
		msg, done, err := c.readFrame()
		if err != nil || done {
			return msg, err
		}
	}
}

// readFrame reads one frame; done reports a complete data message.
func (c *conn) readFrame() (msg []byte, done bool, err error) {
	var hdr [14]byte
	if err := c.readFull(hdr[:2]); err != nil {
		return nil, false, err
	}
	fin, rsv, op := hdr[0]&0x80 != 0, hdr[0]&0x70, hdr[0]&0x0f
	masked, n7 := hdr[1]&0x80 != 0, int(hdr[1]&0x7f)
	if rsv != 0 {
		return nil, false, protoErr(websocket.CloseProtocolError, "reserved bits set without an extension")
	}
	if !masked {
		return nil, false, protoErr(websocket.CloseProtocolError, "client frames must be masked")
	}
	control := op >= 8
	var size uint64
	switch {
	case n7 < 126:
		size = uint64(n7)
	case control:
		return nil, false, protoErr(websocket.CloseProtocolError, "control frame over 125 bytes")
	case n7 == 126:
		if err := c.readFull(hdr[2:4]); err != nil {
			return nil, false, err
		}
		size = uint64(binary.BigEndian.Uint16(hdr[2:4]))
	default:
		if err := c.readFull(hdr[2:10]); err != nil {
			return nil, false, err
		}
		size = binary.BigEndian.Uint64(hdr[2:10])
	}
	var mask [4]byte
	if err := c.readFull(mask[:]); err != nil {
		return nil, false, err
	}
	switch op {
	case websocket.TextMessage, websocket.BinaryMessage, 0:
		if op == 0 && !c.inFrag {
			return nil, false, protoErr(websocket.CloseProtocolError, "continuation frame without a message")
		}
		if op != 0 && c.inFrag {
			return nil, false, protoErr(websocket.CloseProtocolError, "new message inside a fragmented one")
		}
		if size > uint64(c.s.opts.MaxMessageSize) || uint64(len(c.frag))+size > uint64(c.s.opts.MaxMessageSize) {
			return nil, false, protoErr(websocket.CloseMessageTooBig, "message too big")
		}
		if op != 0 {
			c.fragOp = op
		}
		start := len(c.frag)
		c.frag = append(c.frag, make([]byte, size)...)
		if err := c.readFull(c.frag[start:]); err != nil {
			return nil, false, err
		}
		unmask(c.frag[start:], mask)
		if !fin {
			c.inFrag = true
			return nil, false, nil
		}
		msg, c.frag, c.inFrag = c.frag, nil, false
		if c.fragOp == websocket.BinaryMessage {
			return nil, true, nil
		}
		if !utf8.Valid(msg) {
			return nil, false, protoErr(websocket.CloseInvalidFramePayloadData, "text message is not UTF-8")
		}
		return msg, true, nil
	case websocket.PingMessage, websocket.PongMessage, websocket.CloseMessage:
		if !fin {
			return nil, false, protoErr(websocket.CloseProtocolError, "fragmented control frame")
		}
		var buf [125]byte
		p := buf[:size]
		if err := c.readFull(p); err != nil {
			return nil, false, err
		}
		unmask(p, mask)
		switch op {
		case websocket.PingMessage:
			c.send(outMsg{kind: kindPong, data: append([]byte(nil), p...)})
		case websocket.PongMessage:
		default:
			code := websocket.CloseNormalClosure
			if len(p) >= 2 {
				code = int(binary.BigEndian.Uint16(p))
			}
			if code < 1000 || code == websocket.CloseNoStatusReceived || code == websocket.CloseAbnormalClosure || code == websocket.CloseTLSHandshake {
				code = websocket.CloseNormalClosure // not valid on the wire: echo a plain close
			}
			c.mu.Lock()
			c.closeLocked(disconnectReason{Code: code}, false)
			c.mu.Unlock()
			return nil, false, errPeerClosed
		}
		return nil, false, nil
	}
	return nil, false, protoErr(websocket.CloseProtocolError, "unknown opcode")
}

// readFull fills p from the buffer, then from the socket.
func (c *conn) readFull(p []byte) error {
	n := copy(p, c.rbuf[c.rpos:c.rend])
	c.rpos += n
	if n == len(p) {
		return nil
	}
	rest := p[n:]
	if len(rest) >= len(c.rbuf) {
		_, err := io.ReadFull(c.nc, rest)
		return err
	}
	// Small remainder: refill the buffer, so a frame's header and payload
	// usually cost one read together.
	for len(rest) > 0 {
		m, err := c.nc.Read(c.rbuf[:])
		if m == 0 && err != nil {
			return err
		}
		k := copy(rest, c.rbuf[:m])
		rest = rest[k:]
		c.rpos, c.rend = k, m
	}
	return nil
}

func unmask(p []byte, key [4]byte) {
	for i := range p {
		p[i] ^= key[i&3]
	}
}
