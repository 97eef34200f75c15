package ws

import (
	"encoding/binary"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/pubsub"
)

// A conn is one client connection, WebSocket or SSE. Everything it sends
// goes through its outbox, in order, written by one writer at a time:
//
//   - WebSocket: a writer goroutine exists only while there is something
//     to write (started by the first message into an empty outbox, gone
//     when it is drained). An idle connection thus holds one goroutine,
//     its reader, which is most of what makes it cost a few KB.
//   - SSE: the request's handler goroutine is the writer, woken by kick.
//
// Publishers only ever append to the outbox under c.mu, so a slow socket
// never blocks a publisher; past MaxQueue/MaxQueueBytes the connection is
// cut off as a slow consumer instead of growing.
type conn struct {
	s    *Server
	sse  bool
	nc   net.Conn        // WebSocket only: the socket, frames read and written by us
	raw  syscall.RawConn // nc's, for the flushers' non-blocking writes (flusher.go); nil: none
	kick chan struct{}   // SSE only: wakes the writer

	mu        sync.Mutex
	q         []outMsg
	qLen      int // bounded messages queued
	qBytes    int
	writing   bool          // a flusher or the writer goroutine owns the socket's writing
	unsent    []byte        // what a flusher's write left, for flushWS to write first
	pubsAt    int64         // monoNow of a flusher's last write of live publications
	wdeadline time.Time     // the socket's write deadline; the writer's own
	closing   bool          // disconnecting: only the final messages go out
	final     chan struct{} // closed once the final frame is written (or the write failed)
	finalDone bool          // final is closed
	reason    disconnectReason

	// WebSocket commands waiting for process (guarded by mu).
	inbox      [][]byte
	processing bool
	room       chan struct{} // the reader waits here while inbox is full
	proc       sync.WaitGroup
	lastRead   atomic.Int64 // unix nanos of the last frame read
	connected  atomic.Bool

	// Owned by the goroutine running commands: process (WebSocket) or
	// the handler (SSE).
	id        *identity
	subs      map[string]*pubsub.Subscription // by "ns/ch"
	cons      atomic.Pointer[consumer]
	queued    []queuedPut    // pipelined puts in flight (settlePuts)
	async     sync.WaitGroup // running ack/nack/touch/bury
	sem       chan struct{}  // bounds async; made on first use
	pingTimer *time.Timer
	expTimer  *time.Timer
	exp       atomic.Int64 // unix nanos of the token's exp; 0: none

	// WebSocket reading (frames.go): a small buffer inside the struct, or
	// a shared one while it holds a read's bytes (pooled, socket_unix.go),
	// and the message being assembled from fragments.
	rbuf       [128]byte
	pooled     *[]byte
	rpos, rend int
	frag       []byte
	fragOp     byte
	inFrag     bool

	// SSE only: where the stream stands in each channel, for event ids.
	ssePos []ssePos
}

type msgKind uint8

const (
	kindText  msgKind = iota // data is a JSON message
	kindFrame                // WebSocket only: data is a text frame, ready to write
	kindPub                  // pub is a publication
	kindPing
	kindPong
	kindClose // data is the close payload (code + reason)
	kindSubscribed
)

type outMsg struct {
	kind msgKind
	// bounded messages count against the slow-consumer limit. Replies and
	// live publications do; recovered publications and pushed jobs do not,
	// because they are bounded already (by history size, by prefetch),
	// and counting them would cut off exactly the clients that just
	// reconnected to catch up.
	bounded bool
	data    []byte
	n       int    // kindFrame: the messages data holds (settlePuts' answers); 0 counts as 1
	event   string // SSE event name of a kindText message
	pub     *pubsub.Publication
	pos     *ssePos // kindSubscribed (SSE): the position the stream starts at
}

func (m *outMsg) size() int {
	if m.pub != nil {
		return len(m.pub.Data) + 64
	}
	return len(m.data)
}

// Deliver implements pubsub.Subscriber: called with the channel locked, it
// must not block.
func (c *conn) Deliver(p *pubsub.Publication) bool {
	return c.send(outMsg{kind: kindPub, pub: p, bounded: true})
}

// send queues m; false means the connection is closing (or was just cut
// off for being too slow) and m was dropped.
func (c *conn) send(m outMsg) bool { return c.enqueue(m, false) }

// sendNow is send for a reply from the goroutine running commands: when
// no writer owns the socket, that goroutine writes the queue itself with
// one non-blocking write (flushOnce) instead of starting a writer
// goroutine for it, which was a goroutine start and a wake-up per put
// (docs/benchmarks.md, "WebSocket and HTTP put, per request"). What the
// socket does not take goes to the writer goroutine as before, so the
// caller never waits for the client. Publishers and the broker's
// goroutines use send: a write(2) has no place on their paths.
func (c *conn) sendNow(m outMsg) bool { return c.enqueue(m, true) }

