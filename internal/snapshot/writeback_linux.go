package snapshot

import (
	"os"

	"golang.org/x/sys/unix"
)

// writeback waits until the kernel has written the bytes [waitOff,
// waitOff+waitN) of f that it was already writing, and starts writing
// [off, off+n) (sync_file_range with WAIT_BEFORE and WRITE). Errors are
// not reported: the kernel records a failed writeback on the file, and
// Commit's fsync returns it.
func writeback(f *os.File, waitOff, waitN, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if waitN > 0 {
			_ = unix.SyncFileRange(int(fd), waitOff, waitN, unix.SYNC_FILE_RANGE_WAIT_BEFORE)
		}
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
