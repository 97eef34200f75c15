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
//
// Before the syncfs, the files' dirty bytes are handed to the disk a
// writebackChunk at a time, waiting for one before the next (pacer):
// left to syncfs, hundreds of MB of buckets a far drain wrote went to the
// disk at once, and the log's fdatasyncs waited behind them (bench/syncstall
// syncfs: max 30–126 ms against 5–11 ms paced, docs/benchmarks.md
// "Background reads in small pieces"). The syncfs then finds only the
// metadata left.
func SyncFiles(dir string, paths []string) error {
	if len(paths) <= syncManyFiles {
		return syncEach(paths)
	}
	var p pacer
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			p.add(path, 0, st.Size())
		}
	}
	p.wait(nil)
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
