package ws

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		writeError(w, http.StatusBadRequest, "bad_request", "this endpoint speaks WebSocket: send an Upgrade request")
		return
	}
	if !s.originAllowed(w, r) || !s.admit(w) {
		return
	}
	wsc, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.active.Add(-1) // the upgrader has answered
		return
	}
	// Only the socket is kept: frames are read (frames.go) and written
	// (conn.go) here, so gorilla's Conn and its buffers, needed for the
	// handshake alone, are garbage from now on.
	c := &conn{s: s, nc: wsc.NetConn()}
	c.raw = rawConnOf(c.nc)
	c.lastRead.Store(time.Now().UnixNano())
	c.nc.SetReadDeadline(time.Now().Add(s.opts.ConnectTimeout))
	s.register(c)
	if s.closed.Load() {
		c.disconnect(discShutdown)
	}
	// A fresh goroutine rather than this handler's: the handler's stack
	// has grown through net/http's serving path, and an idle connection
	// would keep that stack for its whole life.
	go c.readLoop()
}

// readLoop reads frames and hands complete commands to process. It does
// nothing else, so that its stack never grows past Go's 2 KB minimum: a
// goroutine's stack, once grown, shrinks back only if under a quarter of
// it is in use, which a goroutine blocked in a socket read never is. This
// one goroutine per idle connection is most of what a connection costs.
func (c *conn) readLoop() {
	defer c.recoverPanic("reader", nil)
	err := c.readAll()
	c.releaseRead()
	c.endRead(err)
}

// readAll reads until the connection fails. Until connect has succeeded
// the reader waits for each command to be processed before reading the
// next frame, so the pre-connect limit on message size (frames.go) also
// covers commands a client pipelines behind its connect; their bytes wait
// in the socket (or the shared read buffer, up to 4 KiB) meanwhile.
func (c *conn) readAll() (err error) {
	defer c.recoverPanic("reader", func() { err = errPanicked })
	for {
		var msg []byte
		if msg, err = c.readMessage(); err != nil {
			return err
		}
		c.queueInbound(msg)
		if !c.connected.Load() {
			c.proc.Wait()
		}
	}
}

const maxInbox = 64

// queueInbound passes a command to the processor, starting it if needed.
// A client that sends faster than its commands complete makes the reader
// wait here, which stops reading and pushes back through TCP.
func (c *conn) queueInbound(msg []byte) {
	c.mu.Lock()
	for len(c.inbox) >= maxInbox && !c.closing {
		if c.room == nil {
			c.room = make(chan struct{}, 1)
		}
		room := c.room
		c.mu.Unlock()
		<-room
		c.mu.Lock()
	}
	if msg == nil {
		msg = []byte{} // a binary frame: process refuses it
	}
	c.inbox = append(c.inbox, msg)
	if !c.processing {
		c.processing = true
		c.proc.Add(1)
		go c.process()
	}
	c.mu.Unlock()
}

// process runs queued commands in order; like the WebSocket writer it
// exists only while there is work.
func (c *conn) process() {
	defer c.proc.Done()
	defer c.recoverPanic("commands", nil)
	var batch [][]byte
	for {
		c.mu.Lock()
		batch = append(batch[:0], c.inbox...)
		clear(c.inbox)
		c.inbox = c.inbox[:0]
		if len(batch) == 0 {
			c.processing = false
			c.inbox = nil
			c.mu.Unlock()
			return
		}
		if c.room != nil {
			select {
			case c.room <- struct{}{}:
			default:
			}
		}
		c.mu.Unlock()
		for i, msg := range batch {
			batch[i] = nil
			if c.isClosing() {
				continue // draining until the client answers our close frame
			}
			if len(msg) == 0 {
				c.settlePuts()
				c.fail(0, badRequest("commands are JSON text frames"))
				continue
			}
			c.handle(msg, i < len(batch)-1)
		}
		c.settlePuts()
	}
}

// endRead runs when reading is over: wait for the command in progress,
// release everything, let the final frames out, close the socket.
func (c *conn) endRead(err error) {
	c.readFailed(err)
	c.proc.Wait()
	c.teardown()
	c.mu.Lock()
	final := c.final
	c.mu.Unlock()
	if final != nil {
		select {
		case <-final:
		case <-time.After(c.s.opts.WriteTimeout):
		}
	}
	c.nc.Close()
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *conn) readFailed(err error) {
	var ne net.Error
	if !c.connected.Load() && errors.As(err, &ne) && ne.Timeout() {
		c.disconnect(discConnectTimeout)
		return
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		c.mu.Lock()
		c.closeLocked(pe.reason, false)
		c.mu.Unlock()
		return
	}
	// Anything else (the peer went away or answered our close) leaves
	// nothing to say.
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		clear(c.q)
		c.q = nil
	}
	c.mu.Unlock()
}

// fail answers a command that cannot be processed and ends the
// connection: a client that sends malformed frames is broken, and
// reconnecting would not fix it.
func (c *conn) fail(id uint64, err error) {
	c.replyError(id, err)
	c.disconnect(discBadRequest)
}

func (c *conn) startPing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pingTimer == nil && !c.closing {
		c.pingTimer = time.AfterFunc(c.s.opts.PingInterval, c.ping)
	}
}

