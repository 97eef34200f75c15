package wal

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Warm is there to leave a segment in the page cache for compaction's
// reads on the loop, so it reads through the cache, with or without the
// deferred check; the scrub's check (CheckSegment) reads a segment once and
// goes past the cache where the filesystem allows it
// (internal/datadir/background.go).
func TestWarmCachesAndTheCheckDoesNot(t *testing.T) {
	dir, l := uncheckedLog(t, 3)
	for _, c := range []struct {
		name   string
		seg    uint32
		run    func(uint32) (int64, error)
		cached bool
	}{
		{"warm, unchecked", 1, l.Warm, true},
		{"warm, checked", 1, l.Warm, true},
		{"check", 2, l.CheckSegment, false},
	} {
		evict(t, segPath(dir, c.seg))
		if n, err := c.run(c.seg); err != nil || n == 0 {
			t.Fatalf("%s of segment %d: %d bytes, %v", c.name, c.seg, n, err)
		}
		if got := residentShare(t, segPath(dir, c.seg)); c.cached && got < 0.9 || !c.cached && got > 0.1 {
			t.Errorf("%s of segment %d left %.0f%% of it in the page cache", c.name, c.seg, got*100)
		}
	}
}

// uncheckedLog makes a log of at least n 64 KiB segments and reopens it
// from its last segment, so the others wait for their deferred check. It
// skips the test where the filesystem refuses O_DIRECT.
func uncheckedLog(t *testing.T, n int) (string, *Log) {
	t.Helper()
	dir := t.TempDir()
	if f, err := os.OpenFile(dir+"/probe", os.O_CREATE|os.O_RDONLY|syscall.O_DIRECT, 0o600); err != nil {
		t.Skipf("no O_DIRECT on this filesystem (%v): nothing is read past the cache", err)
	} else {
		f.Close()
	}
	opts := Options{SegmentSize: 64 << 10}
	l, _, _ := openReplay(t, dir, opts)
	for i := 0; i < 130*(n+1); i++ { // ~125 bodies of 500 bytes a segment
		mustAppend(t, l, body(i, 500))
		mustCommit(t, l)
	}
	l.Close()
	l = mustOpen(t, dir, opts)
	t.Cleanup(func() { l.Close() })
	segs := l.Segments()
	last := segs[len(segs)-1].Number
	if _, _, err := replayAll(t, l, Position{Segment: last, Offset: HeaderSize}); err != nil {
		t.Fatal(err)
	}
	if len(l.Unchecked()) < n {
		t.Fatalf("fixture: unchecked %v, want %d or more", l.Unchecked(), n)
	}
	return dir, l
}

func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if got := residentShare(t, path); got > 0.1 {
		t.Skipf("the page cache keeps %s (%.0f%%) after FADV_DONTNEED", path, got*100)
	}
}

// residentShare is the share of the file's pages in the page cache.
func residentShare(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec))
}

// TestWarmRacingTheCheckStillCaches: compaction warms the segment it is
// about to empty while the scrub may be checking that very segment past
// the cache. Whichever gets there first, the segment ends up in the page
// cache: Warm once saw it unchecked, waited for the scrub's check, then
// found nothing to do and read nothing.
func TestWarmRacingTheCheckStillCaches(t *testing.T) {
	dir, l := uncheckedLog(t, 16)
	unchecked := l.Unchecked()
	for _, seg := range unchecked {
		evict(t, segPath(dir, seg))
		checked := make(chan error, 1)
		go func() {
			_, err := l.CheckSegment(seg)
			checked <- err
		}()
		// Warm while the check runs, when the poll sees it running
		for len(checked) == 0 && l.checkMu.TryLock() {
			l.checkMu.Unlock()
			runtime.Gosched()
		}
		if _, err := l.Warm(seg); err != nil {
			t.Fatal(err)
		}
		if err := <-checked; err != nil {
			t.Fatal(err)
		}
		if got := residentShare(t, segPath(dir, seg)); got < 0.9 {
			t.Fatalf("segment %d warmed while the scrub checked it: %.0f%% of it in the page cache", seg, got*100)
		}
	}
}
