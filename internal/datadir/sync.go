package datadir

import (
	"fmt"
	"os"
)

// SyncDir makes creations, renames and removals of entries in dir durable:
// a new file's name is on disk only once its directory is synced.
func SyncDir(dir string) error {
	if err := syncPath(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// SyncFile makes the data written to the file at path durable, through a
// descriptor of its own: fsync covers the file whichever descriptor wrote
// it.
func SyncFile(path string) error {
	if err := syncPath(path); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
