package beanstalk

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// countingBackend holds the puts handed to it until the test answers them
// (answerAll). Any other call panics (the embedded Backend is nil).
type countingBackend struct {
	Backend
	mu     sync.Mutex
	seq    uint64
	held   []heldPut
	handed chan struct{} // a put was handed over
}

type heldPut struct {
	seq, tag uint64
	data     string
	then     func(uint64, engine.PutResult, error) func()
}

func (f *countingBackend) Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return engine.PutResult{Seq: f.seq}, nil
}

func (f *countingBackend) PutThen(_ context.Context, _, _ string, req engine.PutRequest, tag uint64, then func(uint64, engine.PutResult, error) func()) {
	f.mu.Lock()
	f.seq++
	f.held = append(f.held, heldPut{seq: f.seq, tag: tag, data: string(req.Payload), then: then})
	f.mu.Unlock()
	f.handed <- struct{}{}
}

// answerAll answers the held puts last first, from the calling goroutine
// as the broker's syncer would: every answer of the group, then the
// flushes they asked for.
func (f *countingBackend) answerAll() {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.mu.Unlock()
	var flushes []func()
	for i := len(held) - 1; i >= 0; i-- {
		h := held[i]
		var err error
		if h.data != fmt.Sprint("job", h.seq) {
			err = fmt.Errorf("put %d carried %q", h.seq, h.data)
		}
		if fl := h.then(h.tag, engine.PutResult{Seq: h.seq}, err); fl != nil {
			flushes = append(flushes, fl)
		}
	}
	if len(flushes) != 1 {
		panic(fmt.Sprintf("%d flushes asked for one connection's group, want 1", len(flushes)))
	}
	for _, fl := range flushes {
		fl()
	}
}

// Puts that arrive in one read are all handed to the broker before the
// first one's answer is awaited, so they share a loop turn and a sync;
// the answers, given by the broker last first, still leave in order, one
// each, and from the broker's goroutine: the connection's goroutine reads
// on meanwhile.
func TestPipelinedPutsInFlightTogether(t *testing.T) {
	f := &countingBackend{handed: make(chan struct{}, 64)}
	s := New(f, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	const n = 10
	var req, want strings.Builder
	for i := 1; i <= n; i++ {
		body := fmt.Sprint("job", i)
		fmt.Fprintf(&req, "put 0 0 10 %d\r\n%s\r\n", len(body), body)
		fmt.Fprintf(&want, "INSERTED %d\r\n", i)
	}
	if _, err := io.WriteString(nc, req.String()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case <-f.handed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d pipelined puts were handed over: each waited for the one before", i, n)
		}
	}
	f.answerAll()
	got := make([]byte, want.Len())
	r := bufio.NewReader(nc)
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("after %q: %v", got, err)
	}
	if string(got) != want.String() {
		t.Fatalf("answers %q, want %q", got, want.String())
	}
	// A command other than a put waits for the puts before it.
	if _, err := io.WriteString(nc, "put 0 0 10 5\r\njob11\r\nuse other\r\n"); err != nil {
		t.Fatal(err)
	}
	<-f.handed
	f.answerAll()
	line, err := r.ReadString('\n')
	if err != nil || line != "INSERTED 11\r\n" {
		t.Fatalf("after the put: %q, %v", line, err)
	}
	if line, err = r.ReadString('\n'); err != nil || line != "USING other\r\n" {
		t.Fatalf("after use: %q, %v", line, err)
	}
}
