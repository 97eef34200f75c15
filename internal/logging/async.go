// Package logging holds chronoq's log handler: slog records go through a
// bounded queue to a writer goroutine, so a slow terminal or disk never
// blocks request handling. When the queue is full a line is dropped and
// counted; the next line written reports how many were lost.
package logging

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Async wraps a handler with a bounded queue.
type Async struct {
	inner   slog.Handler
	q       *queue
	dropped *atomic.Uint64
}

type queue struct {
	ch      chan item
	done    chan struct{}
	once    sync.Once
	dropped atomic.Uint64
}

type item struct {
	h slog.Handler
	r slog.Record
}

// NewAsync starts the writer goroutine; size bounds the queued lines.
func NewAsync(inner slog.Handler, size int) *Async {
	q := &queue{ch: make(chan item, size), done: make(chan struct{})}
	go q.run(inner)
	return &Async{inner: inner, q: q, dropped: &q.dropped}
}

func (q *queue) run(inner slog.Handler) {
	defer close(q.done)
	for it := range q.ch {
		if n := q.dropped.Swap(0); n > 0 {
			r := slog.NewRecord(it.r.Time, slog.LevelWarn, "log lines dropped: the log writer fell behind", 0)
			r.AddAttrs(slog.Uint64("dropped", n))
			_ = inner.Handle(context.Background(), r)
		}
		_ = it.h.Handle(context.Background(), it.r)
	}
}

func (a *Async) Enabled(ctx context.Context, l slog.Level) bool { return a.inner.Enabled(ctx, l) }

// Handle queues the record, or drops and counts it when the queue is full.
func (a *Async) Handle(_ context.Context, r slog.Record) error {
	select {
	case a.q.ch <- item{h: a.inner, r: r.Clone()}:
	default:
		a.q.dropped.Add(1)
	}
	return nil
}

func (a *Async) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Async{inner: a.inner.WithAttrs(attrs), q: a.q, dropped: a.dropped}
}

func (a *Async) WithGroup(name string) slog.Handler {
	return &Async{inner: a.inner.WithGroup(name), q: a.q, dropped: a.dropped}
}

// Dropped is the number of lines dropped and not yet reported.
func (a *Async) Dropped() uint64 { return a.dropped.Load() }

// Close flushes queued lines; later lines are dropped.
func (a *Async) Close() {
	a.q.once.Do(func() { close(a.q.ch) })
	<-a.q.done
}
