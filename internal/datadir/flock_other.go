//go:build !unix

package datadir

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock held")

var errUnsupported = errors.New("file locking is not implemented on this platform")

func tryLock(f *os.File) error { return errUnsupported }

func unlock(f *os.File) error { return nil }
