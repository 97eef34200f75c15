package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrFailed is wrapped by every error from a log that hit a write or
	// sync error. It is permanent: after a failed fsync the kernel may have
	// dropped the dirty pages, so retrying could report success for data
	// that is not on disk.
	ErrFailed = errors.New("wal: log failed, no further writes accepted")
	// ErrNoSpace means a new segment could not be preallocated. Nothing was
	// buffered and the log stays usable: the caller may retry later.
	ErrNoSpace = errors.New("wal: no space left on device")
	// ErrClosed is returned by calls on a closed log.
	ErrClosed = errors.New("wal: log closed")
	// ErrSegmentGone is wrapped by ReadAt errors for segments that
	// RemoveSegmentsBefore deleted.
	ErrSegmentGone = errors.New("wal: segment removed")
	// ErrCorrupt is wrapped by errors that report damaged log data.
	ErrCorrupt = errors.New("wal: corrupt log")
)

// CorruptionError describes damage that recovery will not skip on its own.
// It wraps ErrCorrupt.
type CorruptionError struct {
	File   string // path of the damaged (or missing) segment file
	Offset int64  // byte offset of the first bad byte in File
	Reason string
	// From and To bound the positions whose records would be lost by
	// skipping the damage: [From, To).
	From, To Position
	// Frames and Jobs count, best effort, the frames in the damage and the
	// job records in those of them that still decode; -1 when unknown
	// (a missing file, an unreadable header).
	Frames, Jobs int
}

func (e *CorruptionError) Error() string {
	lost := ""
	if e.Frames >= 0 {
		lost = fmt.Sprintf("%d frame(s)", e.Frames)
		if e.Jobs >= 0 {
			lost += fmt.Sprintf(" holding at least %d job record(s)", e.Jobs)
		}
		lost += ", "
	}
	return fmt.Sprintf("wal: corruption in %s at byte offset %d: %s; %srecords from position %v up to %v would be lost (--force-recovery skips them)",
		e.File, e.Offset, e.Reason, lost, e.From, e.To)
}

func (e *CorruptionError) Unwrap() error { return ErrCorrupt }
