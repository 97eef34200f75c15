// Package wal is chronoq's write-ahead log: append-only segment files of
// CRC-framed records, written in batches with one write and one fdatasync
// per segment per commit (group commit), and a recovery that truncates a torn
// tail, stops on corruption before the tail and says exactly where.
//
// Records are opaque byte slices: the engine encodes them, the log never
// interprets them.
//
// # On-disk format
//
// A log is a directory of segment files. A segment is named by its number,
// 20 decimal digits zero-padded, and ".log":
//
//	00000000000000000001.log
//	00000000000000000002.log
//
// Numbers start at 1 and increase by one; only a prefix of the sequence may
// be missing (removed after a snapshot covered it). A hole in the sequence is
// corruption. A segment is created complete under the name "<name>.tmp" —
// header written, space preallocated, file fsync'd — and then renamed into
// place and the directory fsync'd, so a segment with its final name always
// has a durable header. Leftover ".tmp" files are deleted when the log opens.
//
// Segment header, 64 bytes, little endian:
//
//	offset  size  field
//	     0     8  magic "CHRONOQW"
//	     8     4  format version (1)
//	    12     4  header size = offset of the first frame (64)
//	    16     4  segment number (must match the file name)
//	    20     4  salt, random per segment
//	    24     8  capacity: the size the segment was created for
//	    32     8  creation time, Unix nanoseconds (informational)
//	    40    20  reserved, zero
//	    60     4  CRC-32C (Castagnoli) of bytes 0..59
//
// The header is followed by frames, back to back, with no padding:
//
//	+-----------+----------+------------------+
//	| word u32  | crc u32  | body (len bytes) |
//	+-----------+----------+------------------+
//
//	word bits 0-29  body length len, 1 <= len <= MaxRecordSize
//	word bit 30     reserved, 0
//	word bit 31     end-of-write flag (below)
//	crc             CRC-32C of salt (u32 LE) ‖ word (u32 LE) ‖ body
//
// A frame is identified by its Position: the segment number and the byte
// offset of its first byte (the word) in the segment file. The body starts
// FrameHeaderSize bytes later.
//
// Segments are preallocated (fallocate) to their capacity, so the bytes after
// the last frame read as zeros; a word of zero, a frame that overruns the
// file or a CRC mismatch after the last valid frame marks the end of the
// data. Because the salt is part of every frame's CRC, bytes left over from
// an older file (a recycled segment, a block the filesystem hands back) can
// never validate in a segment with a different salt: CRC-32C is linear, and
// two different 4-byte prefixes always change the checksum.
//
// A frame larger than the configured segment size gets a segment of its own,
// sized to fit it exactly.
//
// # End-of-write flag and torn writes
//
// Commit issues one write per segment it touches and sets bit 31 on the
// last frame of each write. Under SyncAlways each write is fdatasync'd
// before the next one starts, so at most the final write can be incomplete
// after a crash. An incomplete write is not always a clean prefix: the
// device may persist its pages in any order, leaving holes of zeros (never
// written, preallocated space) with valid frames after them. Recovery uses
// the flag to tell that apart from damage to data that had been made
// durable. A bad region in the last segment that holds data (segments are
// created ahead of need, so empty ones may follow it) is treated as the torn
// end of the log when everything after it could belong to one unfinished
// write:
//
//   - every bad region that has valid frames after it overlaps a 512-byte
//     aligned sector that is all zeros from the region's start on (a sector
//     that never reached the disk: the space was zero before the write),
//     and
//   - no valid frame after it carries the end-of-write flag, except possibly
//     the very last one, and then nothing but zeros follows it.
//
// A bad region with nothing valid after it is a torn tail, unless it starts
// with a complete frame (below). Anything else — valid frames from a later
// write after a bad region, a bad region in a segment that is followed by
// segments holding data, a bad header, a hole in the segment numbers — is
// corruption: Replay refuses to continue, naming the file, the offset, the
// positions and (best effort) the frames and job records that would be
// lost, unless Options.ForceRecovery is set, in which case bad regions are
// skipped (the scan resumes at the next offset where a frame validates),
// counted in frames and job records, and listed in RecoveryReport.Damaged.
//
// # Torn write or damage: the rule
//
// A device writes whole 512-byte sectors atomically, and segments are
// preallocated, so a write the crash interrupted leaves sectors of zeros
// where it did not land, or (without preallocation) a file that ends early.
// A bad region therefore starts with a torn frame only if one of these holds
// for the frame at its start:
//
//   - its word is zero, has the reserved bit set, or declares a length that
//     runs past the end of the file ("declared length not all present"), or
//   - an aligned sector of its declared extent is all zeros from the frame's
//     start on (a partially written frame), or
//   - non-zero bytes follow its declared end before the next valid frame (or
//     the end of the data): it is not the last thing that was written.
//
// Otherwise the frame is complete — declared length present, no unwritten
// sector, nothing but zeros after it — and a CRC mismatch means bytes that
// had been written, fsync'd and acknowledged changed afterwards. That is
// corruption wherever it is, the last frame of the log included: recovery
// refuses to start, `chronoq wal verify` reports it and exits non-zero, and
// only ForceRecovery drops it. A torn tail is truncated silently (logged with
// the bytes, frames and job records discarded): with SyncAlways no client
// was told its record was stored before its write was fsync'd.
//
// Known limit of the rule: a damaged frame whose body contains an aligned
// 512-byte run of zeros, or whose length word itself was damaged, can look
// torn and is then truncated as one (as any torn tail, logged).
//
// # Payload reads
//
// Payloads are read back from the log long after replay (Log.ReadAt).
// Every such read checks the CRC of the whole frame that holds the bytes
// and fails with a *DamageError (wrapping ErrCorrupt) instead of returning
// altered bytes. To find that frame without an index of every frame, the
// log keeps, per segment, the offset of a frame start at least every
// markStride bytes; a read walks the frame words from the nearest mark.
// Segments before the replay start are not read at Replay (only their
// headers): their check — every frame, bad regions reported through
// Options.OnCheckDamage — runs afterwards, from Log.CheckSegment (the
// broker's background scrub) or the first payload read from the segment,
// which needs the marks it finds (oldcheck.go).
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	// HeaderSize is the size of a segment header and the offset of the first
	// frame of a segment.
	HeaderSize = 64
	// FrameHeaderSize is the size of the word and CRC in front of every body.
	FrameHeaderSize = 8
	// MaxRecordSize is the largest body a frame can carry.
	MaxRecordSize = 1<<30 - 1

	formatVersion = 1

	lengthMask   = 1<<30 - 1
	reservedBit  = 1 << 30
	endOfWriteFl = 1 << 31

	// maxSegmentSize keeps every offset representable in Position.Offset.
	maxSegmentSize = 1<<32 - 1

	// sectorSize is the smallest unit a device writes atomically; a torn
	// write leaves at least one such aligned block unwritten (zero).
	sectorSize = 512
)

