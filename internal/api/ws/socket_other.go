//go:build !unix

package ws

import (
	"errors"
	"net"
	"syscall"
)

// rawConnOf: non-blocking writes and shared read buffers are unix-only
// here; every connection uses its writer goroutine and its own buffer.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func (c *conn) tryWrite([]byte) (int, error) {
	return 0, errors.New("non-blocking writes are not supported on this platform")
}

func (c *conn) readRaw() (int, error) {
	return 0, errors.New("raw reads are not supported on this platform")
}

func (c *conn) releaseRead() {}
