//go:build unix

package beanstalk

import (
	"net"
	"syscall"
)

// rawConnOf gives the socket's raw connection for non-blocking writes
// (answers.go); nil for connections without one.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// tryWrite writes as much of b as the socket takes without waiting.
func tryWrite(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			k, e := syscall.Write(int(fd), b[n:])
			if e == syscall.EINTR {
				continue
			}
			if k > 0 {
				n += k
			}
			if e != nil {
				if e != syscall.EAGAIN {
					werr = e
				}
				break
			}
			if k <= 0 {
				break
			}
		}
		return true // never wait here: the writer goroutine waits
	})
	if err != nil {
		return n, err
	}
	return n, werr
}
