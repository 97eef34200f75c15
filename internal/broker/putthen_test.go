package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// putThenLog records what PutThen's then and flush see, as a beanstalkd
// connection does (internal/api/beanstalk/answers.go).
type putThenLog struct {
	mu      sync.Mutex
	tags    []uint64
	seqs    []uint64
	errs    []error
	flushes int
	pending bool // an answer came since the last flush
	done    chan struct{}
	want    int
}

func (l *putThenLog) then(tag uint64, res engine.PutResult, err error) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tags = append(l.tags, tag)
	l.seqs = append(l.seqs, res.Seq)
	l.errs = append(l.errs, err)
	if len(l.tags) == l.want {
		close(l.done)
	}
	if l.pending {
		return nil
	}
	l.pending = true
	return l.flush
}

func (l *putThenLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = false
	l.flushes++
}

// PutThen answers on the syncer after the fdatasync that covers the put,
// never before; puts handed over together are numbered in order, and
// their answers come in one group with one flush.
func TestPutThenAnswersAfterTheSync(t *testing.T) {
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Put(ctx, "default", "w", engine.PutRequest{Payload: []byte("queue exists")}); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	unhold := func() { once.Do(func() { close(release) }) }
	defer unhold()
	var first sync.Once
	hook := func() {
		first.Do(func() {
			close(held)
			<-release
		})
	}
	b.beforeSync.Store(&hook)

	const n = 8
	l := &putThenLog{done: make(chan struct{}), want: n}
	// Hold the loop so all n land in one turn: a request that parks on
	// a channel the test closes.
	gate, inLoop := make(chan struct{}), make(chan struct{})
	go b.do(ctx, func(time.Time) (any, error) { close(inLoop); <-gate; return nil, nil })
	<-inLoop
	for i := 0; i < n; i++ {
		b.PutThen(ctx, "default", "w", engine.PutRequest{Payload: []byte(fmt.Sprint(i))}, uint64(100+i), l.then)
	}
	close(gate)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the puts' sync never started")
	}
	l.mu.Lock()
	if len(l.tags) != 0 {
		t.Errorf("%d puts answered before their fdatasync", len(l.tags))
	}
	l.mu.Unlock()
	unhold()
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("puts never answered after the sync")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.tags {
		if l.errs[i] != nil {
			t.Fatalf("put %d: %v", i, l.errs[i])
		}
		if l.tags[i] != uint64(100+i) || (i > 0 && l.seqs[i] != l.seqs[i-1]+1) {
			t.Fatalf("answers out of order: tags %v, seqs %v", l.tags, l.seqs)
		}
	}
	if l.flushes != 1 {
		t.Errorf("%d flushes for one group, want 1", l.flushes)
	}
}

// A put that cannot be handed over (the broker is closed) is answered at
// once, on the caller's goroutine, with an error.
func TestPutThenAfterClose(t *testing.T) {
	b, err := Open(Options{Dir: t.TempDir(), Logger: quiet, WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	l := &putThenLog{done: make(chan struct{}), want: 1}
	b.PutThen(context.Background(), "default", "w", engine.PutRequest{Payload: []byte("x")}, 7, l.then)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tags) != 1 || l.tags[0] != 7 || engine.CodeOf(l.errs[0]) != engine.CodeUnavailable || l.flushes != 1 {
		t.Fatalf("after close: tags %v errs %v flushes %d, want tag 7, unavailable, one flush", l.tags, l.errs, l.flushes)
	}
}
