// Package memhint asks the operating system to back memory a loader is
// about to fill: a restart copies gigabytes of job records into freshly
// reserved slab memory (internal/engine/snapchunk.go), and taking a page
// fault for every 4 KiB of it on the loading goroutine was the largest
// single cost left in a 100 M-job restart (docs/benchmarks.md). The hints
// never change the bytes of the memory they are given, so they may run on
// another goroutine while the loader writes into it.
package memhint

import (
	"sort"
	"unsafe"
)

// Mode says which hints Prepare gives.
type Mode uint8

const (
	// HugePages marks the memory as wanting transparent huge pages
	// (madvise MADV_HUGEPAGE), so a fault maps 2 MiB at a time where the
	// system's transparent_hugepage setting is "madvise" or "always".
	HugePages Mode = 1 << iota
	// Populate faults the memory in, writable, ahead of use (madvise
	// MADV_POPULATE_WRITE, Linux 5.14 and later).
	Populate
)

// span is one run of contiguous memory, as addresses.
type span struct{ from, to uintptr }

// spans merges regions that touch into runs, in address order.
func spans(regions [][]byte) []span {
	var s []span
	for _, r := range regions {
		if len(r) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
		s = append(s, span{p, p + uintptr(len(r))})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].from < s[j].from })
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && x.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, x.to)
			continue
		}
		out = append(out, x)
	}
	return out
}

// inward rounds a span inward to multiples of align (a power of two); ok
// is false when nothing is left.
func inward(s span, align uintptr) (span, bool) {
	from := (s.from + align - 1) &^ (align - 1)
	to := s.to &^ (align - 1)
	return span{from, to}, from < to
}

// hugePage is the size of a transparent huge page on x86-64 and arm64
// with 4 KiB base pages.
const hugePage = 2 << 20
