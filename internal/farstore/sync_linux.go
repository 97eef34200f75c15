package farstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// SyncFiles makes the named bucket files in dir durable. Past
// syncManyFiles files one syncfs(2) of dir's file system does it: a year
// of buckets written since the last snapshot is ~17 000 files, and an
// fsync each costs a journal commit each, seconds in all, where the file
// system writes them back in one pass (syncfs reports write-back errors
// since Linux 5.8).
func SyncFiles(dir string, paths []string) error {
	if len(paths) <= syncManyFiles {
		return syncEach(paths)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("farstore: sync: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("farstore: syncfs %s (%d bucket files): %w", dir, len(paths), err)
	}
	return nil
}