// ping runs every PingInterval. It is also the dead-peer check: a
// connection that sent nothing, not even a pong, for PingInterval +
// PongTimeout is closed (the reader then fails and cleans up). Checking
// here instead of with read deadlines keeps the reader's path shallow.
func (c *conn) ping() {
	defer c.recoverPanic("ping", nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	if time.Since(time.Unix(0, c.lastRead.Load())) > c.s.opts.PingInterval+c.s.opts.PongTimeout {
		c.nc.Close()
		return
	}
	c.q = append(c.q, outMsg{kind: kindPing})
	c.kickLocked()
	c.pingTimer.Reset(c.s.opts.PingInterval)
}

// handle runs one command; more says another follows it in this batch.
// Commands that change the connection's state (connect, subscribe,
// publish, put, ...) run here, in order, so a client may pipeline them and
// rely on their order; ack, nack, touch and bury run concurrently
// (bounded by MaxInflight), because a worker acks many jobs and each ack
// waits for a disk sync. Puts followed by more commands are only handed to
// the broker here and answered, in order, by settlePuts.
func (c *conn) handle(frame []byte, more bool) {
	cmd, err := decodeCommand(frame)
	if err != nil || cmd.Op != "put" {
		c.settlePuts() // answers go out in the order of the commands
	}
	if err != nil {
		if cmd.ID == 0 {
			c.fail(0, err)
		} else {
			c.replyError(cmd.ID, err)
		}
		return
	}
	if c.id == nil && cmd.Op != "connect" {
		c.fail(cmd.ID, errf("not_connected", "send connect first"))
		return
	}
	switch cmd.Op {
	case "connect":
		c.connect(cmd)
	case "subscribe":
		var b subscribeBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		err := c.subscribe(b.Channel, b.Since, b.Epoch, func(r subscribeResult) { c.reply(cmd.ID, r) })
		if err != nil {
			c.replyError(cmd.ID, err)
		}
	case "unsubscribe":
		var b channelBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		ns, ch, err := splitChannel(c.id, b.Channel)
		if err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		c.unsubscribe(ns + "/" + ch)
		c.reply(cmd.ID, struct{}{})
	case "publish":
		var b publishBody
		if err := decodeBody(cmd.Body, &b); err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		data, err := compactJSON("data", b.Data, c.s.opts.MaxPayload)
		if err != nil {
			c.replyError(cmd.ID, err)
			return
		}
		c.answer(cmd.ID)(c.publish(b.Channel, data))
	case "refresh":
		c.refresh(cmd)
	default:
		c.queueCommand(cmd, more)
	}
}

// answer returns a function that replies with a result or an error.
func (c *conn) answer(id uint64) func(any, error) {
	return func(v any, err error) {
		if err != nil {
			c.replyError(id, err)
			return
		}
		c.reply(id, v)
	}
}

func (c *conn) connect(cmd command) {
	if c.id != nil {
		c.replyError(cmd.ID, errf("conflict", "already connected; use refresh to change the token"))
		return
	}
	var b connectBody
	if err := decodeBody(cmd.Body, &b); err != nil {
		c.fail(cmd.ID, err)
		return
	}
	id, err := c.s.authenticate(b.Token)
	if err != nil {
		c.replyError(cmd.ID, err)
		if errorOf(err).Code == "token_expired" {
			c.disconnect(discExpired)
		} else {
			c.disconnect(discUnauthorized)
		}
		return
	}
	c.setIdentity(id)
	c.connected.Store(true)
	c.nc.SetReadDeadline(time.Time{}) // from now on ping decides who is dead
	c.startPing()
	c.reply(cmd.ID, connectResult(id, c.s.opts.PingInterval))
}

func connectResult(id *identity, ping time.Duration) any {
	type result struct {
		Namespace    string `json:"namespace,omitempty"`
		User         string `json:"user,omitempty"`
		Expires      string `json:"expires,omitempty"`
		PingInterval string `json:"ping_interval"`
	}
	r := result{Namespace: id.ns, User: id.user, PingInterval: ping.String()}
	if !id.exp.IsZero() {
		r.Expires = id.exp.UTC().Format(timeLayout)
	}
	return r
}

const timeLayout = "2006-01-02T15:04:05.000Z"

// refresh swaps the connection's JWT for a newer one of the same user and
// namespace. The new token's rights apply at once: subscriptions it no
// longer allows are dropped, each with an {"unsubscribed"} push.
func (c *conn) refresh(cmd command) {
	var b refreshBody
	if err := decodeBody(cmd.Body, &b); err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	if c.id.kind != authJWT {
		c.replyError(cmd.ID, errf("bad_request", "refresh is for JWT connections; this one's token does not expire"))
		return
	}
	id, err := c.s.authenticate(b.Token)
	if err != nil {
		c.replyError(cmd.ID, err)
		return
	}
	if id.kind != authJWT || id.user != c.id.user || id.ns != c.id.ns {
		c.replyError(cmd.ID, errf("forbidden", "refresh needs a JWT of the same user and namespace"))
		return
	}
	c.setIdentity(id)
	for key := range c.subs {
		ns, ch, _ := splitChannel(id, key)
		if err := id.canSubscribe(ns, ch); err != nil {
			c.unsubscribe(key)
			c.push(map[string]any{"unsubscribed": map[string]string{"channel": key, "reason": "forbidden"}}, true)
		}
	}
	c.reply(cmd.ID, connectResult(id, c.s.opts.PingInterval))
}
