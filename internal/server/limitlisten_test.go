package server

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// The listener keeps at most n connections open, gives the next one once
// one closes, and its connections expose the socket's SyscallConn (which
// the WebSocket flushers need; netutil's wrapper hid it).
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2).(*limitListener)
	defer l.Close()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.sem) != 2 {
		t.Fatalf("two open: %d slots taken, want 2 (the third Accept must wait)", len(l.sem))
	}
	if _, ok := a.(syscall.Conn); !ok {
		t.Fatal("accepted connection hides its SyscallConn")
	}
	if _, err := a.(syscall.Conn).SyscallConn(); err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
	third := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		third <- c
	}()
	a.Close()
	a.Close() // a second close frees nothing more
	c := <-third
	if len(l.sem) != 2 {
		t.Fatalf("after one closed and another accepted: %d slots taken, want 2", len(l.sem))
	}
	c.Close()
	b.Close()
	if len(l.sem) != 0 {
		t.Fatalf("all closed: %d slots taken, want 0", len(l.sem))
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
