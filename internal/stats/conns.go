package stats

import (
	"net"
	"sync"
	"sync/atomic"
)

// CountingListener counts the open connections it accepted, for protocols
// that keep no count of their own that the dashboard could read.
type CountingListener struct {
	net.Listener
	open atomic.Int64
}

// Count wraps ln.
func Count(ln net.Listener) *CountingListener { return &CountingListener{Listener: ln} }

// Open is the number of accepted connections not closed yet.
func (l *CountingListener) Open() int64 { return l.open.Load() }

// Accept counts the connection it returns.
func (l *CountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *CountingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
