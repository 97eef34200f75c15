package beanstalk

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// A conn is one client connection, served by one goroutine: commands are
// read, run and answered strictly in order; answers are flushed before the
// connection reads again. The one overlap: puts pipelined in one read are
// all handed to the broker before the first is awaited (they share a loop
// turn and an fdatasync), and anything else waits until they are answered.
type conn struct {
	s   *Server
	nc  net.Conn
	sr  sockReader
	r   *bufio.Reader
	w   *bufio.Writer
	ctx context.Context

	use   tubeRef
	watch []tubeRef

	mu   sync.Mutex // guards resv: stats prunes it from other goroutines
	resv map[uint64]*reservation
	// unsent are reservations whose answer (RESERVED, TOUCHED) is still in
	// the write buffer: their end is settled when it leaves (settle).
	unsent []*reservation

	producer, worker, waiting atomic.Bool

	body []byte // put body buffer, reused: the broker copies payloads
	out  []byte // scratch for answer lines

	// queued are puts started but not yet answered (pipelined puts, see
	// put): every answer waits for them (settlePuts).
	queued      []func() (engine.PutResult, error)
	queuedBytes int
}

type tubeRef struct {
	name  string // as the client spells it
	queue string // the queue holding its jobs
}

// reservation is a job this connection reserved. The receipt proves it to
// the engine; until is the reservation's deadline in the engine.
//
// end is the deadline as the client counts it, for DEADLINE_SOON: TTR
// after the answer (RESERVED, TOUCHED) was written, or until if later.
// The engine's deadline counts from when the command ran, which is before
// the client hears the answer (by a log commit and its fsync under the
// always policy); beanstalkd answers DEADLINE_SOON no earlier than TTR - 1s
// after the reserve its client saw, and clients measure it so.
type reservation struct {
	queue, id, receipt string
	ttr                time.Duration
	until, end         time.Time
}

// settle counts TTR again from the moment the answers of unsent
// reservations left the write buffer (at): until then the client cannot
// have seen them, and a goroutine descheduled between the answer and the
// write must not shorten the client's TTR.
func (c *conn) settle(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.unsent {
		if e := at.Add(r.ttr); e.After(r.end) {
			r.end = e
		}
	}
	clear(c.unsent)
	c.unsent = c.unsent[:0]
}

// extend sets the reservation's deadlines after a reserve or touch
// answered now.
func (r *reservation) extend(until, now time.Time) {
	r.until, r.end = until, until
	if e := now.Add(r.ttr); e.After(until) {
		r.end = e
	}
}

// sockReader feeds the connection's buffered reader. Before it blocks on
// the socket it flushes the answers queued so far: answers to pipelined
// commands leave together, and none waits behind a read (a command line
// or body still incomplete, or nothing more to do).
//
// While a reserve waits, a watcher goroutine reads the socket to notice
// the client going away; what it read (pipelined commands) is handed back
// here, in order.
type sockReader struct {
	nc      net.Conn
	w       *bufio.Writer
	idle    time.Duration   // Options.IdleTimeout
	settle  func()          // queues the answers of puts in flight
	flushed func(time.Time) // after the buffered answers left
	pending []byte
	err     error
}

func (r *sockReader) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	// Nothing may wait behind a read that can block: not the answers
	// already queued, nor those of the puts in flight.
	r.settle()
	if r.w.Buffered() > 0 {
		if err := r.w.Flush(); err != nil {
			return 0, err
		}
		if r.flushed != nil {
			r.flushed(time.Now())
		}
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.idle > 0 {
		// Only reads for commands wait under the idle timeout: a reserve
		// waits with its own reader (watchHangup), as long as it likes.
		_ = r.nc.SetReadDeadline(time.Now().Add(r.idle))
	}
	return r.nc.Read(p)
}

const bufSize = 16 << 10

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, ctx: s.ctx, resv: map[uint64]*reservation{}}
	c.w = bufio.NewWriterSize(nc, bufSize)
	c.sr.nc, c.sr.w, c.sr.idle, c.sr.flushed = nc, c.w, s.opts.IdleTimeout, c.settle
	c.sr.settle = c.settlePuts
	c.r = bufio.NewReaderSize(&c.sr, bufSize)
	def := tubeRef{name: "default", queue: "default"}
	if q, ok := queueOf("default"); ok {
		def.queue = q
	}
	c.use, c.watch = def, []tubeRef{def}
	s.mu.Lock()
	t := s.tube("default")
	t.using++
	t.watching++
	s.mu.Unlock()
	return c
}

