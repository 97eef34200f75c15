package memhint

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Prepare gives the hints of mode for regions, in order. It stops early
// when stop is closed (checked between regions), and ignores errors: a
// kernel without MADV_POPULATE_WRITE or with huge pages disabled just
// leaves the loader to fault the memory in itself.
func Prepare(regions [][]byte, mode Mode, stop <-chan struct{}) {
	// the regions' memory must stay allocated while the kernel is told
	// about it by address
	defer runtime.KeepAlive(regions)
	if mode&HugePages != 0 {
		// on the merged runs: a huge page needs 2 MiB of the run aligned
		// to 2 MiB, which one slab chunk alone often does not cover
		for _, s := range spans(regions) {
			if s, ok := inward(s, hugePage); ok {
				madvise(s, unix.MADV_HUGEPAGE)
			}
		}
	}
	if mode&Populate == 0 {
		return
	}
	page := uintptr(unix.Getpagesize())
	for _, r := range regions {
		select {
		case <-stop:
			return
		default:
		}
		for _, s := range spans([][]byte{r}) {
			if s, ok := inward(s, page); ok {
				madvise(s, unix.MADV_POPULATE_WRITE)
			}
		}
	}
}

// madvise is called by address: a run can span several Go allocations,
// which no one slice may.
func madvise(s span, advice int) {
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, s.from, s.to-s.from, uintptr(advice))
}
