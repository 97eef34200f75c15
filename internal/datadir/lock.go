// Package datadir guards a chronoq data directory against being used by
// two server processes at once, which would interleave two WALs' writes.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the name of the lock file inside the data directory.
const LockFile = "LOCK"

// ErrLocked is wrapped by Lock's error when another process holds the lock.
var ErrLocked = errors.New("data directory locked")

// Lock creates dir if missing and takes an exclusive lock on dir/LOCK,
// without waiting. The lock is an flock on an open file, so the kernel
// drops it when the process dies, however it dies; there is no stale lock
// to clean up. The file holds the owner's pid, for the message the next
// process prints.
//
// flock locks belong to the open file description: a second Lock of the
// same dir in the same process fails as well.
func Lock(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("datadir: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("datadir: open %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("data directory %s is in use by another chronoq process (pid %s): %w", dir, readPID(f), ErrLocked)
		}
		return nil, fmt.Errorf("datadir: lock %s: %w", path, err)
	}
	// The pid is informational; failing to record it is not worth refusing
	// to start.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	released := false
	return func() error {
		if released {
			return nil
		}
		released = true
		// Leave the file: removing it would let a process that opened the
		// old inode and one that creates a new file both hold "the" lock.
		uerr := unlock(f)
		cerr := f.Close()
		if uerr != nil {
			return fmt.Errorf("datadir: unlock %s: %w", path, uerr)
		}
		if cerr != nil {
			return fmt.Errorf("datadir: close %s: %w", path, cerr)
		}
		return nil
	}, nil
}

func readPID(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	s := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(s); err != nil {
		return "unknown"
	}
	return s
}
