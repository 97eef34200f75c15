package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Segments before the replay start are not read at Replay (replay.go,
// noteUnreplayed): a snapshot covers their records, and reading and
// checking all of them made start-up time grow with the log. They are
// checked later, one at a time, by whichever comes first:
//
//   - CheckSegment, which the caller runs in the background after start
//     (the broker's scrub, internal/broker/scrub.go), or
//   - the first payload read from the segment (readChecked), which needs
//     the marks the check finds.
//
// Either way the check is the one Replay used to run: every frame's CRC,
// and each bad region reported through Options.OnCheckDamage and logged.
// A payload read still checks its own frame, so no damaged byte is ever
// served whether or not its segment was checked yet.

// Unchecked lists the segments whose deferred check has not run, oldest
// first.
func (l *Log) Unchecked() []uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint32
	for _, m := range l.segs {
		if m.unchecked {
			out = append(out, m.num)
		}
	}
	return out
}

// CheckSegment runs the deferred check of segment num (see above) unless
// it ran already or the segment is gone, and returns the bytes it read.
// Safe for concurrent use; checks run one at a time. The segment is read
// past the page cache (datadir.OpenUncached): a check reads it once.
func (l *Log) CheckSegment(num uint32) (int64, error) {
	l.checkMu.Lock()
	defer l.checkMu.Unlock()
	return l.checkSegmentLocked(num, false)
}

// checkSegmentLocked is CheckSegment with l.checkMu held; cache leaves the
// segment's pages in the page cache (Warm).
func (l *Log) checkSegmentLocked(num uint32, cache bool) (int64, error) {
	l.mu.Lock()
	m := l.findSeg(num)
	todo := m != nil && m.unchecked && !l.tableClosed
	path := ""
	if todo {
		path = m.path
	}
	l.mu.Unlock()
	if !todo {
		return 0, nil
	}
	data, err := l.readForCheck(path, cache)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Removed since the table was read (compaction dropped it).
			return 0, nil
		}
		return 0, fmt.Errorf("wal: check segment %s: %w", path, err)
	}
	var damaged []DamagedRange
	h, herr := decodeHeader(data)
	if herr == nil && h.number != num {
		herr = fmt.Errorf("header belongs to segment %d", h.number)
	}
	var marks []uint32
	if herr != nil {
		// Replay read a valid header; the file changed since.
		damaged = append(damaged, DamagedRange{Segment: num, From: 0, To: 1<<32 - 1, File: path, Reason: "unreadable segment header: " + herr.Error()})
		l.log.Error("wal: segment before the snapshot position has an unreadable header; payloads stored in it are lost",
			"file", path, "err", herr)
	} else {
		sc := scanSegment(data, HeaderSize, h.salt)
		for j, reg := range sc.regions {
			ce := regionError(path, num, data, sc, j, l.opts.CountJobs)
			end := reg.end
			if reg.trailing {
				end = int64(len(data))
			}
			damaged = append(damaged, DamagedRange{Segment: num, From: uint32(reg.start), To: uint32(min(end, 1<<32-1)), File: path, Reason: ce.Reason})
			l.log.Error("wal: damaged region in a segment before the snapshot position; payloads stored in it are lost",
				"file", path, "offset", reg.start, "bytes", reg.end-reg.start, "frames", ce.Frames, "jobs", ce.Jobs, "reason", ce.Reason)
		}
		marks = markRuns(data, sc.runs)
	}
	l.mu.Lock()
	if m := l.findSeg(num); m != nil && m.unchecked {
		m.marks, m.unchecked = marks, false
		if herr == nil {
			m.salt = h.salt
		}
	}
	last := true
	for _, m := range l.segs {
		if m.unchecked {
			last = false
			break
		}
	}
	l.mu.Unlock()
	if last {
		l.checkBuf = nil // up to a segment's size, not worth keeping
	}
	if len(damaged) > 0 && l.opts.OnCheckDamage != nil {
		l.opts.OnCheckDamage(damaged)
	}
	return int64(len(data)), nil
}

// readForCheck reads a whole segment file into checkBuf (l.checkMu held).
// The check runs while the log serves (the scrub, compaction's read-ahead),
// so it reads the way datadir.BackgroundFile does: one 64 MiB read would
// hold the log's fdatasyncs up behind it. cache reads through the page
// cache and leaves the pages there.
func (l *Log) readForCheck(path string, cache bool) ([]byte, error) {
	f, err := openBackground(path, cache)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, _, err := readWholeFrom(f, &l.checkBuf, maxSegmentSize)
	return data, err
}

// openBackground opens a segment for a background read: past the page
// cache, or (cache) through it with what was cached dropped first, so no
// page an earlier read marked for read-ahead starts it again
// (internal/datadir/background.go).
func openBackground(path string, cache bool) (*datadir.BackgroundFile, error) {
	if !cache {
		return datadir.OpenUncached(path)
	}
	f, err := datadir.OpenBackground(path)
	if err != nil {
		return nil, err
	}
	f.DropCached()
	return f, nil
}

// readWhole reads the first limit bytes of a file into *buf (grown when
// short) and says how large the file is.
func readWhole(path string, buf *[]byte, limit int64) (data []byte, fileSize int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return readWholeFrom(f, buf, limit)
}

func readWholeFrom(f interface {
	io.ReaderAt
	Stat() (os.FileInfo, error)
}, buf *[]byte, limit int64) (data []byte, fileSize int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := min(st.Size(), limit)
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	data = (*buf)[:size]
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, st.Size(), err
	}
	return data, st.Size(), nil
}

// readHeaderOnly reads the header of segment num and its size. herr says
// what is wrong with the header; err is a failure to read at all.
func readHeaderOnly(path string, num uint32) (size int64, h segmentHeader, herr, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, h, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, h, nil, err
	}
	if st.Size() > maxSegmentSize {
		return maxSegmentSize, h, errTooLarge, nil
	}
	buf := make([]byte, min(st.Size(), HeaderSize))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return 0, h, nil, err
	}
	h, herr = decodeHeader(buf)
	if herr == nil && h.number != num {
		herr = fmt.Errorf("header belongs to segment %d", h.number)
	}
	return st.Size(), h, herr, nil
}
