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

// zeroFillDirect writes zeros over the file at path with O_DIRECT, whole
// chunks of zeroChunk up to size, and returns how far it got.
func zeroFillDirect(path string, size int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// O_DIRECT wants the buffer aligned to the device's block: an
	// anonymous mapping is page-aligned, and reads as zeros.
	zeros, err := syscall.Mmap(-1, 0, zeroChunk, syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, err
	}
	defer syscall.Munmap(zeros)
	var off int64
	for ; off+zeroChunk <= size; off += zeroChunk {
		if _, err := f.WriteAt(zeros, off); err != nil {
			return off, err
		}
	}
	return off, nil
}
