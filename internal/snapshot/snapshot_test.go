package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/wal"
)

func item(i, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(i), uint64(n)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	copy(b, fmt.Sprintf("item-%d-", i))
	return b
}

func write(t *testing.T, dir string, pos wal.Position, items [][]byte) Info {
	t.Helper()
	w, err := Create(dir, pos)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := w.Add(it); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readAll(t *testing.T, path string) [][]byte {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(it))
	}
	if uint64(len(out)) != r.Items() {
		t.Fatalf("read %d items, Items() = %d", len(out), r.Items())
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 1))
	var items [][]byte
	for i := 0; i < 20000; i++ {
		n := r.IntN(200)
		switch i {
		case 100:
			n = BlockSize + 12345 // larger than a block
		case 101:
			n = 3 * BlockSize
		case 5000:
			n = BlockSize - 1
		}
		items = append(items, item(i, n))
	}
	pos := wal.Position{Segment: 7, Offset: 123456}
	info := write(t, dir, pos, items)
	if info.Pos != pos || info.Items != uint64(len(items)) || info.Path != filepath.Join(dir, "0000000007-0000123456.snap") {
		t.Fatalf("info %+v", info)
	}
	if st, _ := os.Stat(info.Path); st.Size() != info.Size {
		t.Fatalf("size %d, info says %d", st.Size(), info.Size)
	}
	got := readAll(t, info.Path)
	if len(got) != len(items) {
		t.Fatalf("%d items, want %d", len(got), len(items))
	}
	for i := range items {
		if !bytes.Equal(got[i], items[i]) {
			t.Fatalf("item %d differs", i)
		}
	}
	rd, _ := Open(info.Path)
	if rd.Pos() != pos {
		t.Fatalf("Pos %v", rd.Pos())
	}
	rd.Close()
	if _, err := rd.Next(); err == nil {
		t.Fatal("Next after Close")
	}

	// Empty snapshot.
	info = write(t, dir, wal.Position{Segment: 1, Offset: 64}, nil)
	if got := readAll(t, info.Path); len(got) != 0 {
		t.Fatalf("empty snapshot has %d items", len(got))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*tmp*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func smallSnapshot(t *testing.T) (string, []byte) {
	dir := t.TempDir()
	var items [][]byte
	for i := 0; i < 40; i++ {
		items = append(items, item(i, i*3))
	}
	info := write(t, dir, wal.Position{Segment: 3, Offset: 999}, items)
	data, err := os.ReadFile(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Path, data
}

func TestBitFlipsAreDetected(t *testing.T) {
	path, orig := smallSnapshot(t)
	r := rand.New(rand.NewPCG(9, 9))
	for off := 0; off < len(orig); off++ {
		data := bytes.Clone(orig)
		data[off] ^= 1 << r.IntN(8)
		os.WriteFile(path, data, 0o644)
		rd, err := Open(path)
		if err == nil {
			rd.Close()
			t.Fatalf("flip at offset %d of %d not detected", off, len(orig))
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("flip at %d: unclear error %v", off, err)
		}
	}
}

func TestTruncationIsDetected(t *testing.T) {
	path, orig := smallSnapshot(t)
	for n := 0; n < len(orig); n++ {
		os.WriteFile(path, orig[:n], 0o644)
		if rd, err := Open(path); err == nil {
			rd.Close()
			t.Fatalf("truncation to %d bytes not detected", n)
		}
	}
	// Extra bytes are damage too.
	os.WriteFile(path, append(bytes.Clone(orig), 0), 0o644)
	if _, err := Open(path); err == nil {
		t.Fatal("appended byte not detected")
	}
}

func TestNameMustMatchFooter(t *testing.T) {
	path, orig := smallSnapshot(t)
	other := filepath.Join(filepath.Dir(path), Name(wal.Position{Segment: 4, Offset: 1}))
	os.WriteFile(other, orig, 0o644)
	if _, err := Open(other); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("renamed snapshot opened: %v", err)
	}
}

func TestListPruneAndTemps(t *testing.T) {
	dir := t.TempDir()
	positions := []wal.Position{pos(1, 64), pos(3, 100), pos(2, 5000), pos(10, 64), pos(3, 99)}
	for i, p := range positions {
		write(t, dir, p, [][]byte{item(i, 10)})
	}
	// A writer still running in this process, a stale temp from a crash,
	// a damaged snapshot and an unrelated file.
	live, err := Create(dir, wal.Position{Segment: 11, Offset: 64})
	if err != nil {
		t.Fatal(err)
	}
	live.Add([]byte("in progress"))
	stale := filepath.Join(dir, Name(wal.Position{Segment: 9, Offset: 64})+".tmp-12345")
	os.WriteFile(stale, []byte("partial"), 0o644)
	damaged := filepath.Join(dir, Name(wal.Position{Segment: 12, Offset: 64}))
	os.WriteFile(damaged, []byte("not a snapshot at all, far too short"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644)

	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []wal.Position{pos(10, 64), pos(3, 100), pos(3, 99), pos(2, 5000), pos(1, 64)}
	if len(infos) != len(want) {
		t.Fatalf("List: %+v", infos)
	}
	for i := range want {
		if infos[i].Pos != want[i] || infos[i].Items != 1 {
			t.Fatalf("List[%d] = %+v, want %v", i, infos[i], want[i])
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("stale temp file not removed")
	}
	if _, err := os.Stat(live.tmp); err != nil {
		t.Fatalf("List removed a running writer's file: %v", err)
	}
	if _, err := live.Commit(); err != nil {
		t.Fatal(err)
	}

	if err := Prune(dir, 2); err != nil {
		t.Fatal(err)
	}
	infos, _ = List(dir)
	if len(infos) != 2 || infos[0].Pos != pos(11, 64) || infos[1].Pos != pos(10, 64) {
		t.Fatalf("after Prune: %+v", infos)
	}
	// The damaged file is newer than the kept ones: left for inspection.
	if _, err := os.Stat(damaged); err != nil {
		t.Fatal("Prune removed a newer damaged file")
	}
	if err := Prune(dir, 0); err == nil {
		t.Fatal("Prune(0) accepted")
	}
	if infos, err := List(filepath.Join(dir, "missing")); err != nil || len(infos) != 0 {
		t.Fatalf("List of a missing dir: %v %v", infos, err)
	}
}

// TestRetireThenRemove: Retire takes the old snapshots out of List's sight
// at once and leaves the files for RemoveRetired; retired files a crash
// left behind go with RemoveLeftovers.
func TestRetireThenRemove(t *testing.T) {
	dir := t.TempDir()
	for i, p := range []wal.Position{pos(1, 64), pos(2, 64), pos(3, 64)} {
		write(t, dir, p, [][]byte{item(i, 10)})
	}
	retired, err := Retire(dir, 2)
	if err != nil || len(retired) != 1 {
		t.Fatalf("Retire: %v %v", retired, err)
	}
	if infos, _ := List(dir); len(infos) != 2 || infos[1].Pos != pos(2, 64) {
		t.Fatalf("List after Retire: %+v", infos)
	}
	if _, err := os.Stat(retired[0]); err != nil {
		t.Fatalf("the retired file is already gone: %v", err)
	}
	if err := RemoveRetired(retired); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(retired[0]); !os.IsNotExist(err) {
		t.Fatalf("retired file still there: %v", err)
	}
	left := filepath.Join(dir, Name(pos(0, 64))+retiredSuffix)
	if err := os.WriteFile(left, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveLeftovers(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover still there: %v", err)
	}
}

func TestAbort(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, wal.Position{Segment: 1, Offset: 64})
	if err != nil {
		t.Fatal(err)
	}
	w.Add(bytes.Repeat([]byte("x"), BlockSize*2))
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Abort left %v", entries)
	}
	if err := w.Add([]byte("x")); err == nil {
		t.Fatal("Add after Abort")
	}
	if _, err := w.Commit(); err == nil {
		t.Fatal("Commit after Abort")
	}
}

func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	w, _ := Create(dir, wal.Position{Segment: 2, Offset: 64})
	for i := 0; i < 5; i++ {
		w.Add(item(i, i*7))
	}
	info, _ := w.Commit()
	seed, _ := os.ReadFile(info.Path)
	f.Add(seed)
	f.Add([]byte{})
	f.Add(seed[len(seed)-footerSize:])
	path := filepath.Join(dir, "fuzz.snap")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			return
		}
		defer r.Close()
		var n uint64
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Next failed after Open verified the file: %v", err)
			}
			n++
		}
		if n != r.Items() {
			t.Fatalf("read %d items, footer says %d", n, r.Items())
		}
	})
}

