package wal

import (
	"os"
	"path/filepath"
	"testing"
)

// Segments hold payloads and token hashes: private to the server's user.
func TestSegmentFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	writeLog(t, dir, Options{SegmentSize: 1024}, []int{300, 300, 300, 300}, 1)
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("log directory mode %v", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) < 2 {
		t.Fatalf("%d segment files", len(entries))
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v", e.Name(), info.Mode().Perm())
		}
	}
}
