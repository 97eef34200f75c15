// Package snapshot writes and reads chronoq's snapshot files: a sequence of
// opaque items (the engine encodes them) plus the WAL position that replay
// must start from to bring the snapshot up to date.
//
// # File format
//
// A snapshot lives in DIR/<segment>-<offset>.snap, both numbers zero-padded
// to 10 digits so that lexical order is position order. It is written under
// a temporary name, fsync'd, renamed into place and the directory fsync'd,
// so a file with a final name is complete unless the disk damaged it.
//
//	file   = block* footer
//	block  = length u32 | count u32 | crc u32 | payload (length bytes)
//	         crc = CRC-32C of index u32 ‖ length ‖ count ‖ payload, where
//	         index is the block's number (0, 1, ...): a block moved or
//	         repeated does not validate
//	payload = count × (uvarint item length ‖ item bytes)
//
// Blocks hold whole items and are cut at about BlockSize bytes; an item
// larger than that gets a block of its own. All integers are little endian.
//
// Footer, 64 bytes:
//
//	offset  size  field
//	     0     8  magic "CHRONOQS"
//	     8     4  format version (2; 1 is still read)
//	    12     4  footer size (64)
//	    16     4  position: segment
//	    20     4  position: offset
//	    24     8  item count
//	    32     8  block count
//	    40     8  data length: bytes before the footer
//	    48     8  creation time, Unix nanoseconds (informational)
//	    56     4  reserved, zero
//	    60     4  CRC-32C of bytes 0..59
//
// The footer comes last because the item count is known only at the end;
// a reader finds it at a fixed distance from the end of the file. Open
// checks the footer and every block before handing out the first item, so
// a caller can fall back to an older snapshot before it has applied
// anything.
package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/chronoq/chronoq/internal/wal"
)

const (
	// BlockSize is the payload size at which a block is cut.
	BlockSize = 256 << 10
	// MaxItemSize bounds one item.
	MaxItemSize = 1 << 30

	footerSize      = 64
	blockHeaderSize = 12
	// formatVersion is what Create writes. Version 2 files may hold the
	// engine's job chunks (engine/snapchunk.go) besides encoded entries; a
	// version-1 file holds entries only and still loads. A build from
	// before version 2 refuses a version-2 file by its footer.
	formatVersion    = 2
	minFormatVersion = 1
	suffix           = ".snap"
	tmpMarker        = ".snap.tmp-"
)

var (
	footerMagic = [8]byte{'C', 'H', 'R', 'O', 'N', 'O', 'Q', 'S'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)

	// ErrCorrupt is wrapped by every error about a damaged snapshot file.
	ErrCorrupt = errors.New("snapshot: corrupt")
)

type footer struct {
	pos       wal.Position
	items     uint64
	blocks    uint64
	dataLen   uint64
	createdNs int64
}

func (f *footer) encode() []byte {
	b := make([]byte, footerSize)
	copy(b, footerMagic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint32(b[12:], footerSize)
	binary.LittleEndian.PutUint32(b[16:], f.pos.Segment)
	binary.LittleEndian.PutUint32(b[20:], f.pos.Offset)
	binary.LittleEndian.PutUint64(b[24:], f.items)
	binary.LittleEndian.PutUint64(b[32:], f.blocks)
	binary.LittleEndian.PutUint64(b[40:], f.dataLen)
	binary.LittleEndian.PutUint64(b[48:], uint64(f.createdNs))
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

func decodeFooter(b []byte) (footer, error) {
	var f footer
	if len(b) != footerSize {
		return f, fmt.Errorf("footer is %d bytes, want %d", len(b), footerSize)
	}
	if [8]byte(b[:8]) != footerMagic {
		return f, fmt.Errorf("bad footer magic %q", b[:8])
	}
	if got, want := crc32.Checksum(b[:60], castagnoli), binary.LittleEndian.Uint32(b[60:]); got != want {
		return f, fmt.Errorf("footer checksum mismatch (stored %#08x, computed %#08x)", want, got)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v < minFormatVersion || v > formatVersion {
		return f, fmt.Errorf("unsupported snapshot format version %d (this build reads %d to %d)", v, minFormatVersion, formatVersion)
	}
	if s := binary.LittleEndian.Uint32(b[12:]); s != footerSize {
		return f, fmt.Errorf("footer size %d, want %d", s, footerSize)
	}
	f.pos = wal.Position{Segment: binary.LittleEndian.Uint32(b[16:]), Offset: binary.LittleEndian.Uint32(b[20:])}
	f.items = binary.LittleEndian.Uint64(b[24:])
	f.blocks = binary.LittleEndian.Uint64(b[32:])
	f.dataLen = binary.LittleEndian.Uint64(b[40:])
	f.createdNs = int64(binary.LittleEndian.Uint64(b[48:]))
	return f, nil
}

func blockCRC(index uint64, length, count uint32, payload []byte) uint32 {
	var h [12]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(index))
	binary.LittleEndian.PutUint32(h[4:], length)
	binary.LittleEndian.PutUint32(h[8:], count)
	return crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, payload)
}

// Name returns the file name of the snapshot taken at pos.
func Name(pos wal.Position) string {
	return fmt.Sprintf("%010d-%010d%s", pos.Segment, pos.Offset, suffix)
}

// parseName returns the position encoded in a snapshot file name.
func parseName(name string) (wal.Position, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok || len(base) != 21 || base[10] != '-' {
		return wal.Position{}, false
	}
	seg, err1 := strconv.ParseUint(base[:10], 10, 32)
	off, err2 := strconv.ParseUint(base[11:], 10, 32)
	if err1 != nil || err2 != nil {
		return wal.Position{}, false
	}
	return wal.Position{Segment: uint32(seg), Offset: uint32(off)}, true
}
