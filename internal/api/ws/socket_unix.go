//go:build unix

package ws

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// rawConnOf gives the socket's raw connection for non-blocking writes
// (flusher.go) and for reads into a shared buffer (readRaw); nil for
// sockets without one (TLS).
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
func (c *conn) tryWrite(b []byte) (int, error) {
	var n int
	var werr error
	err := c.raw.Write(func(fd uintptr) bool {
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
		return true // never wait here: flushWS waits
	})
	if err != nil {
		return n, err
	}
	return n, werr
}

// readBufSize is the size of the shared read buffers: a command frame up
// to it arrives in one read(2), where the connection's own 128-byte
// buffer took two for anything past it (a put of a 100-byte payload).
const readBufSize = 4 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// readRaw waits for the socket to be readable and reads what it has into
// a buffer from readBufs, which c.pooled then holds until its bytes are
// consumed (releaseRead). No buffer is held while the connection waits,
// so an idle connection still costs only its own 128 bytes.
func (c *conn) readRaw() (int, error) {
	var n int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		bp := readBufs.Get().(*[]byte)
		for {
			k, e := syscall.Read(int(fd), *bp)
			if e == syscall.EINTR {
				continue
			}
			switch {
			case e == syscall.EAGAIN:
				readBufs.Put(bp)
				return false // wait for the socket, then try again
			case e != nil:
				rerr = &net.OpError{Op: "read", Net: "tcp", Err: e}
			case k == 0:
				rerr = io.EOF
			default:
				c.pooled, n = bp, k
				return true
			}
			readBufs.Put(bp)
			return true
		}
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}

// releaseRead gives the shared read buffer back once its bytes are used.
func (c *conn) releaseRead() {
	if c.pooled != nil {
		readBufs.Put(c.pooled)
		c.pooled = nil
	}
}
