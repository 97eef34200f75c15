//go:build !unix

package beanstalk

import (
	"errors"
	"net"
	"syscall"
)

// rawConnOf: non-blocking writes are unix-only here; the answers of puts
// go through the connection's writer goroutine (answers.go).
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func tryWrite(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("non-blocking writes are not supported on this platform")
}
