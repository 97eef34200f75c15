package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveGradually(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{0, 100, RemoveStep, 3*RemoveStep + 12345} {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := RemoveGradually(path, RemoveStep); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("size %d: the file is still there: %v", size, err)
		}
	}
	if err := RemoveGradually(filepath.Join(dir, "missing"), RemoveStep); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
}
