package snapshot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chronoq/chronoq/internal/wal"
)

func TestSnapshotFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snap")
	w, err := Create(dir, wal.Position{Segment: 1, Offset: wal.HeaderSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("item")); err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, info.Path} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v", p, st.Mode().Perm())
		}
	}
}
