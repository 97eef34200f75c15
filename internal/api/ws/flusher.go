package ws

import (
	"runtime"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Publications go out through a few shared flusher goroutines rather than
// through a writer goroutine per connection.
//
// Why: in fan-out almost all of the server's CPU is the write(2) per
// delivery (docs/benchmarks.md), so what matters is how many publications
// each write carries. With a goroutine per connection, a publication to
// 1 000 subscribers makes 1 000 goroutines runnable at once; the one that
// reads the publisher's next command is readied by the network poller
// behind all of them, so the next publication arrives only once every
// subscriber has been written to, and each write carries one publication.
// A flusher instead walks the connections with something queued, writing
// each one's whole queue in one non-blocking write; the run queue stays
// short, the next publications arrive while the walk is under way, and
// the connections it has not reached yet take them in the same write.
// The batching grows with the load and costs no waiting: nothing is ever
// held back while a flusher is free.
//
// A flusher never blocks on a socket: what a non-blocking write leaves
// (the client reads slowly, its socket buffer is full) is handed with the
// rest of the connection's queue to the connection's own writer goroutine
// (flushWS), which waits with the write deadline like any write. Only
// publications and text messages take this path; control frames (ping,
// pong, close) and connections without a raw socket (TLS) always use the
// writer goroutine. A connection is owned by exactly one of them at a
// time (conn.writing), so its messages keep their order.
type flushers struct {
	mu      sync.Mutex
	dirty   []*conn // connections waiting for a flusher, in order
	head    int     // dirty[head:] are still waiting
	running int
	// later holds hot connections until the next tick (PubWriteInterval).
	later []*conn
	tick  *time.Timer
	armed bool
}

// flushChunk is how many connections a flusher takes at a time: small
// enough that two flushers share a walk, large enough that the list's
// lock is not taken per connection.
const flushChunk = 32

// queueLater parks c (its writing set, only live publications queued,
// its last write of publications less than PubWriteInterval ago) until
// the next tick, which hands every parked connection to the flushers: a
// hot channel's subscribers then each take what arrived meanwhile in one
// write. One timer serves every connection; a publication waits at most
// one interval. What is queued to a parked connection meanwhile (a
// reply, a ping, the close of a slow consumer) waits with it.
func (s *Server) queueLater(c *conn) {
	f := &s.flush
	f.mu.Lock()
	f.later = append(f.later, c)
	if !f.armed {
		f.armed = true
		if f.tick == nil {
			f.tick = time.AfterFunc(s.opts.PubWriteInterval, s.flushLater)
		} else {
			f.tick.Reset(s.opts.PubWriteInterval)
		}
	}
	f.mu.Unlock()
}

func (s *Server) flushLater() {
	f := &s.flush
	f.mu.Lock()
	f.armed = false
	f.dirty = append(f.dirty, f.later...)
	clear(f.later)
	if cap(f.later) > 4096 {
		f.later = nil
	} else {
		f.later = f.later[:0]
	}
	start := min(runtime.GOMAXPROCS(0)-f.running, len(f.dirty)-f.head)
	f.running += max(start, 0)
	f.mu.Unlock()
	for range start {
		go s.runFlusher()
	}
}

// hotLocked says whether c's queue should wait for the next tick.
func (c *conn) hotLocked(now int64) bool {
	iv := c.s.opts.PubWriteInterval
	if iv <= 0 || c.pubsAt == 0 || time.Duration(now-c.pubsAt) >= iv {
		return false
	}
	for i := range c.q {
		if c.q[i].kind != kindPub || !c.q[i].bounded {
			return false
		}
	}
	return true
}

// monoNow is a monotonic clock in nanoseconds, never 0.
func monoNow() int64 { return int64(time.Since(monoBase)) + 1 }

var monoBase = time.Now()

// queueFlush hands c (its writing set) to the flushers; c.mu may be held.
func (s *Server) queueFlush(c *conn) {
	f := &s.flush
	f.mu.Lock()
	f.dirty = append(f.dirty, c)
	start := f.running < runtime.GOMAXPROCS(0)
	if start {
		f.running++
	}
	f.mu.Unlock()
	if start {
		go s.runFlusher()
	}
}

func (s *Server) runFlusher() {
	var chunk []*conn
	var buf []byte
	var batch []outMsg
	f := &s.flush
	for {
		f.mu.Lock()
		n := min(len(f.dirty)-f.head, flushChunk)
		if n == 0 {
			clear(f.dirty)
			f.dirty, f.head = f.dirty[:0], 0
			if cap(f.dirty) > 4096 {
				f.dirty = nil // a burst is over
			}
			f.running--
			f.mu.Unlock()
			return
		}
		chunk = append(chunk[:0], f.dirty[f.head:f.head+n]...)
		clear(f.dirty[f.head : f.head+n])
		f.head += n
		if f.head >= 1024 && f.head*2 >= len(f.dirty) {
			k := copy(f.dirty, f.dirty[f.head:])
			clear(f.dirty[k:])
			f.dirty, f.head = f.dirty[:k], 0
		}
		f.mu.Unlock()
		for i, c := range chunk {
			chunk[i] = nil
			buf, batch = c.flushOnce(buf, batch)
		}
		if cap(buf) > 4*maxBatch {
			buf = nil
		}
	}
}

// flushOnce writes what c has queued in one non-blocking write and then
// gives c back (nothing left), queues it again (more arrived meanwhile),
// or hands it to its writer goroutine (a control frame is queued, or the
// socket took less than everything).
func (c *conn) flushOnce(buf []byte, batch []outMsg) ([]byte, []outMsg) {
	defer c.recoverPanic("flusher", nil)
	c.mu.Lock()
	if c.closing || !flushable(c.q) {
		c.mu.Unlock()
		go c.flushWS()
		return buf, batch
	}
	batch = c.takeQueue(batch)
	c.mu.Unlock()
	buf = buf[:0]
	out := buf
	pubs := false
	if len(batch) == 1 && batch[0].kind == kindFrame {
		out = batch[0].data // a lone reply (sendNow) goes out as it is
	} else {
		for i := range batch {
			switch m := &batch[i]; m.kind {
			case kindPub:
				pubs = pubs || m.bounded
				buf = append(buf, wireOf(m.pub).wsFrame...)
			case kindFrame:
				buf = append(buf, m.data...)
			default:
				buf = appendFrame(buf, websocket.TextMessage, m.data)
			}
		}
		out = buf
	}
	clear(batch)
	// A deadline flushWS set stays on the socket, and once past it fails
	// every write, even a non-blocking one: clear it (the flushers never
	// wait, so they need none).
	if !c.wdeadline.IsZero() {
		c.nc.SetWriteDeadline(time.Time{})
		c.wdeadline = time.Time{}
	}
	n, err := c.tryWrite(out)
	if err != nil {
		c.finishWriting(true)
		return buf, batch
	}
	if n < len(out) {
		c.mu.Lock()
		c.unsent = append(c.unsent[:0], out[n:]...)
		c.mu.Unlock()
		go c.flushWS()
		return buf, batch
	}
	c.mu.Lock()
	if pubs {
		c.pubsAt = monoNow()
	}
	if len(c.q) == 0 {
		c.writing = false
		c.mu.Unlock()
		return buf, batch
	}
	if c.hotLocked(monoNow()) {
		c.s.queueLater(c)
	} else {
		c.s.queueFlush(c)
	}
	c.mu.Unlock()
	return buf, batch
}

// flushable: the queue holds only what a flusher writes.
func flushable(q []outMsg) bool {
	for i := range q {
		if k := q[i].kind; k != kindPub && k != kindText && k != kindFrame {
			return false
		}
	}
	return true
}
