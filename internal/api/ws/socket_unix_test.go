//go:build unix

package ws

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Over a real socket the reader takes each read's bytes into a shared
// buffer; messages come out whole and in order however the bytes are cut
// into writes: a header split across reads, several frames in one read, a
// payload longer than the shared buffer, fragments.
func TestRawReadsKeepMessagesWhole(t *testing.T) {
	c, client := tcpConn(t, testServer(t))
	c.connected.Store(true)

	var want [][]byte
	var stream []byte
	for i, size := range []int{0, 1, 5, 125, 126, 127, 200, readBufSize - 20, readBufSize, readBufSize + 1, 3 * readBufSize, 70000} {
		msg := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		want = append(want, msg)
		stream = append(stream, clientFrame(websocket.TextMessage, true, uint64(size), msg)...)
	}
	// one message in three fragments
	frag := []byte("fragmented message")
	want = append(want, frag)
	stream = append(stream, clientFrame(websocket.TextMessage, false, 4, frag[:4])...)
	stream = append(stream, clientFrame(0, false, 6, frag[4:10])...)
	stream = append(stream, clientFrame(0, true, uint64(len(frag)-10), frag[10:])...)

	rnd := rand.New(rand.NewPCG(1, 2))
	go func() {
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rnd.IntN(300))
			if _, err := client.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
	}()
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i, w := range want {
		got, err := c.readMessage()
		if err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, len(w), err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("message %d: got %d bytes %q, want %d bytes", i, len(got), head(got), len(w))
		}
	}
	if c.rpos != c.rend {
		t.Fatalf("%d bytes left over after the last message", c.rend-c.rpos)
	}
	client.Close()
	if _, err := c.readMessage(); err == nil {
		t.Fatal("a read after the peer closed returned no error")
	}
	if c.pooled != nil {
		t.Fatal("the reader holds a shared buffer after the connection ended")
	}
}

func head(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%s…", b[:16])
	}
	return string(b)
}
