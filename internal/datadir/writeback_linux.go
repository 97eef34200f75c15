package datadir

import (
	"os"

	"golang.org/x/sys/unix"
)

// WriteBack waits until the kernel has written the bytes [waitOff,
// waitOff+waitN) of f that it was already writing, then starts writing
// [off, off+n) (sync_file_range with WAIT_BEFORE and WRITE); either range
// may be empty. Called a chunk at a time, it keeps at most one chunk of a
// file ahead of the log's fdatasyncs in the disk's queue (snapshots,
// far buckets). Errors are not reported: the kernel records a failed
// write-back on the file, and the fsync or syncfs that makes it durable
// returns it.
func WriteBack(f *os.File, waitOff, waitN, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if waitN > 0 {
			_ = unix.SyncFileRange(int(fd), waitOff, waitN, unix.SYNC_FILE_RANGE_WAIT_BEFORE)
		}
		if n > 0 {
			_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
		}
	})
}
