package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Log segments and snapshots hold job payloads and token hashes, so a data
// directory is private to the user the server runs as.
const (
	DirMode  fs.FileMode = 0o700 // the data directory and its wal/ and snap/ folders
	FileMode fs.FileMode = 0o600 // segments, snapshots, LOCK
)

// Subdirs are the folders of a data directory that hold data files.
var Subdirs = []string{"wal", "snap"}

// Restrict takes group and other permissions away from a data directory
// made by an older version (which created folders 0755 and files 0644):
// dir itself, its Subdirs and the regular files directly inside them. New
// files are created private already. It returns how many entries it changed;
// an entry it cannot change (another owner) is reported in the error, and
// the rest are still handled. Symlinks are left alone: chmod would follow
// them out of the directory.
func Restrict(dir string) (changed int, err error) {
	var errs []error
	fix := func(path string, want fs.FileMode) {
		st, err := os.Lstat(path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return
		}
		if st.Mode()&fs.ModeSymlink != 0 || (!st.IsDir() && !st.Mode().IsRegular()) {
			return
		}
		perm := st.Mode().Perm()
		if perm&^want == 0 {
			return
		}
		if err := os.Chmod(path, perm&want); err != nil {
			errs = append(errs, fmt.Errorf("datadir: restrict permissions of %s: %w", path, err))
			return
		}
		changed++
	}
	fix(dir, DirMode)
	fix(filepath.Join(dir, LockFile), FileMode)
	for _, sub := range Subdirs {
		p := filepath.Join(dir, sub)
		fix(p, DirMode)
		entries, err := os.ReadDir(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("datadir: list %s: %w", p, err))
			}
			continue
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				fix(filepath.Join(p, e.Name()), FileMode)
			}
		}
	}
	return changed, errors.Join(errs...)
}
