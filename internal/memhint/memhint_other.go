//go:build !linux

package memhint

// Prepare does nothing where the hints are not implemented.
func Prepare(regions [][]byte, mode Mode, stop <-chan struct{}) {}
