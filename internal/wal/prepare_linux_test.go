package wal

import (
	"os"
	"syscall"
	"testing"
)

// A prepared segment has every block written, so commits into it never
// convert an unwritten extent (createSegment). Preallocation is switched
// off here so the blocks the file holds can only come from the zeros.
func TestPreparedSegmentIsWritten(t *testing.T) {
	dir := t.TempDir()
	const size = 256 << 10
	noAlloc := func(*os.File, int64) error { return nil }
	l, _, _ := openReplay(t, dir, Options{SegmentSize: size, Preallocate: noAlloc})
	defer l.Close()
	for i := 0; i < 3; i++ { // 100 KiB records: the third rolls to segment 2
		mustAppend(t, l, body(i, 100<<10))
	}
	mustCommit(t, l)
	p := <-l.prepCh // segment 3, prepared in the background
	l.prepCh = make(chan preparedSeg, 1)
	l.prepCh <- p
	if p.err != nil {
		t.Fatal(p.err)
	}
	allocated := func(n uint32) int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(segPath(dir, n), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	// Segment 1 was created on the first append's path and segment 2
	// prepared right after it, before any segment filled: both hold only
	// what was appended. Segment 3 was prepared after segment 1 filled.
	for _, n := range []uint32{1, 2} {
		if got := allocated(n); got >= size {
			t.Fatalf("segment %d holds %d bytes of blocks; it should be sparse", n, got)
		}
	}
	if got := allocated(3); got < size {
		t.Fatalf("prepared segment 3 holds %d bytes of blocks, want all %d written", got, size)
	}
	b, err := os.ReadFile(segPath(dir, 3))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range b[HeaderSize:] {
		if c != 0 {
			t.Fatalf("byte %d of the prepared segment is %#x, want 0", HeaderSize+i, c)
		}
	}
}
