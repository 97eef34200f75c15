package beanstalk

import (
	"fmt"
	"runtime/debug"
)

// A panic in one connection's goroutine must not end the process: every
// other connection and every queue would stop with it. Each goroutine a
// connection starts defers recoverPanic, which logs the panic with its
// stack, counts it (Server.Panics, chronoq_connection_panics_total) and
// closes that connection alone; the deferred close then gives its reserved
// jobs back as on any hang-up.

// recoverPanic must be deferred directly (recover works only there).
func (c *conn) recoverPanic(where string) {
	r := recover()
	if r == nil {
		return
	}
	c.s.panics.Add(1)
	c.s.lg.Error("beanstalkd connection goroutine panicked; closing that connection",
		"goroutine", where, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	_ = c.nc.Close()
}

// Panics is the number of connections closed after a panic.
func (s *Server) Panics() int64 { return s.panics.Load() }