func (c *conn) enqueue(m outMsg, now bool) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	if m.bounded {
		n, k := m.size(), max(m.n, 1)
		if c.qLen+k > c.s.opts.MaxQueue || c.qBytes+n > c.s.opts.MaxQueueBytes {
			c.overflowLocked()
			c.mu.Unlock()
			return false
		}
		c.qLen += k
		c.qBytes += n
	}
	c.q = append(c.q, m)
	if now && !c.writing && c.raw != nil {
		c.writing = true
		c.mu.Unlock()
		c.flushOnce(nil, nil)
		return true
	}
	c.kickLocked()
	c.mu.Unlock()
	return true
}

// overflowLocked cuts off a slow consumer: what is queued is dropped (the
// client recovers it from history after reconnecting) and only the close
// frame remains, so memory is released at once.
func (c *conn) overflowLocked() {
	c.s.slowDisconnects.Add(1)
	clear(c.q)
	c.q = c.q[:0]
	c.qLen, c.qBytes = 0, 0
	c.closeLocked(discSlow, true)
}

// disconnect ends the connection for reason r: the client gets
// {"disconnect":...} and a close frame with r's code. It reports false
// when the connection was already closing.
func (c *conn) disconnect(r disconnectReason) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.closing
	c.closeLocked(r, true)
	return !was
}

func (c *conn) closeLocked(r disconnectReason, push bool) {
	if c.closing {
		return
	}
	c.closing = true
	c.reason = r
	c.final = make(chan struct{})
	switch {
	case push && c.sse:
		c.q = append(c.q, outMsg{kind: kindText, event: "disconnect", data: marshal(r)})
	case push:
		c.q = append(c.q, outMsg{kind: kindText, data: marshal(map[string]disconnectReason{"disconnect": r})})
	}
	if !c.sse {
		c.q = append(c.q, outMsg{kind: kindClose, data: websocket.FormatCloseMessage(r.Code, r.Reason)})
	}
	c.kickLocked()
}

func (c *conn) kickLocked() {
	if c.sse {
		select {
		case c.kick <- struct{}{}:
		default:
		}
		return
	}
	if !c.writing {
		c.writing = true
		// Only publications wait for a flusher: a reply to a connection
		// that has nothing else queued goes out from its own goroutine at
		// once, so a publisher hears back (and sends its next publication)
		// while the flushers are still walking the subscribers of its last
		// one, which then go out together.
		if c.raw != nil && c.q[0].kind == kindPub && flushable(c.q) {
			if c.hotLocked(monoNow()) {
				c.s.queueLater(c)
			} else {
				c.s.queueFlush(c)
			}
			return
		}
		go c.flushWS()
	}
}

// takeQueue hands the writer everything queued. The bounds count what is
// queued, not what is being written: one batch in flight plus a full queue
// is the most a connection holds.
func (c *conn) takeQueue(buf []outMsg) []outMsg {
	buf = append(buf[:0], c.q...)
	clear(c.q)
	if cap(c.q) > 64 {
		c.q = nil // a burst is over; an idle connection keeps no big slice
	} else {
		c.q = c.q[:0]
	}
	c.qLen, c.qBytes = 0, 0
	return buf
}

// flushWS is the WebSocket writer. Everything queued goes out in as few
// socket writes as possible (up to maxBatch bytes each); a publication's
// frame is encoded once per publication, whatever the subscriber count.
func (c *conn) flushWS() {
	defer c.recoverPanic("writer", nil)
	var batch []outMsg
	var buf []byte
	c.mu.Lock()
	unsent := c.unsent
	c.unsent = nil
	c.mu.Unlock()
	if len(unsent) > 0 {
		if err := c.write(unsent); err != nil {
			c.finishWriting(true)
			return
		}
	}
	for {
		c.mu.Lock()
		batch = c.takeQueue(batch)
		if len(batch) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		closed := false
		buf = buf[:0]
		var err error
		for i := range batch {
			m := &batch[i]
			var frame []byte
			switch m.kind {
			case kindPub:
				frame = wireOf(m.pub).wsFrame
			case kindText:
				frame = appendFrame(nil, websocket.TextMessage, m.data)
			case kindFrame:
				frame = m.data
			case kindPing:
				frame = appendFrame(nil, websocket.PingMessage, nil)
			case kindPong:
				frame = appendFrame(nil, websocket.PongMessage, m.data)
			case kindClose:
				frame = appendFrame(nil, websocket.CloseMessage, m.data)
				closed = true
			}
			if len(batch) == 1 || len(frame) > maxBatch {
				if len(buf) > 0 {
					if err = c.write(buf); err != nil {
						break
					}
					buf = buf[:0]
				}
				if err = c.write(frame); err != nil {
					break
				}
			} else {
				if len(buf)+len(frame) > maxBatch {
					if err = c.write(buf); err != nil {
						break
					}
					buf = buf[:0]
				}
				buf = append(buf, frame...)
			}
			if closed {
				break
			}
		}
		if err == nil && len(buf) > 0 {
			err = c.write(buf)
		}
		clear(batch)
		if cap(buf) > 4*maxBatch {
			buf = nil
		}
		if err != nil || closed {
			c.finishWriting(err != nil)
			return
		}
	}
}

