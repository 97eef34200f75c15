package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// blockingHandler holds every write until released.
type blockingHandler struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	<-h.release
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { h.buf.WriteString(" " + a.String()); return true })
	h.buf.WriteString("\n")
	return nil
}
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler      { return h }

func TestAsyncNeverBlocksAndCountsDrops(t *testing.T) {
	h := &blockingHandler{release: make(chan struct{})}
	a := NewAsync(h, 4)
	lg := slog.New(a)
	// the writer is stuck: logging must still return at once
	for i := 0; i < 100; i++ {
		lg.Info("line", "i", i)
	}
	close(h.release)
	lg.Info("after")
	a.Close()
	// every line is either written or counted in a "dropped" report
	written, dropped := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(h.buf.String()), "\n") {
		if n, ok := strings.CutPrefix(line, "log lines dropped: the log writer fell behind dropped="); ok {
			d, err := strconv.Atoi(n)
			if err != nil {
				t.Fatal(err)
			}
			dropped += d
			continue
		}
		written++
	}
	if written+dropped != 101 || dropped < 50 {
		t.Fatalf("written %d + dropped %d, want 101 with most dropped:\n%s", written, dropped, h.buf.String())
	}
}