func pos(seg, off uint32) wal.Position { return wal.Position{Segment: seg, Offset: off} }

// streamAll reads a snapshot through OpenStream: the items, or the first
// error.
func streamAll(path string) ([][]byte, error) {
	r, err := OpenStream(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out [][]byte
	for {
		it, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(it))
	}
}

// OpenStream reads what Open reads, and every damage Open refuses up
// front fails it by the end of the file, naming the file.
func TestOpenStreamChecksAsItReads(t *testing.T) {
	path, orig := smallSnapshot(t)
	got, err := streamAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := readAll(t, path); len(got) != len(want) {
		t.Fatalf("stream read %d items, Open read %d", len(got), len(want))
	}
	r := rand.New(rand.NewPCG(9, 10))
	for off := 0; off < len(orig); off++ {
		data := bytes.Clone(orig)
		data[off] ^= 1 << r.IntN(8)
		os.WriteFile(path, data, 0o644)
		if _, err := streamAll(path); err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("flip at offset %d of %d: %v", off, len(orig), err)
		}
	}
	for n := 0; n < len(orig); n++ {
		os.WriteFile(path, orig[:n], 0o644)
		if _, err := streamAll(path); err == nil {
			t.Fatalf("truncation to %d bytes not detected", n)
		}
	}
	os.WriteFile(path, append(bytes.Clone(orig), 0), 0o644)
	if _, err := streamAll(path); err == nil {
		t.Fatal("appended byte not detected")
	}
}

