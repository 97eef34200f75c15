//go:build linux

package wal

import (
	"errors"
	"os"
	"syscall"
)

func fdatasyncFile(f *os.File) error {
	return controlErr(f, func(fd int) error { return syscall.Fdatasync(fd) })
}

func fallocateFile(f *os.File, size int64) error {
	return controlErr(f, func(fd int) error {
		for {
			err := syscall.Fallocate(fd, 0, 0, size)
			if err != syscall.EINTR {
				return err
			}
		}
	})
}

func isNotSupported(err error) bool {
	return errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}

// controlErr runs fn on f's descriptor while holding a reference to it, so
// a concurrent Close cannot hand the number to another file mid-call.
func controlErr(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = fn(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// statfsFree returns the bytes an unprivileged writer may still use on the
// filesystem holding dir.
func statfsFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
