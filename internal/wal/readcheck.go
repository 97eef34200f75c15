package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
)

// Payload reads are checked: ReadAt returns a range of a frame's body only
// after the CRC of the whole frame matched (internal/wal/format.go, "Payload
// reads"). Frames are found from marks: per segment, the offset of a frame
// start at least every markStride bytes (and at the start of every run of
// valid frames), so a read walks at most about markStride bytes of frame
// words before it reaches its frame, and the marks cost 4 bytes per
// markStride of log (256 KiB per 64 MiB segment, 0.4%). Measured on a
// page-cached segment of 158-byte frames: a checked 100-byte read takes
// about 1.9 µs against 0.6 µs unchecked; a 4 KiB stride made it 3 µs.

const markStride = 1024

// DamageError reports a payload read refused because the frame holding it
// fails its checks. It wraps ErrCorrupt.
type DamageError struct {
	File    string
	Segment uint32
	Offset  uint32 // the requested bytes
	Len     uint32
	// FrameOffset is the byte offset in File of the frame found damaged (or
	// where the walk to it failed).
	FrameOffset int64
	// FrameEnd is where that frame ends when its extent is known (its
	// checksum failed), else 0: every blob in [FrameOffset, FrameEnd) is
	// damaged.
	FrameEnd int64
	Reason   string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("wal: stored bytes %d-%d of %s are damaged (%s at byte offset %d); refusing to serve them",
		e.Offset, uint64(e.Offset)+uint64(e.Len), e.File, e.Reason, e.FrameOffset)
}

func (e *DamageError) Unwrap() error { return ErrCorrupt }

// addMark records a frame start of segment num for the read walk; marks
// must come in increasing order. l.mu must be held.
func (m *segMeta) addMark(off int64) {
	if n := len(m.marks); n > 0 && off-int64(m.marks[n-1]) < markStride {
		return
	}
	m.marks = append(m.marks, uint32(off))
}

// markRuns sets the marks of a scanned segment from its runs of valid
// frames: each run's start, then frame starts at least markStride apart.
func markRuns(data []byte, runs []frameRun) []uint32 {
	var marks []uint32
	for _, r := range runs {
		first := true
		walkRun(data, r, func(off int64, _ uint32, _ []byte) error {
			if first || off-int64(marks[len(marks)-1]) >= markStride {
				marks = append(marks, uint32(off))
				first = false
			}
			return nil
		})
	}
	return marks
}

// ReadAt returns n bytes at offset off of segment seg: part of the body of
// one committed frame, whose CRC is checked first. A damaged frame gives a
// *DamageError (and Options.OnDamage is told). Safe for concurrent use.
func (l *Log) ReadAt(seg uint32, off uint32, n uint32) ([]byte, error) {
	// The frame is read into pooled memory and the bytes copied out: a
	// slice would pin the whole frame, ~200 KB for a batch of a thousand
	// puts, for as long as the caller keeps the payload, and memory of
	// its own per read was most of what a take allocated.
	bp := frameBufs.Get().(*[]byte)
	b, _, _, err := l.readChecked(seg, off, n, bp)
	var out []byte
	if err == nil {
		out = bytes.Clone(b)
	}
	if cap(*bp) <= maxPooledFrame {
		frameBufs.Put(bp)
	}
	return out, err
}

var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledFrame bounds the buffers ReadAt keeps: a batch put's frame is
// read whole once in a while, and should not stay.
const maxPooledFrame = 64 << 10

// readAhead is how far past the asked bytes a checked read reads at once.
// The checksum covers the whole frame, so its tail must be read too; a
// single put's frame ends within a few hundred bytes of its payload, and
// reading that much more up front saves a second pread for it.
const readAhead = 512