// After FreshBlocks, an item Next returned stays as it was while later
// blocks are read (the restart hands items to another goroutine without
// copying them); without it the reader reuses one buffer.
func TestFreshBlocksKeepItems(t *testing.T) {
	dir := t.TempDir()
	var items [][]byte
	for i := 0; i < 40; i++ {
		items = append(items, item(i, BlockSize/3))
	}
	info := write(t, dir, wal.Position{Segment: 1}, items)
	for _, open := range []func(string) (*Reader, error){Open, OpenStream} {
		r, err := open(info.Path)
		if err != nil {
			t.Fatal(err)
		}
		r.FreshBlocks(nil)
		var got [][]byte
		for {
			it, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, it)
		}
		r.Close()
		if len(got) != len(items) {
			t.Fatalf("%d items, want %d", len(got), len(items))
		}
		for i := range items {
			if !bytes.Equal(got[i], items[i]) {
				t.Fatalf("item %d changed after later blocks were read", i)
			}
		}
	}
}

// A snapshot larger than a few writeback chunks is handed to the kernel's
// writeback as it is written (writeback.go) and still reads back item for
// item.
func TestWritebackAsWritten(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, wal.Position{Segment: 1, Offset: 64})
	if err != nil {
		t.Fatal(err)
	}
	var items [][]byte
	for i := 0; int64(len(items))*64<<10 < 3*writebackChunk+1<<20; i++ {
		it := item(i, 64<<10)
		items = append(items, it)
		if err := w.Add(it); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	// Commit waited for the writeback goroutine: every whole chunk
	if w.wb.handed != w.written/writebackChunk*writebackChunk || w.wb.handed < 3*writebackChunk {
		t.Fatalf("handed to writeback up to %d of %d written", w.wb.handed, w.written)
	}
	if got := readAll(t, info.Path); !slices.EqualFunc(got, items, bytes.Equal) {
		t.Fatalf("read %d items back, wrote %d, or some differ", len(got), len(items))
	}
}

// Abort stops the handing over before it closes the file.
func TestWritebackStopsOnAbort(t *testing.T) {
	w, err := Create(t.TempDir(), wal.Position{Segment: 1, Offset: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*writebackChunk/(64<<10); i++ {
		if err := w.Add(item(i, 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.wb.done:
	default:
		t.Fatal("the writeback goroutine still runs after Abort")
	}
}