const maxBatch = 64 << 10

func (c *conn) write(b []byte) error {
	if d, set := nextWriteDeadline(c.wdeadline, time.Now(), c.s.opts.WriteTimeout); set {
		c.nc.SetWriteDeadline(d)
		c.wdeadline = d
	}
	_, err := c.nc.Write(b)
	return err
}

// nextWriteDeadline decides the deadline of a write at now. Setting one
// costs a timer update per write, which at fan-out rates is a twentieth of
// the writer's CPU; so the deadline set last (cur) is kept while it still
// gives the write at least nine tenths of timeout.
func nextWriteDeadline(cur, now time.Time, timeout time.Duration) (time.Time, bool) {
	if !cur.IsZero() && cur.Sub(now) >= timeout-timeout/10 {
		return cur, false
	}
	return now.Add(timeout), true
}

// finishWriting runs when the close frame is out or a write failed. The
// socket stays open a moment after a close frame so the client can answer
// it (closing at once could reset the connection and lose the frame); the
// reader then sees the answer and cleans up. After a failed write there is
// nothing to wait for.
func (c *conn) finishWriting(failed bool) {
	c.mu.Lock()
	c.writing = false
	if !c.closing {
		c.closing = true
		c.reason = disconnectReason{Code: websocket.CloseAbnormalClosure, Reason: "write failed", Reconnect: true}
	}
	clear(c.q)
	c.q = nil
	c.finalLocked()
	c.mu.Unlock()
	if failed {
		c.nc.Close()
		return
	}
	time.AfterFunc(closeGrace, func() { c.nc.Close() })
}

const closeGrace = 2 * time.Second

// finalLocked marks the final frame written (or never to be written). The
// reader or teardown may have set closing first without a close frame (the
// peer vanished), so final may not exist yet; it is made closed then, and
// closed only once whoever gets here.
func (c *conn) finalLocked() {
	if c.final == nil {
		c.final = make(chan struct{})
	}
	if !c.finalDone {
		c.finalDone = true
		close(c.final)
	}
}

// appendFrame encodes one unmasked (server) frame, RFC 6455 §5.2.
func appendFrame(dst []byte, op int, payload []byte) []byte {
	n := len(payload)
	dst = append(dst, 0x80|byte(op))
	switch {
	case n <= 125:
		dst = append(dst, byte(n))
	case n <= 0xffff:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return append(dst, payload...)
}

// wire is a publication's encodings, made once per publication (Memo).
type wire struct {
	json    []byte // {"channel":..,"offset":..,"epoch":..,"data":..}
	wsFrame []byte // the WebSocket frame of {"pub":<json>}
}

func wireOf(p *pubsub.Publication) *wire {
	return p.Memo(encodePub).(*wire)
}

func encodePub(p *pubsub.Publication) any {
	b := make([]byte, 0, len(p.Data)+len(p.Namespace)+len(p.Channel)+80)
	b = append(b, `{"channel":`...)
	b = appendJSONString(b, p.Namespace+"/"+p.Channel)
	b = append(b, `,"offset":`...)
	b = strconv.AppendUint(b, p.Offset, 10)
	b = append(b, `,"epoch":`...)
	b = appendJSONString(b, p.Epoch)
	b = append(b, `,"data":`...)
	if len(p.Data) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, p.Data...)
	}
	b = append(b, '}')
	msg := make([]byte, 0, len(b)+8)
	msg = append(append(append(msg, `{"pub":`...), b...), '}')
	return &wire{json: b, wsFrame: appendFrame(nil, websocket.TextMessage, msg)}
}

func appendJSONString(b []byte, s string) []byte {
	return append(b, marshal(s)...)
}
