//go:build !linux

package wal

import (
	"errors"
	"os"
)

// Outside Linux there is no fdatasync; fsync is the safe superset.
func fdatasyncFile(f *os.File) error { return f.Sync() }

var errNoFallocate = errors.New("fallocate not supported on this platform")

func fallocateFile(f *os.File, size int64) error { return errNoFallocate }

func isNotSupported(err error) bool { return errors.Is(err, errNoFallocate) }

// zeroFillDirect: no O_DIRECT here; writeZeros writes every chunk itself.
func zeroFillDirect(string, int64) (int64, error) { return 0, errNoDirect }

var errNoDirect = errors.New("O_DIRECT not supported on this platform")
