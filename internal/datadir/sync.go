package datadir

import (
	"fmt"
	"os"
)

// SyncDir makes creations, renames and removals of entries in dir durable:
// a new file's name is on disk only once its directory is synced.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
