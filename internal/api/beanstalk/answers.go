package beanstalk

import (
	"net"
	"sync"
	"syscall"

	"github.com/chronoq/chronoq/internal/engine"
)

// Puts are answered from where they complete, not by the connection's
// goroutine.
//
// Why: a put's answer may leave only after the fdatasync that covers it.
// If the connection's goroutine waited for it, every put would wake that
// goroutine twice, once for the command and once for the answer; the
// scheduler's wake-ups, not the work, are most of a put's server CPU
// (docs/benchmarks.md, "Where the remaining gap is"). Instead the
// connection hands the put to the broker (Backend.PutThen) and goes back
// to reading; the goroutine that completes the batch (the broker's
// syncer) formats the answer into the connection's queue and, once its
// whole group is answered, writes each connection's queue with one
// non-blocking write(2). What the socket does not take (a client that
// reads slowly) goes to a writer goroutine of the connection's own, which
// waits on the socket; the syncer never does.
//
// Order: answers leave in command order. Puts are numbered as they are
// handed over, and an answer waits in its slot until the puts before it
// are answered. Any command other than a put first waits until every put
// before it is answered and its answer handed to the socket or to the
// connection's buffered writer (settle), and the connection's writer is
// flushed before the next put is handed over, so the two paths never
// hold answers at the same time.
type putAnswers struct {
	nc  net.Conn
	raw syscall.RawConn // nil: no non-blocking writes, the writer goroutine writes

	mu      sync.Mutex
	first   uint64    // tag of slots[head]
	slots   []putSlot // slots[head:]: puts handed over, not yet in out
	head    int
	bytes   int    // payload bytes of the puts in slots[head:]
	out     []byte // answers in order, not yet written
	spare   []byte // the writer goroutine's other buffer
	flushQ  bool   // a flush is due after the current group
	writer  bool   // the writer goroutine owns out
	waiting bool   // settle waits on wake
	wake    chan struct{}
	err     error // a write failed: later answers are dropped

	// answerFn and flushFn are a.answer and a.flush, bound once.
	answerFn func(tag uint64, res engine.PutResult, err error) func()
	flushFn  func()
	// format turns an answer into its line (conn.appendPutAnswer).
	format func(dst []byte, tube string, res engine.PutResult, err error) []byte
}

type putSlot struct {
	done bool
	size int
	tube string // for the log line of a failed put
	res  engine.PutResult
	err  error
}

// maxOutQueued bounds the answers waiting in out for a client that does
// not read them: past it, the connection waits (settle) before handing
// over another put.
const maxOutQueued = 64 << 10

func newPutAnswers(nc net.Conn, format func([]byte, string, engine.PutResult, error) []byte) *putAnswers {
	a := &putAnswers{nc: nc, raw: rawConnOf(nc), wake: make(chan struct{}, 1), format: format}
	a.answerFn, a.flushFn = a.answer, a.flush
	return a
}

// room reports whether another put of size bytes may be handed over now
// (Bounds: maxQueuedPuts, maxQueuedBytes, maxOutQueued).
func (a *putAnswers) room(size int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slots)-a.head < maxQueuedPuts && a.bytes+size <= maxQueuedBytes && len(a.out) < maxOutQueued
}

// hand numbers a put about to be handed to the broker.
func (a *putAnswers) hand(tube string, size int) (tag uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.head == len(a.slots) {
		clear(a.slots)
		a.slots, a.head = a.slots[:0], 0
	}
	tag = a.first + uint64(len(a.slots)-a.head)
	a.slots = append(a.slots, putSlot{tube: tube, size: size})
	a.bytes += size
	return tag
}

// answer takes a put's durable answer (Backend.PutThen's then). It runs on
// the goroutine completing the put and never blocks on the socket.
func (a *putAnswers) answer(tag uint64, res engine.PutResult, err error) (flush func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := a.head + int(tag-a.first)
	if tag < a.first || i >= len(a.slots) {
		return nil // not handed over by this connection: cannot happen
	}
	s := &a.slots[i]
	s.done, s.res, s.err = true, res, err
	for a.head < len(a.slots) && a.slots[a.head].done {
		s := &a.slots[a.head]
		if a.err == nil {
			a.out = a.format(a.out, s.tube, s.res, s.err)
		}
		a.bytes -= s.size
		*s = putSlot{}
		a.head++
		a.first++
	}
	a.signal()
	if len(a.out) == 0 || a.writer || a.flushQ {
		return nil
	}
	a.flushQ = true
	return a.flushFn
}

// signal wakes a settle that waits, once nothing is in flight. a.mu held.
func (a *putAnswers) signal() {
	if a.waiting && a.head == len(a.slots) && !a.writer {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// flush writes the queued answers with one non-blocking write and leaves
// what the socket did not take to the writer goroutine.
func (a *putAnswers) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushQ = false
	if a.writer || len(a.out) == 0 {
		return
	}
	if a.raw != nil {
		n, err := tryWrite(a.raw, a.out)
		if err != nil {
			a.broken(err)
			return
		}
		a.out = a.out[:copy(a.out, a.out[n:])]
		if len(a.out) == 0 {
			return
		}
	}
	a.writer = true
	go a.writeRest()
}

// broken drops what is queued after a failed write: the client is gone,
// and the connection's goroutine learns it from its own read or write.
// a.mu held.
func (a *putAnswers) broken(err error) {
	a.err = err
	a.out = a.out[:0]
}

// writeRest is the connection's writer goroutine: it writes out until
// nothing is left, waiting on the socket as long as the client takes.
func (a *putAnswers) writeRest() {
	a.mu.Lock()
	for len(a.out) > 0 && a.err == nil {
		buf := a.out
		a.out, a.spare = a.spare[:0], nil
		a.mu.Unlock()
		_, err := a.nc.Write(buf)
		a.mu.Lock()
		if err != nil {
			a.broken(err)
		}
		a.spare = buf[:0]
	}
	a.out = a.out[:0]
	a.writer = false
	a.signal()
	a.mu.Unlock()
}

// settle waits until every put handed over is answered and no writer
// goroutine runs, then moves the answers not yet written to w (ahead of
// what the connection answers next). Only the connection's goroutine
// calls it.
func (a *putAnswers) settle(w interface{ Write([]byte) (int, error) }) {
	a.mu.Lock()
	for a.head < len(a.slots) || a.writer {
		a.waiting = true
		a.mu.Unlock()
		<-a.wake
		a.mu.Lock()
	}
	a.waiting = false
	if len(a.out) > 0 {
		_, _ = w.Write(a.out)
		a.out = a.out[:0]
	}
	a.mu.Unlock()
}
