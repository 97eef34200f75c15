package farstore

import (
	"fmt"

	"github.com/chronoq/chronoq/internal/datadir"
)

// TakeUnsynced reports whether bytes written to the file (or a cut) may
// not be durable yet, and counts them as synced from now: the caller makes
// them durable off its goroutine (SyncFiles) and calls MarkUnsynced if
// that fails. A snapshot uses it so that syncing a year of buckets does
// not stop the loop (internal/broker/snapshotter.go).
func (f *File) TakeUnsynced() bool {
	d := f.dirty
	f.dirty = false
	return d
}

// MarkUnsynced makes the next Sync or TakeUnsynced count the file as
// written since its last sync.
func (f *File) MarkUnsynced() { f.dirty = true }

// syncManyFiles is the count of files above which SyncFiles syncs the
// file system instead of each file (sync_linux.go).
const syncManyFiles = 64

// syncEach fsyncs each file.
func syncEach(paths []string) error {
	for _, p := range paths {
		if err := datadir.SyncFile(p); err != nil {
			return fmt.Errorf("farstore: %w", err)
		}
	}
	return nil
}
