package wal

import (
	"errors"
	"os"
	"syscall"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Indirections that tests replace to inject failures.
var (
	fdatasync   = fdatasyncFile
	preallocate = fallocateFile
	freeSpace   = spaceFree
)

// prealloc and free go through Options.Preallocate / Options.FreeSpace
// when set, so tests outside this package can simulate a full disk.
func (l *Log) prealloc(f *os.File, size int64) error {
	if l.opts.Preallocate != nil {
		return l.opts.Preallocate(f, size)
	}
	return preallocate(f, size)
}

func (l *Log) free() (int64, error) {
	if l.opts.FreeSpace != nil {
		return l.opts.FreeSpace(l.dir)
	}
	return freeSpace(l.dir)
}

// spaceFree returns the bytes an unprivileged writer may still use on the
// filesystem holding dir (unknown where datadir.Space is: the log then
// learns that space is back from the next write that succeeds).
func spaceFree(dir string) (int64, error) {
	free, _, err := datadir.Space(dir)
	return free, err
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// syncPath fdatasyncs a file by name; used for sealed segments whose write
// descriptor is already closed (on Linux any descriptor flushes the inode).
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = fdatasync(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
