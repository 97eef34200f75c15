package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
)

// writeSeg is a segment open for writing. It is owned by the goroutine that
// calls Append and Commit.
type writeSeg struct {
	num      uint32
	path     string
	f        *os.File
	salt     uint32
	capacity int64
	end      int64 // where the next frame goes, counting buffered frames
	lastMark int64 // the last frame start recorded as a read mark, -1 if none
	// unsyncedWrites: a Flush wrote to it without fdatasync, so sealing it
	// must leave it to the next sync even under SyncAlways.
	unsyncedWrites bool
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Number   uint32
	FirstPos Position // position of the segment's first frame
	Size     int64    // bytes of valid data: header plus committed frames
	Path     string
}

// listSegments returns the segment numbers in dir, ascending, and removes
// leftovers of segment creations that a crash interrupted.
func listSegments(dir string, logf func(msg string, args ...any)) ([]uint32, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var nums []uint32
	removed := false
	for _, e := range entries {
		name := e.Name()
		if base, ok := strings.CutSuffix(name, ".tmp"); ok {
			if _, ok := parseSegmentName(base); ok {
				// Renamed into place only after it was complete and
				// synced: a .tmp never held a record.
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("wal: remove unfinished segment %s: %w", name, err)
				}
				logf("wal: removed unfinished segment file", "file", filepath.Join(dir, name))
				removed = true
			}
			continue
		}
		if n, ok := parseSegmentName(name); ok && e.Type().IsRegular() {
			nums = append(nums, n)
		}
	}
	if removed {
		if err := datadir.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// createSegment makes segment num with room for capacity bytes, durable
// under its final name before it returns. Errors before the rename leave no
// trace and do not fail the log; ENOSPC is reported as ErrNoSpace.
//
// With zeroFill the whole capacity is written with zeros before the header.
// fallocate only reserves blocks as unwritten extents: the first write into
// each block then converts its extent, which dirties the inode, and the
// fdatasync that makes the batch durable has to write the inode too — a
// second I/O for about every other commit (perf on ext4: 2.48 block
// requests per fdatasync, 2.05 with the zeros; fdatasync 0.18 → 0.14 ms).
// Writing 64 MiB costs tens of milliseconds, so only the background
// preparation (prepare.go) asks for it; a segment created on the request
// path stays fallocate-only.
func (l *Log) createSegment(num uint32, capacity int64, zeroFill bool) (*writeSeg, error) {
	path := filepath.Join(l.dir, segmentName(num))
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		if isNoSpace(err) {
			return nil, fmt.Errorf("%w: create segment %s: %w", ErrNoSpace, tmp, err)
		}
		return nil, fmt.Errorf("wal: create segment %s: %w", tmp, err)
	}
	discard := func(err error) (*writeSeg, error) {
		f.Close()
		os.Remove(tmp)
		if isNoSpace(err) {
			return nil, fmt.Errorf("%w: segment %s: %w", ErrNoSpace, path, err)
		}
		return nil, fmt.Errorf("wal: create segment %s: %w", path, err)
	}
	h := segmentHeader{
		version:    formatVersion,
		headerSize: HeaderSize,
		number:     num,
		salt:       rand.Uint32(),
		capacity:   uint64(capacity),
		createdNs:  time.Now().UnixNano(),
	}
	if err := l.prealloc(f, capacity); err != nil {
		if !isNotSupported(err) {
			return discard(fmt.Errorf("preallocate %d bytes: %w", capacity, err))
		}
		// Still correct without preallocation: the file grows as frames
		// are written and unwritten space reads as zeros. Only ENOSPC then
		// surfaces at Commit instead of here.
		l.noPreallocOnce.Do(func() {
			l.log.Warn("wal: filesystem does not support fallocate; segments will not be preallocated", "dir", l.dir, "err", err)
		})
	}
	if zeroFill {
		if err := writeZeros(f, capacity); err != nil {
			return discard(err)
		}
	}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return discard(fmt.Errorf("write header: %w", err))
	}
	if err := f.Sync(); err != nil {
		return discard(fmt.Errorf("fsync: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return discard(fmt.Errorf("rename: %w", err))
	}
	if err := datadir.SyncDir(l.dir); err != nil {
		f.Close()
		// The name may not survive a crash; records acknowledged in this
		// segment could vanish with it.
		return nil, l.fail(fmt.Errorf("wal: after creating segment %s: %w", path, err))
	}
	return &writeSeg{num: num, path: path, f: f, salt: h.salt, capacity: capacity, end: HeaderSize, lastMark: -1}, nil
}

// zeroChunk is how much writeZeros hands the disk at a time. Written
// whole and synced once, 64 MiB of zeros made every fdatasync of the log
// issued meanwhile wait behind them, up to 25 ms (docs/benchmarks.md,
// "Log compaction and activation lateness"); a chunk at a time, up to
// 2–3 ms.
const zeroChunk = 256 << 10

// writeZeros writes zeros over the first size bytes of f, a chunk at a
// time: with O_DIRECT where the filesystem allows it (no page cache
// filled with zeros either), else each chunk followed by an fdatasync.
func writeZeros(f *os.File, size int64) error {
	// Any failure of the direct path (tmpfs refuses O_DIRECT) leaves the
	// rest to the buffered path, which reports an error that persists.
	off, _ := zeroFillDirect(f.Name(), size)
	zeros := make([]byte, min(size-off, zeroChunk))
	for off < size {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
		if err == nil {
			err = fdatasyncFile(f)
		}
		if err != nil {
			return fmt.Errorf("write zeros at %d of %d: %w", off, size, err)
		}
		off += int64(n)
	}
	return nil
}

// truncateTail cuts a segment at off and restores its preallocated size, so
// the bytes after off read as zeros again and no remnant of the torn write
// can line up with frames appended later.
func truncateTail(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := f.Truncate(off); err != nil {
		return err
	}
	if err := preallocate(f, st.Size()); err != nil && !isNotSupported(err) && !isNoSpace(err) {
		return err
	}
	// Truncate changed the size: a full fsync, not fdatasync.
	return f.Sync()
}