func (c *conn) serve() {
	defer c.close()
	defer c.recoverPanic("commands")
	for {
		line, err := readLine(c.r)
		switch {
		case errors.Is(err, errLineTooLong):
			c.send(msgBadFormat)
		case err != nil:
			return
		case httpLine(line):
			// Earlier commands keep their answers; this line gets none.
			c.settlePuts()
			_ = c.w.Flush()
			c.s.noteCrossProtocol(c.nc.RemoteAddr())
			return
		default:
			if !c.dispatch(line) {
				c.settlePuts()
				_ = c.w.Flush()
				return
			}
		}
	}
}

// close ends the connection: its reserved jobs go back to ready at once
// (not at their TTR), uncounted as releases, as beanstalkd does.
func (c *conn) close() {
	c.nc.Close()
	c.mu.Lock()
	held := c.resv
	c.resv = map[uint64]*reservation{}
	c.mu.Unlock()
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range held {
		if !r.until.After(now) {
			c.s.timeouts.Add(1)
			continue
		}
		_, err := c.s.b.Release(ctx, c.s.opts.Namespace, r.queue, r.id, engine.ReleaseRequest{Receipt: r.receipt, Silent: true})
		if err != nil && !notFound(err) {
			c.s.lg.Warn("beanstalk: could not release a closed connection's job; it returns at its TTR", "queue", r.queue, "id", r.id, "err", err)
		}
	}
	s := c.s
	s.mu.Lock()
	s.tube(c.use.name).using--
	for _, t := range c.watch {
		s.tube(t.name).watching--
	}
	delete(s.conns, c)
	s.mu.Unlock()
}

// send queues a fixed answer.
func (c *conn) send(msg string) {
	c.settlePuts()
	_, _ = c.w.WriteString(msg)
}

// sendNum queues "WORD n\r\n".
func (c *conn) sendNum(word string, n uint64) {
	c.settlePuts()
	b := append(c.out[:0], word...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '\r', '\n')
	c.out = b
	_, _ = c.w.Write(b)
}

// sendJob queues "WORD id bytes\r\n<data>\r\n".
func (c *conn) sendJob(word string, id uint64, data []byte) {
	c.settlePuts()
	b := append(c.out[:0], word...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, id, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(data)), 10)
	b = append(b, '\r', '\n')
	c.out = b
	_, _ = c.w.Write(b)
	_, _ = c.w.Write(data)
	_, _ = c.w.WriteString("\r\n")
}

// sendData queues "OK bytes\r\n<yaml>\r\n".
func (c *conn) sendData(yaml []byte) {
	c.settlePuts()
	b := append(c.out[:0], "OK "...)
	b = strconv.AppendInt(b, int64(len(yaml)), 10)
	b = append(b, '\r', '\n')
	c.out = b
	_, _ = c.w.Write(b)
	_, _ = c.w.Write(yaml)
	_, _ = c.w.WriteString("\r\n")
}

// maxPending bounds what a waiting reserve buffers from a client that
// keeps sending; past it the client's hang-up is noticed after the wait.
const maxPending = 1 << 20

// watchHangup reads the socket while a reserve waits, so a client that
// goes away ends the wait (cancel) instead of leaving it parked. The
// returned stop hands whatever was read back to the command reader.
func (c *conn) watchHangup(cancel context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	// The idle timeout's deadline must not end the watch: waiting in a
	// reserve is not being idle.
	_ = c.nc.SetReadDeadline(time.Time{})
	go func() {
		defer close(done)
		defer c.recoverPanic("hangup watch")
		var buf [4096]byte
		for len(c.sr.pending) < maxPending {
			n, err := c.nc.Read(buf[:])
			c.sr.pending = append(c.sr.pending, buf[:n]...)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					c.sr.err = err
					cancel()
				}
				return
			}
		}
	}()
	return func() {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

// setWaiting marks the connection as blocked in a reserve, for the
// current-waiting counts.
func (c *conn) setWaiting(on bool) {
	c.waiting.Store(on)
	d := 1
	if !on {
		d = -1
	}
	c.s.mu.Lock()
	for _, t := range c.watch {
		c.s.tube(t.name).waiting += d
	}
	c.s.mu.Unlock()
}
