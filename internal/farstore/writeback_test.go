package farstore

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteBackPaces: every byte of each range is handed to write-back
// once, at most writebackChunk bytes and writebackFiles files are in
// flight (handed over, not waited for) at any time, everything handed over
// is waited for before WriteBack returns, and every file it opened is
// closed. A file that is gone is skipped.
func TestWriteBackPaces(t *testing.T) {
	dir := t.TempDir()
	var ranges []Range
	for i := range 80 {
		size := int64(HeaderSize + 3000*(i%7+1))
		if i == 5 {
			size = 5*writebackChunk + 123 // one range longer than a chunk
		}
		if err := os.WriteFile(filepath.Join(dir, Name(int64(i)*1000, 1)), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		ranges = append(ranges, Range{Start: int64(i) * 1000, Gen: 1, From: int64(i % 3 * 100), To: size})
	}
	ranges = append(ranges, Range{Start: 999_999, Gen: 1, From: 0, To: 10_000}) // no such file

	type key struct {
		f   *os.File
		off int64
	}
	var mu sync.Mutex
	handed := map[*os.File]int64{} // bytes handed over per file
	flight := map[key]int64{}
	var flightBytes int64
	var files []*os.File
	defer func(f func(*os.File, int64, int64, int64, int64)) { writeBackFn = f }(writeBackFn)
	writeBackFn = func(f *os.File, waitOff, waitN, off, n int64) {
		mu.Lock()
		defer mu.Unlock()
		if waitN > 0 {
			k := key{f, waitOff}
			if flight[k] != waitN {
				t.Errorf("waited for %d bytes at %d, %d were handed over there", waitN, waitOff, flight[k])
			}
			delete(flight, k)
			flightBytes -= waitN
		}
		if n > 0 {
			if _, ok := handed[f]; !ok {
				files = append(files, f)
			}
			handed[f] += n
			flight[key{f, off}] = n
			flightBytes += n
			open := map[*os.File]bool{}
			for k := range flight {
				open[k.f] = true
			}
			if flightBytes > writebackChunk || len(open) > writebackFiles {
				t.Errorf("%d bytes in %d files in flight, want at most %d in %d", flightBytes, len(open), writebackChunk, writebackFiles)
			}
		}
	}
	WriteBack(dir, ranges)
	if len(flight) != 0 {
		t.Fatalf("%d spans handed over and never waited for", len(flight))
	}
	if len(files) != 80 {
		t.Fatalf("%d files handed over, want 80", len(files))
	}
	var want, got int64
	for _, r := range ranges[:80] {
		want += r.To - r.From
	}
	for _, f := range files {
		got += handed[f]
		if f.Fd() != ^uintptr(0) {
			t.Fatalf("%s left open", f.Name())
		}
	}
	if got != want {
		t.Fatalf("%d bytes handed over, want %d", got, want)
	}
}
