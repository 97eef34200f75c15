package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// RemoveStep is how much RemoveGradually is meant to cut off at a time.
const RemoveStep = 4 << 20

// RemoveGradually deletes the file at path by cutting it down step bytes
// at a time, with an fsync after each cut, and then unlinking it.
//
// On a filesystem mounted with online discard (ext4 -o discard, common on
// cloud disks) unlinking a 64 MiB log segment discards all its blocks in
// the journal commit that follows, and every fdatasync issued meanwhile
// waits behind it: 12 ms at worst against 1.5–2.7 ms cut 4 MiB at a time
// (docs/benchmarks.md, "Housekeeping that stalled fdatasync"). It costs an
// fsync per step, so it is for background removals of large files that
// nothing reads any more: a reader would see the file shrink.
func RemoveGradually(path string, step int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	st, err := f.Stat()
	if err == nil {
		for size := st.Size() - step; size > 0 && err == nil; size -= step {
			if err = f.Truncate(size); err == nil {
				err = f.Sync()
			}
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("remove %s: cutting it down: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
