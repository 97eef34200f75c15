package ws

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// A panic in one connection's goroutine must not end the process: that
// would drop every other connection and stop every queue for one peer's
// bad luck. Each goroutine a connection starts defers recoverPanic, which
// logs the panic with its stack, counts it (Stats.PanicsWS/PanicsSSE,
// chronoq_connection_panics_total) and closes that connection alone.

var errPanicked = errors.New("a connection goroutine panicked")

// recoverPanic must be deferred directly (recover works only there).
// after, if set, runs once a panic was recovered.
func (c *conn) recoverPanic(where string, after func()) {
	r := recover()
	if r == nil {
		return
	}
	proto := "ws"
	if c.sse {
		proto = "sse"
		c.s.panicsSSE.Add(1)
	} else {
		c.s.panicsWS.Add(1)
	}
	c.s.log.Error("realtime connection goroutine panicked; closing that connection",
		"protocol", proto, "goroutine", where, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	c.abort()
	if after != nil {
		after()
	}
}

// abort closes the connection without a goodbye. The lock is only tried:
// a goroutine that panicked while holding it never releases it, and
// closing the socket is what matters, since the reader then fails and
// tears the connection down.
func (c *conn) abort() {
	if c.mu.TryLock() {
		c.closing = true
		clear(c.q)
		c.q = nil
		c.finalLocked()
		c.mu.Unlock()
	}
	if c.nc != nil {
		c.nc.Close()
	}
}
