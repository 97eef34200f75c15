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

// countingBackend answers puts and records how many were in flight at
// once. Any other call panics (the embedded Backend is nil).
type countingBackend struct {
	Backend
	mu                    sync.Mutex
	seq                   uint64
	inflight, maxInflight int
}

func (f *countingBackend) Put(ctx context.Context, ns, q string, req engine.PutRequest) (engine.PutResult, error) {
	return f.PutQueued(ctx, ns, q, req)()
}

func (f *countingBackend) PutQueued(_ context.Context, _, _ string, req engine.PutRequest) func() (engine.PutResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	seq, data := f.seq, string(req.Payload)
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	return func() (engine.PutResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inflight--
		if data != fmt.Sprint("job", seq) {
			return engine.PutResult{}, fmt.Errorf("put %d carried %q", seq, data)
		}
		return engine.PutResult{Seq: seq}, nil
	}
}

// Puts that arrive in one read are all handed to the broker before the
// first one's answer is awaited, so they share a loop turn and a sync;
// the answers still come in order, one each.
func TestPipelinedPutsInFlightTogether(t *testing.T) {
	f := &countingBackend{}
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
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(bufio.NewReader(nc), got); err != nil {
		t.Fatalf("after %q: %v", got, err)
	}
	if string(got) != want.String() {
		t.Fatalf("answers %q, want %q", got, want.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxInflight < 2 {
		t.Fatalf("at most %d of %d pipelined puts were in flight at once: each waited for the one before", f.maxInflight, n)
	}
}
