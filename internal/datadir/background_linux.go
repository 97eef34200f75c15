package datadir

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noReadAhead turns the kernel's read-ahead off for f: each read asks the
// disk for its own pages and no more.
func noReadAhead(f *os.File) error {
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
}

func dropCached(f *os.File) error {
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
