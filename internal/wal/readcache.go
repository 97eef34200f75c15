package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/chronoq/chronoq/internal/datadir"
)

// ReadAt serves payload reads from any goroutine while the loop appends
// and old segments are removed. Each segment gets one read-only descriptor,
// shared by all readers and reference-counted so that eviction or removal
// never closes a descriptor in the middle of a pread (its number could be
// reused by another open). On Linux an unlinked file stays readable through
// an open descriptor, so a read that started before removal completes.

const maxReadFiles = 16

type readFile struct {
	f       *os.File
	refs    int
	dead    bool // evicted or removed: close when the last reader leaves
	lastUse uint64
}

// readRaw returns n bytes at offset off of segment seg, unchecked. Only
// committed bytes can be read. Safe for concurrent use.
func (l *Log) readRaw(seg uint32, off uint32, n uint32) ([]byte, error) {
	return l.readRawInto(nil, seg, off, n)
}

// readRawInto is readRaw into dst's memory when it has room for n bytes.
func (l *Log) readRawInto(dst []byte, seg uint32, off uint32, n uint32) ([]byte, error) {
	rf, err := l.acquireReader(seg, off, n)
	if err != nil {
		return nil, err
	}
	buf := dst[:0]
	if uint32(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	l.rawBytes.Add(int64(n))
	_, err = rf.f.ReadAt(buf, int64(off))
	l.releaseReader(rf)
	if err != nil {
		return nil, fmt.Errorf("wal: read %d bytes at offset %d of segment %d: %w", n, off, seg, err)
	}
	return buf, nil
}

func (l *Log) acquireReader(seg, off, n uint32) (*readFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tableClosed {
		return nil, ErrClosed
	}
	m := l.findSeg(seg)
	if m == nil {
		if seg < l.removedBelow {
			return nil, fmt.Errorf("wal: read segment %d: %w", seg, ErrSegmentGone)
		}
		return nil, fmt.Errorf("wal: read segment %d: no such segment", seg)
	}
	if int64(off)+int64(n) > m.size {
		return nil, fmt.Errorf("wal: read %d bytes at offset %d of segment %d: beyond the %d committed bytes", n, off, seg, m.size)
	}
	l.useClock++
	rf := l.readers[seg]
	if rf == nil {
		f, err := os.Open(m.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("wal: read segment %d: %w", seg, ErrSegmentGone)
			}
			return nil, fmt.Errorf("wal: open segment %s for reading: %w", m.path, err)
		}
		// Payload reads are point reads: read-ahead would only add large
		// requests for the log's fdatasyncs to wait behind (a drain of a
		// cold backlog: commits over 3.2 ms 51–64 → 28–42 in 12 s,
		// docs/benchmarks.md "Background reads in small pieces"), and mark
		// pages that start it for the background readers.
		datadir.NoReadAhead(f)
		rf = &readFile{f: f}
		l.readers[seg] = rf
	}
	rf.refs++
	rf.lastUse = l.useClock
	l.evictLocked()
	return rf, nil
}

func (l *Log) releaseReader(rf *readFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rf.refs--
	if rf.dead && rf.refs == 0 {
		rf.f.Close()
	}
}

// evictLocked drops least recently used descriptors beyond maxReadFiles.
func (l *Log) evictLocked() {
	for len(l.readers) > maxReadFiles {
		var victim uint32
		var oldest *readFile
		for num, rf := range l.readers {
			if oldest == nil || rf.lastUse < oldest.lastUse {
				victim, oldest = num, rf
			}
		}
		l.dropReaderLocked(victim)
	}
}

func (l *Log) dropReaderLocked(num uint32) {
	rf := l.readers[num]
	if rf == nil {
		return
	}
	delete(l.readers, num)
	rf.dead = true
	if rf.refs == 0 {
		rf.f.Close()
	}
}

func (l *Log) closeReaders() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tableClosed = true
	for num := range l.readers {
		l.dropReaderLocked(num)
	}
}

// ReadFrame returns the body of the frame at pos after checking its CRC, for
// callers that want integrity rather than a raw byte range. Safe for
// concurrent use.
func (l *Log) ReadFrame(pos Position) ([]byte, error) {
	hdr, err := l.readRaw(pos.Segment, pos.Offset, FrameHeaderSize)
	if err != nil {
		return nil, err
	}
	word := binary.LittleEndian.Uint32(hdr)
	n := word & lengthMask
	if n == 0 || word&reservedBit != 0 || uint64(pos.Offset)+FrameHeaderSize+uint64(n) > maxSegmentSize {
		return nil, fmt.Errorf("wal: no frame at position %v: %w", pos, ErrCorrupt)
	}
	body, err := l.readRaw(pos.Segment, pos.Offset+FrameHeaderSize, n)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	m := l.findSeg(pos.Segment)
	var salt uint32
	if m != nil {
		salt = m.salt
	}
	l.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("wal: read segment %d: %w", pos.Segment, ErrSegmentGone)
	}
	if frameCRC(salt, word, body) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("wal: frame at position %v fails its checksum: %w", pos, ErrCorrupt)
	}
	return body, nil
}
