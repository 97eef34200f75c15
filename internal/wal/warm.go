package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Warm reads segment seg through once, so that its pages are in the page
// cache before a reader needs them piece by piece, and runs the segment's
// deferred check (oldcheck.go) if that has not run, which reads it all
// too. Log compaction reads every live payload of the segment it empties,
// frame by frame, on the broker's loop; from a cold segment each of those
// reads waited for the disk, and the first one ran the whole deferred
// check there (turns of 30–95 ms at 100 M jobs, docs/benchmarks.md,
// "Restart with far-future jobs"). It returns the bytes read. A segment
// that is gone reads nothing and is no error.
func (l *Log) Warm(seg uint32) (int64, error) {
	// Under checkMu, so that a check running now (the scrub's, past the
	// page cache) is over before Warm looks: Warm once saw the segment
	// unchecked, waited for that check, found nothing left to do and read
	// nothing, and compaction then read the cold segment on the loop
	// (turns of 30–90 ms after a cold start, docs/benchmarks.md
	// "Compaction's warming raced the scrub").
	l.checkMu.Lock()
	defer l.checkMu.Unlock()
	l.mu.Lock()
	m := l.findSeg(seg)
	if m == nil || l.tableClosed {
		l.mu.Unlock()
		return 0, nil
	}
	unchecked, path := m.unchecked, m.path
	l.mu.Unlock()
	if unchecked {
		return l.checkSegmentLocked(seg, true)
	}
	// In the background's reads (datadir.BackgroundFile): the log's
	// fdatasyncs must not wait behind this one.
	f, err := openBackground(path, true)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: warm segment %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, datadir.BackgroundChunk)
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("wal: warm segment %s: %w", path, err)
		}
	}
}
