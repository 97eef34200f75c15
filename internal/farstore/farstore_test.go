package farstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir string, blocks ...[]string) *File {
	t.Helper()
	f, err := Create(dir, 3600000, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		items := make([][]byte, len(b))
		for i, s := range b {
			items[i] = []byte(s)
		}
		if err := f.Append(items); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return f
}

func readAll(path string, size int64) ([]string, error) {
	var out []string
	err := Read(path, size, func(_ int64, item []byte) error {
		out = append(out, string(item))
		return nil
	})
	return out, err
}

func TestAppendReadAndCutBack(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, []string{"a", "bb"}, []string{"ccc"})
	size := f.Size()
	if err := f.Append([][]byte{[]byte("not covered")}); err != nil {
		t.Fatal(err)
	}
	// the descriptor may be released between writes
	f.Release()
	if err := f.Append([][]byte{[]byte("after release")}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := readAll(f.Path(), -1)
	if err != nil || fmt.Sprint(got) != "[a bb ccc not covered after release]" {
		t.Fatalf("read %v %v", got, err)
	}
	// reopening at a recorded size cuts what lies beyond
	g, err := OpenAt(dir, 3600000, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Append([][]byte{[]byte("d")}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	got, err = readAll(g.Path(), -1)
	if err != nil || fmt.Sprint(got) != "[a bb ccc d]" {
		t.Fatalf("after cut back: %v %v", got, err)
	}
	if starts, _ := List(dir); len(starts) != 1 || starts[0] != (ID{Start: 3600000}) {
		t.Fatalf("list %v", starts)
	}
}

func TestDamageNamesFileAndOffset(t *testing.T) {
	cases := map[string]func(data []byte) []byte{
		"bit flip in a payload": func(d []byte) []byte { d[len(d)-2] ^= 1; return d },
		"torn block":            func(d []byte) []byte { return d[:len(d)-3] },
		"bad header":            func(d []byte) []byte { d[9] ^= 1; return d },
		"block moved": func(d []byte) []byte {
			// the second block, copied over the first: same bytes, wrong offset
			first := HeaderSize + blockHeaderSize + 3 // uvarint(2) "aa"
			return append(d[:HeaderSize:HeaderSize], d[first:]...)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := write(t, dir, []string{"aa"}, []string{"bb"})
			f.Close()
			data, _ := os.ReadFile(f.Path())
			data = damage(data)
			if err := os.WriteFile(f.Path(), data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := readAll(f.Path(), int64(len(data)))
			if name == "torn block" {
				// a recorded size beyond the file is damage too
				_, err = readAll(f.Path(), f.Size())
			}
			var de *DamageError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) || de.File != f.Path() {
				t.Fatalf("read: %v", err)
			}
			t.Log(err)
		})
	}
	if _, err := readAll(filepath.Join(t.TempDir(), Name(1, 0)), -1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestFilterHasNoFalseNegatives(t *testing.T) {
	var f Filter
	for i := uint64(0); i < 10000; i++ {
		f.Add(mix(i))
	}
	fp := 0
	for i := uint64(0); i < 10000; i++ {
		if !f.MayHave(mix(i)) {
			t.Fatalf("key %d added but not found", i)
		}
		if f.MayHave(mix(i + 1<<40)) {
			fp++
		}
	}
	if fp > 500 {
		t.Fatalf("%d false positives in 10000", fp)
	}
	t.Logf("%d false positives in 10000, %d bytes for 10000 keys", fp, f.Bytes())
}

func TestSideRoundTripAndDamage(t *testing.T) {
	dir := t.TempDir()
	s := &Side{Start: 3600000, Size: 1234, Gen: 3, Seed: 99, Jobs: 300, Dead: 7, Queues: []QueueCount{{"default\x00q", 200}, {"default\x00r", 100}}}
	for i := uint64(0); i < 300; i++ {
		s.IDs.Add(Hash(s.Seed, fmt.Sprint("id", i)))
		s.Seqs.Add(HashUint64(s.Seed, i))
	}
	if err := WriteSide(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSide(dir, 3600000)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != 1234 || got.Gen != 3 || got.Seed != 99 || got.Jobs != 300 || got.Dead != 7 || fmt.Sprint(got.Queues) != fmt.Sprint(s.Queues) {
		t.Fatalf("read back %+v", got)
	}
	for i := uint64(0); i < 300; i++ {
		if !got.IDs.MayHave(Hash(99, fmt.Sprint("id", i))) || !got.Seqs.MayHave(HashUint64(99, i)) {
			t.Fatalf("key %d lost", i)
		}
	}
	if got.IDs.Bytes() != s.IDs.Bytes() {
		t.Fatalf("filter of %d bytes read back as %d", s.IDs.Bytes(), got.IDs.Bytes())
	}
	path := filepath.Join(dir, SideName(3600000))
	good, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"torn", good[:len(good)-3]},
		{"bit flip", func() []byte { b := append([]byte(nil), good...); b[40] ^= 1; return b }()},
		{"empty", nil},
	} {
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		var de *DamageError
		if _, err := ReadSide(dir, 3600000); !errors.As(err, &de) || de.File != path {
			t.Fatalf("%s side file: %v", c.name, err)
		}
	}
	// a side file read for another bucket is refused
	if err := os.WriteFile(filepath.Join(dir, SideName(7200000)), good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSide(dir, 7200000); err == nil {
		t.Fatal("side file of bucket 3600000 accepted for 7200000")
	}
	if _, err := ReadSide(dir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing side file: %v", err)
	}
	// Create drops a side file left by an earlier bucket of its start
	if _, err := Create(dir, 7200000, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSide(dir, 7200000); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("side file after Create: %v", err)
	}
}

func TestGenerationsAndRangedRead(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, []string{"a"})
	g, err := Create(dir, 3600000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Append([][]byte{[]byte("b")}); err != nil {
		t.Fatal(err)
	}
	mid := g.Size()
	if err := g.Append([][]byte{[]byte("c"), []byte("d")}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	f.Close()
	ids, err := List(dir)
	slices.SortFunc(ids, func(a, b ID) int { return int(a.Gen) - int(b.Gen) })
	if err != nil || fmt.Sprint(ids) != "[{3600000 0} {3600000 2}]" {
		t.Fatalf("list %v %v", ids, err)
	}
	if g.Path() != filepath.Join(dir, "3600000.2.bkt") || g.Gen() != 2 {
		t.Fatalf("generation 2 at %s", g.Path())
	}
	var got []string
	if err := ReadFrom(g.Path(), mid, -1, func(_ int64, it []byte) error { got = append(got, string(it)); return nil }); err != nil || fmt.Sprint(got) != "[c d]" {
		t.Fatalf("read from %d: %v %v", mid, got, err)
	}
	if err := Remove(dir, 3600000, 2, false); err != nil {
		t.Fatal(err)
	}
	if ids, _ := List(dir); len(ids) != 1 || ids[0].Gen != 0 {
		t.Fatalf("after removing generation 2: %v", ids)
	}
}

// TestSyncFiles: a few files are synced one by one (a missing one is an
// error naming it); many by syncing their file system.
func TestSyncFiles(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range syncManyFiles + 1 {
		f, err := Create(dir, int64(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Append([][]byte{[]byte("item")}); err != nil {
			t.Fatal(err)
		}
		if !f.TakeUnsynced() || f.TakeUnsynced() {
			t.Fatal("TakeUnsynced must report the write once")
		}
		f.Close()
		paths = append(paths, f.Path())
	}
	if err := SyncFiles(dir, paths[:3]); err != nil {
		t.Fatalf("sync of 3 files: %v", err)
	}
	if err := SyncFiles(dir, paths); err != nil {
		t.Fatalf("sync of %d files: %v", len(paths), err)
	}
	gone := filepath.Join(dir, Name(999, 0))
	if err := SyncFiles(dir, []string{paths[0], gone}); err == nil || !strings.Contains(err.Error(), Name(999, 0)) {
		t.Fatalf("sync of a missing file: %v, want an error naming it", err)
	}
}
