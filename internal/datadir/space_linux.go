package datadir

import (
	"fmt"
	"syscall"
)

// Space reports the bytes an unprivileged writer may still use on the
// filesystem holding dir, and the filesystem's size.
func Space(dir string) (free, size int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("datadir: free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}
