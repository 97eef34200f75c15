//go:build !unix

package ws

import (
	"errors"
	"net"
	"syscall"
)

// rawConnOf: non-blocking writes are unix-only here; every connection
// uses its writer goroutine.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func (c *conn) tryWrite([]byte) (int, error) {
	return 0, errors.New("non-blocking writes are not supported on this platform")
}
