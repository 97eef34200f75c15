package beanstalk

import (
	"bytes"
	"io"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

const (
	msgBadFormat      = "BAD_FORMAT\r\n"
	msgUnknownCommand = "UNKNOWN_COMMAND\r\n"
	msgExpectedCRLF   = "EXPECTED_CRLF\r\n"
	msgJobTooBig      = "JOB_TOO_BIG\r\n"
	msgDraining       = "DRAINING\r\n"
	msgOutOfMemory    = "OUT_OF_MEMORY\r\n"
	msgInternalError  = "INTERNAL_ERROR\r\n"
	msgNotFound       = "NOT_FOUND\r\n"
	msgDeleted        = "DELETED\r\n"
	msgReleased       = "RELEASED\r\n"
	msgBuried         = "BURIED\r\n"
	msgTouched        = "TOUCHED\r\n"
	msgKicked         = "KICKED\r\n"
	msgPaused         = "PAUSED\r\n"
	msgNotIgnored     = "NOT_IGNORED\r\n"
	msgTimedOut       = "TIMED_OUT\r\n"
	msgDeadlineSoon   = "DEADLINE_SOON\r\n"
)

// notFound reports the engine answers a beanstalkd client sees as
// NOT_FOUND: no such job or tube, or a job in the wrong state (reserved
// by someone else, a receipt that expired).
func notFound(err error) bool {
	switch engine.CodeOf(err) {
	case engine.CodeJobNotFound, engine.CodeQueueNotFound, engine.CodeNamespaceNotFound, engine.CodeConflict:
		return true
	}
	return false
}

// fail answers an error: NOT_FOUND for the not-found family, and
// INTERNAL_ERROR for what should not happen (the log failed).
func (c *conn) fail(err error) {
	if notFound(err) {
		c.send(msgNotFound)
		return
	}
	c.s.lg.Warn("beanstalk: command failed", "err", err)
	c.send(msgInternalError)
}

// dispatch runs one command line; false means close the connection.
func (c *conn) dispatch(raw []byte) bool {
	// A NUL cuts a C string short: beanstalkd rejects such lines.
	if bytes.IndexByte(raw, 0) >= 0 {
		c.send(msgBadFormat)
		return true
	}
	line := string(raw)
	o, arg := which(line)
	if exact(o) && arg != "" {
		c.send(msgBadFormat)
		return true
	}
	if o != opPut {
		// Queued puts go first: their effects and answers precede
		// this command's.
		c.settlePuts()
	}
	ns := c.s.opts.Namespace
	switch o {
	case opPut:
		return c.put(arg)

	case opPeekJob, opReserveJob, opDelete, opKickJob, opTouch, opStatsJob:
		id, ok := readU64(arg)
		if !ok {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		c.byID(o, id)

	case opPeekReady, opPeekDelayed, opPeekBuried:
		c.s.count(o)
		state := map[op]engine.State{opPeekReady: engine.StateReady, opPeekDelayed: engine.StateDelayed, opPeekBuried: engine.StateDead}[o]
		j, err := c.s.b.PeekState(c.ctx, ns, c.use.queue, state)
		if err != nil {
			c.fail(err)
			return true
		}
		c.sendJob("FOUND", j.Seq, j.Data)

	case opReserveTimeout:
		secs, ok := reserveTimeout(arg)
		if !ok {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		c.reserve(time.Duration(secs)*time.Second, secs < 0)

	case opReserve:
		c.s.count(o)
		c.reserve(0, true)

	case opRelease:
		id, rest, ok1 := readUint(arg, 1<<64-1)
		pri, rest, ok2 := readU32(rest)
		delay, rest, ok3 := readU32(rest)
		if !ok1 || !ok2 || !ok3 || rest != "" {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		c.release(id, pri, seconds(delay, engine.MaxDelay))

	case opBury:
		id, rest, ok1 := readUint(arg, 1<<64-1)
		pri, rest, ok2 := readU32(rest)
		if !ok1 || !ok2 || rest != "" {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		c.bury(id, pri)

	case opKick:
		bound, ok := kickBound(arg)
		if !ok {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		n, err := c.s.b.KickBounded(c.ctx, ns, c.use.queue, int(bound))
		if err != nil && !notFound(err) {
			c.fail(err)
			return true
		}
		c.sendNum("KICKED", uint64(n))

	case opStatsTube:
		q, ok := c.tubeQueue(arg)
		if !ok {
			return true
		}
		c.s.count(o)
		yaml, err := c.s.tubeStats(c.ctx, arg, q, time.Now())
		c.sendYAML(yaml, err)

	case opStats:
		c.s.count(o)
		yaml, err := c.s.serverStats(c.ctx, time.Now())
		c.sendYAML(yaml, err)

	case opUse:
		q, ok := c.tubeQueue(arg)
		if !ok {
			return true
		}
		c.s.count(o)
		c.s.mu.Lock()
		c.s.tube(c.use.name).using--
		c.s.tube(arg).using++
		c.s.mu.Unlock()
		c.use = tubeRef{name: arg, queue: q}
		_, _ = c.w.WriteString("USING " + arg + "\r\n")

	case opWatch:
		q, ok := c.tubeQueue(arg)
		if !ok {
			return true
		}
		c.s.count(o)
		if c.watching(arg) < 0 {
			c.watch = append(c.watch, tubeRef{name: arg, queue: q})
			c.s.mu.Lock()
			c.s.tube(arg).watching++
			c.s.mu.Unlock()
		}
		c.sendNum("WATCHING", uint64(len(c.watch)))

	case opIgnore:
		if !validTube(arg) {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		i := c.watching(arg)
		if i >= 0 && len(c.watch) < 2 {
			c.send(msgNotIgnored)
			return true
		}
		if i >= 0 {
			// beanstalkd removes from its watch set by moving the last
			// tube into the hole, which list-tubes-watched shows.
			last := len(c.watch) - 1
			c.watch[i] = c.watch[last]
			c.watch = c.watch[:last]
			c.s.mu.Lock()
			c.s.tube(arg).watching--
			c.s.mu.Unlock()
		}
		c.sendNum("WATCHING", uint64(len(c.watch)))

	case opListTubes:
		c.s.count(o)
		names, err := c.s.listTubes(c.ctx)
		if err != nil {
			c.fail(err)
			return true
		}
		c.sendData(yamlList(names))

	case opListTubeUsed:
		c.s.count(o)
		_, _ = c.w.WriteString("USING " + c.use.name + "\r\n")

	case opListTubesWatched:
		c.s.count(o)
		names := make([]string, len(c.watch))
		for i, t := range c.watch {
			names[i] = t.name
		}
		c.sendData(yamlList(names))

	case opQuit:
		return false

	case opPauseTube:
		name, rest, ok := readTubeArg(arg)
		if !ok {
			c.send(msgBadFormat)
			return true
		}
		delay, rest, ok := readU32(rest)
		if !ok || rest != "" {
			c.send(msgBadFormat)
			return true
		}
		c.s.count(o)
		q, ok := queueOf(name)
		if !validTube(name) || !ok {
			c.send(msgBadFormat)
			return true
		}
		c.pauseTube(name, q, seconds(delay, engine.MaxDelay))

	default:
		c.send(msgUnknownCommand)
	}
	return true
}

// failOr answers err, or msg when there is no error.
func (c *conn) failOr(err error, msg string) {
	if err != nil {
		c.fail(err)
		return
	}
	c.send(msg)
}

// seconds converts a protocol duration, cut to what the engine accepts
// (beanstalkd takes up to 2^32-1 seconds; chronoq caps delays at ten
// years and TTRs at 30 days).
func seconds(s uint32, limit time.Duration) time.Duration {
	return min(time.Duration(s)*time.Second, limit)
}

func (c *conn) watching(name string) int {
	for i, t := range c.watch {
		if t.name == name {
			return i
		}
	}
	return -1
}

// keepBody bounds the put buffer a connection keeps between puts.
const keepBody = 64 << 10

// raiseTubeLimit lets the used tube take jobs up to -z when its queue
// still has the default payload limit (1 MiB, below what -z allows): a
// queue given a limit of its own over HTTP keeps it. It reports whether
// the limit was raised.
func (c *conn) raiseTubeLimit() bool {
	ns, q := c.s.opts.Namespace, c.use.queue
	limit := uint32(c.s.opts.MaxJobSize)
	info, err := c.s.b.GetQueue(c.ctx, ns, q)
	switch {
	case engine.CodeOf(err) == engine.CodeQueueNotFound:
		// The put would have made the queue: make it with the limit.
	case err != nil || info.Config.MaxPayload != engine.DefaultQueueConfig().MaxPayload || limit <= info.Config.MaxPayload:
		return false
	}
	_, _, err = c.s.b.PutQueue(c.ctx, ns, q, engine.QueuePatch{MaxPayload: &limit})
	if err != nil {
		c.s.lg.Warn("beanstalk: could not raise a tube's payload limit to -z", "tube", c.use.name, "err", err)
		return false
	}
	return true
}

// put reads a job. The order of checks is beanstalkd's: a malformed line
// leaves the body unread (the client's body then arrives as the next
// command), an oversized one skips the body, trailing garbage is caught
// only after the size.
func (c *conn) put(arg string) bool {
	pri, rest, ok1 := readU32(arg)
	delay, rest, ok2 := readU32(rest)
	ttr, rest, ok3 := readU32(rest)
	size, rest, ok4 := readU32(rest)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		c.send(msgBadFormat)
		return true
	}
	c.s.count(opPut)
	if int64(size) > int64(c.s.opts.MaxJobSize) {
		if _, err := io.CopyN(io.Discard, c.r, int64(size)+2); err != nil {
			return false
		}
		c.send(msgJobTooBig)
		return true
	}
	if rest != "" {
		c.send(msgBadFormat)
		return true
	}
	c.producer.Store(true)
	n := int(size) + 2
	if cap(c.body) < n {
		c.body = make([]byte, n)
	}
	body := c.body[:n]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return false
	}
	if body[n-2] != '\r' || body[n-1] != '\n' {
		c.send(msgExpectedCRLF)
		return true
	}
	if c.s.draining.Load() {
		c.send(msgDraining)
		return true
	}
	d, t, zero := seconds(delay, engine.MaxDelay), seconds(max(ttr, 1), engine.MaxTTR), uint32(0)
	req := engine.PutRequest{Payload: body[:n-2], Priority: &pri, TTR: &t, Tries: &zero}
	if d > 0 {
		req.Delay = &d
	}
	if c.r.Buffered() > 0 && int64(size) <= queuedPutMax && len(c.queued) < maxQueuedPuts && c.queuedBytes+int(size) <= maxQueuedBytes {
		// The client pipelines: more commands arrived behind this one.
		// Start the put and read on, so the puts in this read share one
		// loop turn and one fdatasync instead of one each; their answers
		// go out in order (settlePuts) before any other answer.
		req.Payload = append([]byte(nil), req.Payload...)
		c.queued = append(c.queued, c.s.b.PutQueued(c.ctx, c.s.opts.Namespace, c.use.queue, req))
		c.queuedBytes += int(size)
		return true
	}
	c.settlePuts()
	res, err := c.s.b.Put(c.ctx, c.s.opts.Namespace, c.use.queue, req)
	if engine.CodeOf(err) == engine.CodePayloadTooLarge && c.raiseTubeLimit() {
		res, err = c.s.b.Put(c.ctx, c.s.opts.Namespace, c.use.queue, req)
	}
	if cap(c.body) > keepBody {
		c.body = nil // an odd large job should not pin its buffer
	}
	c.answerPut(res, err)
	return true
}

// Bounds of the puts a connection has in flight at once (see put). A put
// larger than the default queue payload limit is never queued: it may need
// the tube's limit raised first (raiseTubeLimit), which a queued put, already
// handed to the loop, cannot wait for.
const (
	maxQueuedPuts  = 256
	maxQueuedBytes = 4 << 20
)

var queuedPutMax = int64(engine.DefaultQueueConfig().MaxPayload)

// settlePuts waits for the queued puts, in the order they were sent, and
// queues their answers.
func (c *conn) settlePuts() {
	if len(c.queued) == 0 {
		return
	}
	q := c.queued
	c.queued, c.queuedBytes = nil, 0 // the answers below must not settle again
	for _, wait := range q {
		c.answerPut(wait())
	}
	clear(q)
	c.queued = q[:0]
}

// answerPut queues the answer to a put.
func (c *conn) answerPut(res engine.PutResult, err error) {
	if err != nil {
		switch engine.CodeOf(err) {
		case engine.CodePayloadTooLarge:
			c.send(msgJobTooBig)
		case engine.CodeUnavailable:
			if c.s.draining.Load() {
				c.send(msgDraining)
			} else {
				// beanstalkd's answer when its log has no room
				c.send(msgOutOfMemory)
			}
		case engine.CodeQueueFull:
			c.send(msgOutOfMemory)
		default:
			// e.g. a namespace whose queues are not created on demand:
			// a put has no NOT_FOUND to answer.
			c.s.lg.Warn("beanstalk: put failed", "tube", c.use.name, "err", err)
			c.send(msgInternalError)
		}
		return
	}
	c.sendNum("INSERTED", res.Seq)
}

// delete removes a job this connection reserved, or any job that is
// ready, delayed or buried; a job reserved by another connection is
// NOT_FOUND.
func (c *conn) delete(seq uint64) {
	ns := c.s.opts.Namespace
	if r := c.held(seq); r != nil {
		_, err := c.s.b.Ack(c.ctx, ns, r.queue, r.id, engine.AckRequest{Receipt: r.receipt})
		if err == nil {
			c.drop(seq)
			c.s.deleted(r.queue)
			c.send(msgDeleted)
			return
		}
		if !notFound(err) {
			c.fail(err)
			return
		}
		// The reservation ran out; the job may now be deletable as ready.
		c.drop(seq)
	}
	j, ok := c.unreserved(ns, seq)
	if !ok {
		return
	}
	if err := c.s.b.Cancel(c.ctx, ns, j.Queue, j.ID, ""); err != nil {
		c.fail(err)
		return
	}
	c.s.deleted(j.Queue)
	c.send(msgDeleted)
}

func (c *conn) release(seq uint64, pri uint32, delay time.Duration) {
	r := c.held(seq)
	if r == nil {
		c.send(msgNotFound)
		return
	}
	st, err := c.s.b.Release(c.ctx, c.s.opts.Namespace, r.queue, r.id, engine.ReleaseRequest{Receipt: r.receipt, Priority: &pri, Delay: delay})
	if c.heldFailed(seq, err) {
		return
	}
	c.drop(seq)
	if st == engine.StateDead {
		// Its tries (set over HTTP) ran out: the job is buried now.
		c.send(msgBuried)
		return
	}
	c.send(msgReleased)
}

func (c *conn) bury(seq uint64, pri uint32) {
	r := c.held(seq)
	if r == nil {
		c.send(msgNotFound)
		return
	}
	err := c.s.b.Bury(c.ctx, c.s.opts.Namespace, r.queue, r.id, engine.BuryRequest{Receipt: r.receipt, Priority: &pri})
	if c.heldFailed(seq, err) {
		return
	}
	c.drop(seq)
	c.send(msgBuried)
}

func (c *conn) touch(seq uint64) {
	r := c.held(seq)
	if r == nil {
		c.send(msgNotFound)
		return
	}
	until, err := c.s.b.Touch(c.ctx, c.s.opts.Namespace, r.queue, r.id, engine.TouchRequest{Receipt: r.receipt})
	if c.heldFailed(seq, err) {
		return
	}
	now := time.Now()
	c.mu.Lock()
	if cur := c.resv[seq]; cur != nil {
		cur.extend(until, now)
		c.unsent = append(c.unsent, cur)
	}
	c.mu.Unlock()
	c.send(msgTouched)
}

func (c *conn) reserveJob(seq uint64) {
	ns := c.s.opts.Namespace
	j, ok := c.unreserved(ns, seq)
	if !ok {
		return
	}
	c.worker.Store(true)
	j, err := c.s.b.ReserveJob(c.ctx, ns, j.Queue, j.ID, nil)
	if err != nil {
		c.fail(err)
		return
	}
	c.reserved(j)
}

func (c *conn) pauseTube(name, q string, d time.Duration) {
	ns := c.s.opts.Namespace
	info, err := c.s.b.PauseFor(c.ctx, ns, q, d)
	if engine.CodeOf(err) == engine.CodeQueueNotFound && (name == "default" || c.s.referenced(name)) {
		// The tube exists for beanstalkd (a connection uses or watches
		// it) but has no queue yet: make one to hold the pause.
		if _, _, err = c.s.b.PutQueue(c.ctx, ns, q, engine.QueuePatch{}); err == nil {
			info, err = c.s.b.PauseFor(c.ctx, ns, q, d)
		}
	}
	if err != nil {
		c.fail(err)
		return
	}
	c.s.mu.Lock()
	t := c.s.tube(name)
	t.pauses++
	t.pauseFor, t.pausedUntil = d, info.PausedUntil
	c.s.mu.Unlock()
	c.send(msgPaused)
}

// held returns this connection's reservation of a job, if any.
func (c *conn) held(seq uint64) *reservation {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resv[seq]
	if r == nil {
		return nil
	}
	cp := *r
	return &cp
}

func (c *conn) drop(seq uint64) {
	c.mu.Lock()
	delete(c.resv, seq)
	c.mu.Unlock()
}

// byID runs the commands whose one argument is a job id.
func (c *conn) byID(o op, id uint64) {
	ns := c.s.opts.Namespace
	switch o {
	case opReserveJob:
		c.reserveJob(id)
	case opDelete:
		c.delete(id)
	case opTouch:
		c.touch(id)
	case opKickJob:
		j, err := c.s.b.JobBySeq(c.ctx, ns, id)
		if err == nil {
			err = c.s.b.KickJob(c.ctx, ns, j.Queue, j.ID)
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.send(msgKicked)
	case opPeekJob, opStatsJob:
		j, err := c.s.b.JobBySeq(c.ctx, ns, id)
		if err != nil || j.State == engine.StateCompleted {
			c.failOr(err, msgNotFound)
			return
		}
		if o == opPeekJob {
			c.sendJob("FOUND", j.Seq, j.Data)
		} else {
			c.sendData(c.s.jobStats(j, time.Now()))
		}
	}
}

// tubeQueue is the queue of a tube named in a command; ok false means the
// name was bad and BAD_FORMAT is answered.
func (c *conn) tubeQueue(tube string) (q string, ok bool) {
	q, ok = queueOf(tube)
	if !validTube(tube) || !ok {
		c.send(msgBadFormat)
		return "", false
	}
	return q, true
}

// sendYAML answers a stats command.
func (c *conn) sendYAML(yaml []byte, err error) {
	if err != nil {
		c.fail(err)
		return
	}
	c.sendData(yaml)
}

// heldFailed answers err of a command on a job this connection holds; a
// job that is gone is no longer held.
func (c *conn) heldFailed(seq uint64, err error) bool {
	if err == nil {
		return false
	}
	if notFound(err) {
		c.drop(seq)
	}
	c.fail(err)
	return true
}

// unreserved finds job seq for a command that needs it not reserved
// (beanstalkd answers NOT_FOUND for a job another connection holds); ok
// false means the answer is sent.
func (c *conn) unreserved(ns string, seq uint64) (engine.Job, bool) {
	j, err := c.s.b.JobBySeq(c.ctx, ns, seq)
	if err != nil {
		c.fail(err)
		return j, false
	}
	if j.State == engine.StateReserved || j.State == engine.StateCompleted {
		c.send(msgNotFound)
		return j, false
	}
	return j, true
}
