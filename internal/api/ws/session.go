package ws

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// This file holds what WebSocket and SSE connections share: identity,
// token expiry, subscriptions and teardown.

// reply queues {"id":N,"result":v}.
func (c *conn) reply(id uint64, v any) {
	c.send(outMsg{kind: kindText, bounded: true, data: marshal(struct {
		ID     uint64 `json:"id"`
		Result any    `json:"result"`
	}{id, v})})
}

// replyPut answers a put with {"id":N,"result":<the put answer>} from the
// goroutine running commands, written by it when the socket is free
// (sendNow). The answer is encoded straight into its frame: one buffer
// per put.
func (c *conn) replyPut(id uint64, r engine.PutResult) {
	b := make([]byte, maxFrameHeader, 192)
	b = appendPutReply(b, id, r)
	c.sendNow(outMsg{kind: kindFrame, bounded: true, data: frameAround(b, maxFrameHeader)})
}

// maxFrameHeader is the room frameAround needs before a message.
const maxFrameHeader = 10

// frameAround makes b[off:], a text message with off bytes of room before
// it, a text frame in place, as appendFrame would encode it.
func frameAround(b []byte, off int) []byte {
	n := len(b) - off
	var hdr [maxFrameHeader]byte
	h := appendFrame(hdr[:0], websocket.TextMessage, nil)
	switch {
	case n <= 125:
		h[1] = byte(n)
	case n <= 0xffff:
		h = append(h[:1], 126, byte(n>>8), byte(n))
	default:
		h = append(h[:1], 127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	start := off - len(h)
	copy(b[start:], h)
	return b[start:]
}

// appendPutReply appends reply's encoding of {"id":N,"result":<r>}.
func appendPutReply(dst []byte, id uint64, r engine.PutResult) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendUint(dst, id, 10)
	dst = append(dst, `,"result":`...)
	dst = wireenc.AppendPut(dst, r)
	return append(dst, '}')
}

// replyError queues {"id":N,"error":{code,message}}.
func (c *conn) replyError(id uint64, err error) {
	ce := errorOf(err)
	if ce.Code == "internal" {
		c.s.log.Error("realtime command failed", "err", err)
	}
	c.send(outMsg{kind: kindText, bounded: true, data: marshal(struct {
		ID    uint64    `json:"id"`
		Error *cmdError `json:"error"`
	}{id, ce})})
}

// push queues a server push ({"job":...}, {"unsubscribed":...}).
func (c *conn) push(v any, bounded bool) bool {
	return c.send(outMsg{kind: kindText, bounded: bounded, data: marshal(v)})
}

// setIdentity installs who the connection is (connect, refresh) and
// schedules the disconnect at the token's expiry.
func (c *conn) setIdentity(id *identity) {
	old := c.id
	c.id = id
	if id.kind != authAdmin {
		c.s.index(c, old, id)
	}
	if id.exp.IsZero() {
		c.exp.Store(0)
		return
	}
	c.exp.Store(expiryNanos(id.exp))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	d := c.untilExpiry()
	if c.expTimer == nil {
		c.expTimer = time.AfterFunc(d, c.checkExpiry)
	} else {
		c.expTimer.Reset(d)
	}
}

// expiryNanos is exp in Unix nanoseconds, clamped to what an int64 holds
// (year 2262): UnixNano of a later exp overflows, and the connection was
// dropped as expired at once, in a loop.
func expiryNanos(exp time.Time) int64 {
	if maxT := time.Unix(0, math.MaxInt64); exp.After(maxT) {
		return math.MaxInt64
	}
	if exp.Before(time.Unix(0, 1)) {
		return 1 // long past (and 0 means "no expiry")
	}
	return exp.UnixNano()
}

func (c *conn) untilExpiry() time.Duration {
	return time.Unix(0, c.exp.Load()).Add(c.s.opts.ExpiryGrace).Sub(c.s.opts.Clock())
}

// checkExpiry runs from the expiry timer. The token may have been
// refreshed since the timer was set, so it decides from the current exp,
// not from the fact that the timer fired.
func (c *conn) checkExpiry() {
	defer c.recoverPanic("expiry", nil)
	if c.exp.Load() == 0 {
		return
	}
	if d := c.untilExpiry(); d > 0 {
		c.mu.Lock()
		if !c.closing {
			c.expTimer.Reset(d)
		}
		c.mu.Unlock()
		return
	}
	c.disconnect(discExpired)
}

type subscribeResult struct {
	Channel   string `json:"channel"`
	Offset    uint64 `json:"offset"`
	Epoch     string `json:"epoch"`
	Recovered *bool  `json:"recovered,omitempty"`
}

// subscribe joins a channel. start queues the answer; the recovered
// publications follow it, then live ones, all through the outbox in that
// order (the hub calls start with the channel locked).
func (c *conn) subscribe(full string, since *uint64, epoch *string, start func(subscribeResult)) error {
	ns, ch, err := splitChannel(c.id, full)
	if err != nil {
		return err
	}
	if err := c.id.canSubscribe(ns, ch); err != nil {
		return err
	}
	key := ns + "/" + ch
	if c.subs[key] != nil {
		return errf("conflict", "already subscribed to %q", key)
	}
	if len(c.subs) >= c.s.opts.MaxSubscriptions {
		return errf("too_many_subscriptions", "at most %d subscriptions per connection", c.s.opts.MaxSubscriptions)
	}
	o := pubsub.SubscribeOptions{Recover: since != nil || epoch != nil}
	if since != nil {
		o.Since = *since
	}
	if epoch != nil {
		o.Epoch = *epoch
	}
	sub, err := c.s.hub.Subscribe(ns, ch, c, o, func(res pubsub.SubscribeResult) {
		r := subscribeResult{Channel: key, Offset: res.Offset, Epoch: res.Epoch}
		if o.Recover {
			r.Recovered = &res.Recovered
		}
		start(r)
		for _, p := range res.Publications {
			c.send(outMsg{kind: kindPub, pub: p})
		}
	})
	if err != nil {
		return badRequest("channel: %v", err)
	}
	if c.subs == nil {
		c.subs = map[string]*pubsub.Subscription{}
	}
	c.subs[key] = sub
	return nil
}

func (c *conn) unsubscribe(key string) {
	if sub := c.subs[key]; sub != nil {
		sub.Unsubscribe()
		delete(c.subs, key)
	}
}

// publish sends data to a channel through the broker (which counts it).
func (c *conn) publish(full string, data []byte) (any, error) {
	ns, ch, err := splitChannel(c.id, full)
	if err != nil {
		return nil, err
	}
	if err := c.id.canPublish(ns, ch); err != nil {
		return nil, err
	}
	off, epoch, err := c.s.b.Publish(context.Background(), ns, ch, data)
	if err != nil {
		return nil, err
	}
	return map[string]any{"offset": off, "epoch": epoch}, nil
}

// teardown releases everything a connection holds, once, after its reader
// (or SSE handler) is done: subscriptions, the consumer (whose pushed,
// unacked jobs are nacked), timers and its place in the server.
func (c *conn) teardown() {
	c.mu.Lock()
	if !c.closing {
		c.closing = true
		clear(c.q)
		c.q = nil
	}
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	if c.expTimer != nil {
		c.expTimer.Stop()
	}
	c.mu.Unlock()
	for key := range c.subs {
		c.unsubscribe(key)
	}
	c.stopConsumer()
	c.s.unregister(c, c.id)
}
