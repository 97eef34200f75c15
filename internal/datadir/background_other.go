//go:build !linux

package datadir

import (
	"errors"
	"os"
	"unsafe"
)

// Elsewhere only the chunked reads remain.

func noReadAhead(*os.File) error { return nil }

func dropCached(*os.File) error { return nil }

func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
