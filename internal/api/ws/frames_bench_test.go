package ws

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// loopFrames is a socket that yields the same frames forever.
type loopFrames struct {
	data []byte
	pos  int
}

func (l *loopFrames) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.pos:])
	l.pos = (l.pos + n) % len(l.data)
	return n, nil
}
func (l *loopFrames) Write(p []byte) (int, error)      { return len(p), nil }
func (l *loopFrames) Close() error                     { return nil }
func (l *loopFrames) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (l *loopFrames) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (l *loopFrames) SetDeadline(time.Time) error      { return nil }
func (l *loopFrames) SetReadDeadline(time.Time) error  { return nil }
func (l *loopFrames) SetWriteDeadline(time.Time) error { return nil }

func benchFrame(size int) []byte {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	b := []byte{0x81}
	switch {
	case size < 126:
		b = append(b, 0x80|byte(size))
	case size <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(size))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(size))
	}
	mask := [4]byte{1, 2, 3, 4}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i&3])
	}
	return b
}

// BenchmarkReadMessage is the cost of reading one client command frame
// (header, payload, unmasking, UTF-8 check), as a connected client sends.
func BenchmarkReadMessage(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 256 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			s, err := New(nil, nil, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			c := &conn{s: s, nc: &loopFrames{data: benchFrame(size)}}
			c.connected.Store(true)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if msg, err := c.readMessage(); err != nil || len(msg) != size {
					b.Fatalf("%d bytes, %v", len(msg), err)
				}
			}
		})
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// BenchmarkPutCommand is a put command's own work on the goroutine running
// commands, without the broker: the envelope, the body, the engine
// request and the reply, as `chronoq-bench --target chronoq-ws` sends
// them (a 100-byte string payload).
func BenchmarkPutCommand(b *testing.B) {
	frame := []byte(`{"id":12345,"put":{"queue":"bench","payload":"` + string(make100()) + `"}}`)
	res := engine.PutResult{ID: "01JD3W1A2B3C4D5E6F7G8H9J0K", Seq: 42, State: engine.StateReady}
	b.ReportAllocs()
	for b.Loop() {
		cmd, err := decodeCommand(frame)
		if err != nil || cmd.Op != "put" {
			b.Fatal(cmd.Op, err)
		}
		var body putBody
		if err := decodePutBody(cmd.Body, &body); err != nil {
			b.Fatal(err)
		}
		req, err := body.request(1 << 20)
		if err != nil || len(req.Payload) != 102 {
			b.Fatal(len(req.Payload), err)
		}
		if frame := frameAround(appendPutReply(make([]byte, maxFrameHeader, 192), cmd.ID, res), maxFrameHeader); len(frame) == 0 {
			b.Fatal("no frame")
		}
	}
}

func make100() []byte {
	p := make([]byte, 100)
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return p
}
