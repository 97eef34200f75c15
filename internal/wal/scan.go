package wal

import (
	"bytes"
	"encoding/binary"
)

// The scanner reads one segment image held in memory and splits it into
// runs of valid frames separated by bad regions. It does no I/O and makes no
// decisions; replay and verify decide what a bad region means. Any input is
// acceptable: every index is bounds-checked against the image.

// frameRun is a chain of valid frames, each starting where the previous one
// ends, covering data[start:end].
type frameRun struct {
	start, end int64
	frames     int
	bodyBytes  int64
	flagged    int  // frames carrying the end-of-write flag
	lastFlag   bool // the run's last frame carries it
}

// badRegion is a stretch of bytes in which no frame validates.
type badRegion struct {
	start, end int64
	// trailing: no valid frame follows in the segment; end is then the end
	// of the last non-zero byte.
	trailing bool
	// zeroSector: the region overlaps a sector that looks unwritten (see
	// hasZeroSector).
	zeroSector bool
	// damagedFrame: the region starts with a complete frame — a plausible
	// word, the declared length inside the file, no sector of it unwritten —
	// whose CRC fails. A crash cannot produce that (see the package
	// documentation), so the region is damage, never a torn tail.
	damagedFrame bool
}

type segScan struct {
	// runs[0] starts at the scan start (possibly empty); runs[i+1] starts
	// where regions[i] ends. A trailing region is last and has no run after
	// it.
	runs       []frameRun
	regions    []badRegion
	nonZeroEnd int64 // offset after the last non-zero byte (>= scan start)
}

func (s *segScan) frames() int {
	n := 0
	for _, r := range s.runs {
		n += r.frames
	}
	return n
}

// validEnd is where the last valid frame ends.
func (s *segScan) validEnd() int64 { return s.runs[len(s.runs)-1].end }

func scanSegment(data []byte, start int64, salt uint32) *segScan {
	s := &segScan{nonZeroEnd: nonZeroEnd(data, start)}
	var ix *crcIndex
	off := start
	cur := frameRun{start: off, end: off}
	for {
		if n, word, ok := frameAt(data, off, salt); ok {
			cur.frames++
			cur.bodyBytes += n
			cur.lastFlag = word&endOfWriteFl != 0
			if cur.lastFlag {
				cur.flagged++
			}
			off += FrameHeaderSize + n
			cur.end = off
			continue
		}
		s.runs = append(s.runs, cur)
		if off >= s.nonZeroEnd {
			return s // clean end: nothing but zeros (or nothing) follows
		}
		if ix == nil {
			ix = newCRCIndex(data)
		}
		next := resync(data, off+1, salt, ix, s.nonZeroEnd)
		if next < 0 {
			s.regions = append(s.regions, badRegion{start: off, end: s.nonZeroEnd, trailing: true, damagedFrame: completeFrameAt(data, off, s.nonZeroEnd)})
			return s
		}
		s.regions = append(s.regions, badRegion{start: off, end: next, zeroSector: hasZeroSector(data, off, next), damagedFrame: completeFrameAt(data, off, next)})
		off = next
		cur = frameRun{start: off, end: off}
	}
}

// frameAt reports whether a valid frame starts at off, and its body length.
func frameAt(data []byte, off int64, salt uint32) (n int64, word uint32, ok bool) {
	if off < 0 || off > int64(len(data))-FrameHeaderSize {
		return 0, 0, false
	}
	word = binary.LittleEndian.Uint32(data[off:])
	n = int64(word & lengthMask)
	if n == 0 || word&reservedBit != 0 || n > int64(len(data))-off-FrameHeaderSize {
		return 0, 0, false
	}
	body := data[off+FrameHeaderSize : off+FrameHeaderSize+n]
	if frameCRC(salt, word, body) != binary.LittleEndian.Uint32(data[off+4:]) {
		return 0, 0, false
	}
	return n, word, true
}

// completeFrameAt reports whether the bytes at off look like a frame that
// was written in full and is the last thing written before regionEnd: a
// word with a non-zero length and the reserved bit clear, the declared
// extent inside the file, no aligned sector of that extent all zeros from
// off on, and only zeros between its end and regionEnd. A write the crash
// interrupted leaves its unwritten sectors zero (segments are
// preallocated), or the file shorter than the extent (no preallocation),
// so such a frame is not torn: if its CRC fails, bytes that had been
// written and synced changed.
func completeFrameAt(data []byte, off, regionEnd int64) bool {
	if off < 0 || off > int64(len(data))-FrameHeaderSize {
		return false
	}
	word := binary.LittleEndian.Uint32(data[off:])
	n := int64(word & lengthMask)
	if n == 0 || word&reservedBit != 0 || n > int64(len(data))-off-FrameHeaderSize {
		return false
	}
	end := off + FrameHeaderSize + n
	if end < regionEnd && nextNonZero(data, end, regionEnd) < regionEnd {
		return false
	}
	return !hasZeroSector(data, off, end)
}

