//go:build !linux

package datadir

import "errors"

// Space is not implemented here: callers treat the space as short.
func Space(string) (free, size int64, err error) {
	return 0, 0, errors.New("datadir: free space is not measured on this platform")
}