// readChecked answers the n bytes at off and the checked frame holding
// them (header and body) with the frame's offset. With scratch set, the
// bytes are read into *scratch's memory, which is grown as needed and
// left for the next read: the answers are valid until then.
func (l *Log) readChecked(seg uint32, off uint32, n uint32, scratch *[]byte) (b, frame []byte, start int64, err error) {
	l.mu.Lock()
	m := l.findSeg(seg)
	if m != nil && m.unchecked {
		// A segment before the replay start that has no marks yet: check
		// it now (oldcheck.go), once, for every reader.
		l.mu.Unlock()
		if _, err := l.CheckSegment(seg); err != nil {
			return nil, nil, 0, err
		}
		l.mu.Lock()
		m = l.findSeg(seg)
		if m != nil && m.unchecked { // the check could not run: closed
			l.mu.Unlock()
			return nil, nil, 0, ErrClosed
		}
	}
	var (
		mark  int64 = -1
		salt  uint32
		size  int64
		path  string // named lazily: only a damage report needs it
		found = m != nil
	)
	if m != nil {
		salt, size, path = m.salt, m.size, m.path
		i := sort.Search(len(m.marks), func(i int) bool { return m.marks[i] > off })
		if i > 0 {
			mark = int64(m.marks[i-1])
		}
	}
	l.mu.Unlock()
	if !found || int64(off)+int64(n) > size {
		// Let the raw read give its usual error (removed, unknown,
		// uncommitted).
		if _, err := l.readRaw(seg, off, n); err != nil {
			return nil, nil, 0, err
		}
		return nil, nil, 0, fmt.Errorf("wal: read %d bytes at offset %d of segment %d: the segment table changed during the read", n, off, seg)
	}
	damage := func(at, end int64, reason string) error {
		if path == "" {
			path = filepath.Join(l.dir, segmentName(seg))
		}
		err := &DamageError{File: path, Segment: seg, Offset: off, Len: n, FrameOffset: at, FrameEnd: end, Reason: reason}
		if l.opts.OnDamage != nil {
			l.opts.OnDamage(err)
		}
		return err
	}
	if mark < 0 {
		return nil, nil, 0, damage(HeaderSize, 0, "no valid frame precedes these bytes")
	}
	want := int64(off) + int64(n)
	var into []byte
	if scratch != nil {
		into = *scratch
	}
	buf, err := l.readRawInto(into, seg, uint32(mark), uint32(min(want+readAhead, size)-mark))
	if err != nil {
		return nil, nil, 0, err
	}
	if scratch != nil {
		defer func() { *scratch = buf[:0] }()
	}
	f := mark
	for {
		rel := f - mark
		if rel+FrameHeaderSize > int64(len(buf)) {
			return nil, nil, 0, damage(f, 0, "the frames before these bytes do not lead to them")
		}
		word := binary.LittleEndian.Uint32(buf[rel:])
		bl := int64(word & lengthMask)
		end := f + FrameHeaderSize + bl
		if bl == 0 || word&reservedBit != 0 || end > size {
			return nil, nil, 0, damage(f, 0, "no valid frame here")
		}
		if end <= int64(off) {
			f = end
			continue
		}
		if f+FrameHeaderSize > int64(off) || end < want {
			return nil, nil, 0, damage(f, 0, "the bytes do not lie inside one frame body")
		}
		if have, need := len(buf), int(end-mark); need > have {
			// the rest of the frame, read in after what is there
			buf = slices.Grow(buf, need-have)[:need]
			if _, err := l.readRawInto(buf[have:], seg, uint32(mark)+uint32(have), uint32(need-have)); err != nil {
				return nil, nil, 0, err
			}
		}
		fr := buf[rel : rel+FrameHeaderSize+bl]
		if frameCRC(salt, word, fr[FrameHeaderSize:]) != binary.LittleEndian.Uint32(fr[4:]) {
			return nil, nil, 0, damage(f, end, "the frame holding them fails its checksum")
		}
		return buf[off-uint32(mark) : want-mark], fr, f, nil
	}
}

// FrameReader reads payloads like ReadAt but keeps the last frame it
// checked. Payloads of a batch put share one frame, and a frame is read
// whole to check it, so a caller reading many payloads in log order —
// compaction re-logging a segment's jobs, thousands per turn — reads and
// checks each frame once instead of once per payload (~200 KB per
// 100-byte payload for batches of a thousand). Bytes that change on disk
// after the frame was checked are not seen until the reader moves on, so
// a reader is for the reads of one job (a segment's relocation, whose
// frames no longer change), not for serving clients. Not safe for
// concurrent use.
type FrameReader struct {
	l     *Log
	seg   uint32
	start int64  // the kept frame's offset in its segment
	frame []byte // header and body; nil: none kept
	// buf is the memory frames are read into, kept from one frame to
	// the next: compaction reads ~16 KiB of payloads a turn out of
	// ~200 KB frames, and a new buffer per frame made it most of what
	// the server allocated while it ran (and the garbage collections
	// that come with that).
	buf []byte
}

// NewFrameReader returns a reader over l that keeps no frame yet.
func (l *Log) NewFrameReader() *FrameReader { return &FrameReader{l: l} }

// ReadAt answers a copy of the n bytes at off of segment seg, checked.
func (r *FrameReader) ReadAt(seg, off, n uint32) ([]byte, error) {
	if b, ok := r.slice(seg, off, n); ok {
		return b, nil
	}
	r.frame = nil // buf is about to be overwritten
	b, fr, start, err := r.l.readChecked(seg, off, n, &r.buf)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(b)
	if len(fr) <= maxCheckedFrame {
		r.seg, r.start, r.frame = seg, start, fr
	} else {
		r.buf = nil // do not keep a frame's worth of memory that large
	}
	return out, nil
}

// maxCheckedFrame bounds the memory a FrameReader's frame may hold.
const maxCheckedFrame = 4 << 20

// slice copies n bytes at off out of the frame body when they lie inside.
func (r *FrameReader) slice(seg, off, n uint32) ([]byte, bool) {
	if r.frame == nil || r.seg != seg || int64(off) < r.start+FrameHeaderSize || int64(off)+int64(n) > r.start+int64(len(r.frame)) {
		return nil, false
	}
	rel := int64(off) - r.start
	return bytes.Clone(r.frame[rel : rel+int64(n)]), true
}