var segmentMagic = [8]byte{'C', 'H', 'R', 'O', 'N', 'O', 'Q', 'W'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentHeader is the decoded form of the 64-byte segment header.
type segmentHeader struct {
	version    uint32
	headerSize uint32
	number     uint32
	salt       uint32
	capacity   uint64
	createdNs  int64
}

func (h *segmentHeader) encode() []byte {
	b := make([]byte, HeaderSize)
	copy(b[0:8], segmentMagic[:])
	binary.LittleEndian.PutUint32(b[8:], h.version)
	binary.LittleEndian.PutUint32(b[12:], h.headerSize)
	binary.LittleEndian.PutUint32(b[16:], h.number)
	binary.LittleEndian.PutUint32(b[20:], h.salt)
	binary.LittleEndian.PutUint64(b[24:], h.capacity)
	binary.LittleEndian.PutUint64(b[32:], uint64(h.createdNs))
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

var errUnsupportedVersion = errors.New("unsupported segment format version")

// decodeHeader checks and decodes a segment header. An error means the
// header cannot be trusted, which also means none of the segment's frames
// can be checked (the salt is in the header).
func decodeHeader(b []byte) (segmentHeader, error) {
	var h segmentHeader
	if len(b) < HeaderSize {
		return h, fmt.Errorf("file is %d bytes, shorter than the %d-byte segment header", len(b), HeaderSize)
	}
	if [8]byte(b[0:8]) != segmentMagic {
		return h, fmt.Errorf("bad segment magic %q", b[0:8])
	}
	if got, want := crc32.Checksum(b[:60], castagnoli), binary.LittleEndian.Uint32(b[60:]); got != want {
		return h, fmt.Errorf("segment header checksum mismatch (stored %#08x, computed %#08x)", want, got)
	}
	h.version = binary.LittleEndian.Uint32(b[8:])
	h.headerSize = binary.LittleEndian.Uint32(b[12:])
	h.number = binary.LittleEndian.Uint32(b[16:])
	h.salt = binary.LittleEndian.Uint32(b[20:])
	h.capacity = binary.LittleEndian.Uint64(b[24:])
	h.createdNs = int64(binary.LittleEndian.Uint64(b[32:]))
	if h.version != formatVersion {
		return h, fmt.Errorf("%w %d (this build reads version %d)", errUnsupportedVersion, h.version, formatVersion)
	}
	// Version 1 always writes 64; anything else in a header with a valid
	// CRC is a writer bug, not something to guess around.
	if h.headerSize != HeaderSize {
		return h, fmt.Errorf("segment header size %d, want %d", h.headerSize, HeaderSize)
	}
	return h, nil
}

// saltedPrefix is the CRC-32C of salt ‖ word (little-endian), the part of
// a frame checksum that precedes the body. Eight bytes go through the
// table a byte at a time: handing crc32 a slice of a local array moves
// the array to the heap (the package dispatches to its assembly through a
// function value), an allocation for every frame appended, read or
// scanned at recovery.
func saltedPrefix(salt, word uint32) uint32 {
	crc := ^uint32(0)
	for _, v := range [2]uint32{salt, word} {
		for range 4 {
			crc = castagnoli[byte(crc)^byte(v)] ^ crc>>8
			v >>= 8
		}
	}
	return ^crc
}

func frameCRC(salt, word uint32, body []byte) uint32 {
	return crc32.Update(saltedPrefix(salt, word), castagnoli, body)
}

// appendFrame appends a complete frame for body to dst.
func appendFrame(dst []byte, salt uint32, body []byte, flags uint32) []byte {
	word := uint32(len(body)) | flags
	var h [FrameHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], word)
	binary.LittleEndian.PutUint32(h[4:], frameCRC(salt, word, body))
	dst = append(dst, h[:]...)
	return append(dst, body...)
}

// setEndOfWrite marks the frame starting at buf[off:] as the last of a
// write. The CRC covers the word, so it is recomputed.
func setEndOfWrite(buf []byte, off int, salt uint32) {
	word := binary.LittleEndian.Uint32(buf[off:]) | endOfWriteFl
	n := int(word & lengthMask)
	binary.LittleEndian.PutUint32(buf[off:], word)
	binary.LittleEndian.PutUint32(buf[off+4:], frameCRC(salt, word, buf[off+FrameHeaderSize:off+FrameHeaderSize+n]))
}

// Position identifies a frame: its segment and the offset of its first byte
// in the segment file. The zero Position is before every frame.
type Position struct {
	Segment uint32
	Offset  uint32
}

// Less orders positions in log order.
func (p Position) Less(q Position) bool {
	if p.Segment != q.Segment {
		return p.Segment < q.Segment
	}
	return p.Offset < q.Offset
}

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Segment, p.Offset) }

// segmentName is the file name of segment n; zero padding makes lexical
// order equal numeric order.
func segmentName(n uint32) string { return fmt.Sprintf("%020d.log", n) }

// parseSegmentName returns the number of a segment file name.
func parseSegmentName(name string) (uint32, bool) {
	if len(name) != 24 || name[20:] != ".log" {
		return 0, false
	}
	var n uint64
	for i := 0; i < 20; i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<32-1 {
			return 0, false
		}
	}
	if n == 0 {
		return 0, false
	}
	return uint32(n), true
}
