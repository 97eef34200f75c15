//go:build !linux

package farstore

// SyncFiles makes the named bucket files in dir durable, one fsync each.
func SyncFiles(dir string, paths []string) error { return syncEach(paths) }
