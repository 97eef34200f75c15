package beanstalk

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

func formatInserted(b []byte, _ string, res engine.PutResult, _ error) []byte {
	b = append(b, "INSERTED "...)
	b = strconv.AppendUint(b, res.Seq, 10)
	return append(b, '\r', '\n')
}

// A client that does not read its answers must not hold up the goroutine
// that completes the puts (the broker's syncer): what the socket does not
// take is written by the connection's writer goroutine, in order, once
// the client reads again.
func TestPutAnswersNeverBlockOnASlowClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	_ = server.(*net.TCPConn).SetWriteBuffer(4 << 10)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10)

	a := newPutAnswers(server, formatInserted)
	// Far more than the socket buffers hold, answered as the syncer
	// would: in groups, each followed by its flush.
	const groups, per = 40, 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq := uint64(0)
		for g := 0; g < groups; g++ {
			tags := make([]uint64, per)
			for i := range tags {
				tags[i] = a.hand("default", 10)
			}
			var flushes []func()
			for _, tag := range tags {
				seq++
				if f := a.answer(tag, engine.PutResult{Seq: seq}, nil); f != nil {
					flushes = append(flushes, f)
				}
			}
			for _, f := range flushes {
				f()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("answering puts blocked on a client that does not read")
	}
	a.mu.Lock()
	writer := a.writer
	a.mu.Unlock()
	if !writer {
		t.Fatal("the socket took every answer: the test did not fill it")
	}
	_ = client.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(client)
	for i := 1; i <= groups*per; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := fmt.Sprintf("INSERTED %d\r\n", i); line != want {
			t.Fatalf("answer %d: %q, want %q", i, line, want)
		}
	}
	// settle waits for the writer goroutine and hands nothing twice.
	a.settle(io.Discard)
}

// Answers given out of order (a put refused on the caller's goroutine
// while earlier ones are in flight) still leave in command order.
func TestPutAnswersKeepCommandOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	a := newPutAnswers(server, formatInserted)
	t1, t2, t3 := a.hand("default", 1), a.hand("default", 1), a.hand("default", 1)
	for _, f := range []func(){
		a.answer(t3, engine.PutResult{Seq: 3}, nil),
		a.answer(t2, engine.PutResult{Seq: 2}, nil),
	} {
		if f != nil {
			t.Fatal("a flush was asked for before the first put was answered")
		}
	}
	if f := a.answer(t1, engine.PutResult{Seq: 1}, nil); f == nil {
		t.Fatal("no flush asked for once every answer was in")
	} else {
		f()
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len("INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n"))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n" {
		t.Fatalf("answers %q", got)
	}
}