// regionFrames counts, best effort, the frames a bad region held: it
// follows the chain of plausible words from the region's start while each
// declared frame stays inside the region, and calls fn (when not nil) with
// each body, whose CRC is not valid or not checked. A region whose first
// word is garbage counts as one frame: something was written there.
func regionFrames(data []byte, reg badRegion, fn func(body []byte)) int {
	limit := reg.end
	if reg.trailing {
		// Nothing valid follows: a frame may end in zeros past the region.
		limit = int64(len(data))
	}
	n := 0
	for off := reg.start; off <= limit-FrameHeaderSize && off <= int64(len(data))-FrameHeaderSize; {
		word := binary.LittleEndian.Uint32(data[off:])
		l := int64(word & lengthMask)
		end := off + FrameHeaderSize + l
		if l == 0 || word&reservedBit != 0 || end > limit || end > int64(len(data)) {
			break
		}
		if fn != nil {
			fn(data[off+FrameHeaderSize : end])
		}
		n++
		off = end
	}
	return max(n, 1)
}

// resync returns the first offset >= from at which a valid frame starts, or
// -1. Only offsets below limit (the end of non-zero data) can start a frame:
// a frame's word has a non-zero length.
func resync(data []byte, from int64, salt uint32, ix *crcIndex, limit int64) int64 {
	size := int64(len(data))
	for o := from; o < limit && o <= size-FrameHeaderSize; o++ {
		if data[o] == 0 {
			// Jump over zeros: a candidate word needs a non-zero byte among
			// its four, so the next candidate is three before the next
			// non-zero byte.
			z := nextNonZero(data, o, limit)
			if z >= limit {
				break
			}
			if z-3 > o {
				o = z - 3
			}
			if o > size-FrameHeaderSize {
				break
			}
		}
		word := binary.LittleEndian.Uint32(data[o:])
		n := int64(word & lengthMask)
		if n == 0 || word&reservedBit != 0 || n > size-o-FrameHeaderSize {
			continue
		}
		body := o + FrameHeaderSize
		var got uint32
		if n <= 2*crcIndexStride {
			got = frameCRC(salt, word, data[body:body+n])
		} else {
			got = crcCombine(saltedPrefix(salt, word), ix.rangeCRC(int(body), int(body+n)), n)
		}
		if got == binary.LittleEndian.Uint32(data[o+4:]) {
			return o
		}
	}
	return -1
}

var zeroBlock [64 << 10]byte

// nonZeroEnd returns the offset just after the last non-zero byte of
// data[start:], or start if there is none.
func nonZeroEnd(data []byte, start int64) int64 {
	if start >= int64(len(data)) {
		return max(start, 0)
	}
	end := int64(len(data))
	for end > start {
		lo := max(end-int64(len(zeroBlock)), start)
		if bytes.Equal(data[lo:end], zeroBlock[:end-lo]) {
			end = lo
			continue
		}
		for end > lo && data[end-1] == 0 {
			end--
		}
		return end
	}
	return start
}

// nextNonZero returns the index of the first non-zero byte in data[from:limit],
// or limit.
func nextNonZero(data []byte, from, limit int64) int64 {
	i := from
	for i+8 <= limit && binary.LittleEndian.Uint64(data[i:]) == 0 {
		i += 8
	}
	for i < limit && data[i] == 0 {
		i++
	}
	return i
}

// hasZeroSector reports whether data[a:b] overlaps an aligned sector whose
// bytes from a on are all zero: what a sector of the write starting at or
// before a looks like when it never reached the disk. (Its bytes before a
// belong to earlier, synced writes and keep their old content.)
func hasZeroSector(data []byte, a, b int64) bool {
	for s := a &^ (sectorSize - 1); s < b; s += sectorSize {
		lo, hi := max(s, a), min(s+sectorSize, int64(len(data)))
		if lo < hi && bytes.Equal(data[lo:hi], zeroBlock[:hi-lo]) {
			return true
		}
	}
	return false
}

// tornFrom returns the smallest region index r such that regions[r:] and
// every frame after regions[r].start can be the remains of a single
// unfinished write (see the package documentation), or len(regions) if even
// the last region cannot.
func (s *segScan) tornFrom() int {
	R := len(s.regions)
	if R == 0 {
		return 0
	}
	lastRun := len(s.runs) - 1
	// A final run exists when the last region is not trailing; its last
	// frame may legitimately carry the flag: it ends the unfinished write.
	finalRunFlagged := !s.regions[R-1].trailing && s.runs[lastRun].lastFlag
	flagsAfter := 0
	best := R
	for r := R - 1; r >= 0; r-- {
		reg := s.regions[r]
		if reg.damagedFrame || (!reg.trailing && !reg.zeroSector) {
			break
		}
		if r+1 <= lastRun {
			flagsAfter += s.runs[r+1].flagged
		}
		if flagsAfter > 1 || (flagsAfter == 1 && !finalRunFlagged) {
			break
		}
		best = r
	}
	return best
}

// framesAfter counts valid frames in runs that follow regions[r].
func (s *segScan) framesAfter(r int) int {
	n := 0
	for i := r + 1; i < len(s.runs); i++ {
		n += s.runs[i].frames
	}
	return n
}

// walkRun calls fn for each frame of a run found by scanSegment.
func walkRun(data []byte, r frameRun, fn func(off int64, word uint32, body []byte) error) error {
	for off := r.start; off < r.end; {
		if off > int64(len(data))-FrameHeaderSize {
			return nil
		}
		word := binary.LittleEndian.Uint32(data[off:])
		n := int64(word & lengthMask)
		end := off + FrameHeaderSize + n
		if n == 0 || end > r.end {
			return nil // cannot happen for a run from scanSegment
		}
		if err := fn(off, word, data[off+FrameHeaderSize:end]); err != nil {
			return err
		}
		off = end
	}
	return nil
}
