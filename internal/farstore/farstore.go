// Package farstore reads and writes the bucket files of chronoq's
// far-future store (docs/architecture.md, "The far-future store"): jobs
// whose activation lies beyond a horizon live in one file per time bucket
// instead of in memory. This package only knows the file format; what the
// items mean (job images, tombstones) is the broker's business
// (internal/broker/far.go).
//
// # File format
//
// A bucket lives in DIR/<bucket start, unix ms>.bkt, or, once rewritten
// (generation g > 0), in DIR/<bucket start>.<g>.bkt:
//
//	file   = header block*
//	header = magic "CHQFAR01" | start i64 | crc u32   (20 bytes)
//	         crc = CRC-32C of magic ‖ start
//	block  = length u32 | count u32 | crc u32 | payload (length bytes)
//	         crc = CRC-32C of offset u64 ‖ length ‖ count ‖ payload, where
//	         offset is the block's first byte in the file: a block moved
//	         or repeated does not validate
//	payload = count × (uvarint item length ‖ item bytes)
//
// All integers are little endian. A file only grows (blocks are appended);
// the broker records in each snapshot how many bytes of each bucket it
// covers, fsyncs them before the snapshot counts, and on recovery cuts a
// bucket back to that size, like the log's torn tail. So every byte up to
// a recorded size must validate: a short file, a bad header or a block
// whose CRC does not match is damage, reported as a *DamageError naming the
// file and the offset.
//
// A bucket that collected many dead items (jobs taken back, their
// tombstones) is rewritten into a file of the next generation holding only
// its live items; the snapshot names the generation it covers, so a
// generation no snapshot lists is ignored (and deleted) by a recovery, and
// an old one is deleted once no kept snapshot lists it (the broker,
// internal/broker/far.go, decides when).
package farstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chronoq/chronoq/internal/datadir"
)

const (
	// HeaderSize is the size of a bucket file's header.
	HeaderSize      = 20
	blockHeaderSize = 12
	// MaxBlock bounds one block's payload, so a damaged length cannot make
	// a reader allocate without bound.
	MaxBlock = 64 << 20
	suffix   = ".bkt"
)

var (
	magic      = [8]byte{'C', 'H', 'Q', 'F', 'A', 'R', '0', '1'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	// ErrDamaged is wrapped by every DamageError.
	ErrDamaged = errors.New("far-future bucket damaged")
)

// DamageError says which bytes of which bucket file are bad.
type DamageError struct {
	File   string
	Offset int64
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("far-future bucket %s: offset %d: %s", e.File, e.Offset, e.Reason)
}

func (e *DamageError) Unwrap() error { return ErrDamaged }

// Name is the file name of generation gen of the bucket starting at start
// (unix ms).
func Name(start int64, gen uint32) string {
	if gen == 0 {
		return strconv.FormatInt(start, 10) + suffix
	}
	return strconv.FormatInt(start, 10) + "." + strconv.FormatUint(uint64(gen), 10) + suffix
}

// ID names one bucket file: its bucket's start and its generation.
type ID struct {
	Start int64
	Gen   uint32
}

// List returns the bucket files in dir (none when dir does not exist).
func List(dir string) ([]ID, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ID
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok {
			continue
		}
		st, g, hasGen := strings.Cut(base, ".")
		v, err := strconv.ParseInt(st, 10, 64)
		if err != nil {
			continue
		}
		id := ID{Start: v}
		if hasGen {
			gen, err := strconv.ParseUint(g, 10, 32)
			if err != nil || gen == 0 {
				continue
			}
			id.Gen = uint32(gen)
		}
		out = append(out, id)
	}
	return out, nil
}

func header(start int64) []byte {
	b := make([]byte, HeaderSize)
	copy(b, magic[:])
	binary.LittleEndian.PutUint64(b[8:], uint64(start))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

func blockCRC(off int64, length, count uint32, payload []byte) uint32 {
	var h [16]byte
	binary.LittleEndian.PutUint64(h[0:], uint64(off))
	binary.LittleEndian.PutUint32(h[8:], length)
	binary.LittleEndian.PutUint32(h[12:], count)
	return crc32.Update(crc32.Checksum(h[:], castagnoli), castagnoli, payload)
}

// File is a bucket open for appending. It is used by one goroutine. Its
// descriptor may be released between writes (Release): a year of hourly
// buckets must not hold thousands of descriptors; it is reopened on demand.
type File struct {
	f *os.File // nil while released
	// the path is made when needed: kept, it would cost a string per
	// bucket for as long as the bucket lives
	dir   string
	start int64
	gen   uint32
	size  int64
	dirty bool
}

// Gen is the file's generation.
func (f *File) Gen() uint32 { return f.gen }

func (f *File) ensure() error {
	if f.f != nil {
		return nil
	}
	fd, err := os.OpenFile(f.Path(), os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("farstore: reopen %s: %w", f.Path(), err)
	}
	f.f = fd
	return nil
}

// Open reports whether the file holds a descriptor.
func (f *File) Open() bool { return f.f != nil }

// Release closes the descriptor; the next write or sync reopens it.
// Written bytes stay written (Sync still makes them durable).
func (f *File) Release() error {
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}

// Create makes a new, empty bucket file of generation gen (an existing one
// is replaced) and syncs its directory, so the name survives a crash once
// the data does.
func Create(dir string, start int64, gen uint32) (*File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	// a side file left by an earlier file of this start and generation
	// (one a crash left unlisted) could describe the same size by chance;
	// the next snapshot writes the side file anew. The directory sync
	// below makes the removal durable too.
	if err := RemoveSide(dir, start); err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	path := filepath.Join(dir, Name(start, gen))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	if _, err := f.Write(header(start)); err != nil {
		f.Close()
		return nil, fmt.Errorf("farstore: write %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, dir: dir, start: start, gen: gen, size: HeaderSize, dirty: true}, nil
}

// OpenAt opens an existing bucket for appending after its first size
// bytes, cutting off whatever lies beyond (bytes no snapshot covers). The
// caller has checked those bytes (Read) or trusts them (a side file). The
// descriptor is opened by the first write: a restart with a year of
// buckets opens none of them.
func OpenAt(dir string, start int64, gen uint32, size int64) (*File, error) {
	path := filepath.Join(dir, Name(start, gen))
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	if st.Size() < size {
		return nil, &DamageError{File: path, Offset: st.Size(), Reason: fmt.Sprintf("file ends at %d bytes, the snapshot covers %d", st.Size(), size)}
	}
	if st.Size() > size {
		if err := os.Truncate(path, size); err != nil {
			return nil, fmt.Errorf("farstore: cut %s back to %d bytes: %w", path, size, err)
		}
	}
	return &File{dir: dir, start: start, gen: gen, size: size, dirty: st.Size() > size}, nil
}

// Path is the file's path.
func (f *File) Path() string { return filepath.Join(f.dir, Name(f.start, f.gen)) }

// Size is how many bytes have been written.
func (f *File) Size() int64 { return f.size }

// Append writes items as one block. Written is not durable: Sync.
func (f *File) Append(items [][]byte) error {
	if len(items) == 0 {
		return nil
	}
	// the block is built in a fresh buffer, not kept with the file: a year
	// of buckets would otherwise each hold its last block in memory
	b := make([]byte, blockHeaderSize, blockHeaderSize+64*len(items))
	for _, it := range items {
		b = binary.AppendUvarint(b, uint64(len(it)))
		b = append(b, it...)
	}
	payload := b[blockHeaderSize:]
	if len(payload) > MaxBlock {
		return fmt.Errorf("farstore: block of %d bytes exceeds %d", len(payload), MaxBlock)
	}
	binary.LittleEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(items)))
	binary.LittleEndian.PutUint32(b[8:], blockCRC(f.size, uint32(len(payload)), uint32(len(items)), payload))
	if err := f.ensure(); err != nil {
		return err
	}
	if _, err := f.f.WriteAt(b, f.size); err != nil {
		return fmt.Errorf("farstore: write %s: %w", f.Path(), err)
	}
	f.size += int64(len(b))
	f.dirty = true
	return nil
}

// Sync makes everything written durable.
func (f *File) Sync() error {
	if !f.dirty {
		return nil
	}
	if err := f.ensure(); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("farstore: sync %s: %w", f.Path(), err)
	}
	f.dirty = false
	return nil
}

// Close closes the file.
func (f *File) Close() error { return f.Release() }

// Read checks and visits the items of the first size bytes of a bucket
// file (size < 0: the whole file, which must then end on a block
// boundary). fn gets each item with the offset of its block; the item
// aliases a buffer reused for the next block. A damaged block stops the
// read with a *DamageError; a missing file is reported as such (wrapping
// os.ErrNotExist).
func Read(path string, size int64, fn func(blockOff int64, item []byte) error) error {
	return ReadFrom(path, 0, size, fn)
}

// ReadFrom is Read of the blocks from offset from (0, or the end of a
// block: a size recorded earlier) up to size; the header is checked only
// when from is 0.
//
// Buckets are read while the server runs (loaded ahead of their window,
// searched, rewritten), so the file is read the way
// datadir.BackgroundFile reads: the log's fdatasyncs do not wait behind it.
func ReadFrom(path string, from, size int64, fn func(blockOff int64, item []byte) error) error {
	f, err := datadir.OpenBackground(path)
	if err != nil {
		return fmt.Errorf("farstore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("farstore: %w", err)
	}
	if size < 0 {
		size = st.Size()
	}
	// a file shorter than the size a snapshot recorded is read as far as
	// it goes, so the damage is reported at the first block it cuts (and
	// a forced recovery keeps every whole block before it)
	want := size
	size = min(size, st.Size())
	if size < HeaderSize {
		return &DamageError{File: path, Offset: 0, Reason: fmt.Sprintf("%d bytes is shorter than the header", size)}
	}
	r := io.NewSectionReader(f, 0, size)
	off := max(from, HeaderSize)
	if from <= 0 {
		hb := make([]byte, HeaderSize)
		if _, err := io.ReadFull(r, hb); err != nil {
			return fmt.Errorf("farstore: read %s: %w", path, err)
		}
		if [8]byte(hb[:8]) != magic {
			return &DamageError{File: path, Offset: 0, Reason: "bad magic"}
		}
		if crc32.Checksum(hb[:16], castagnoli) != binary.LittleEndian.Uint32(hb[16:]) {
			return &DamageError{File: path, Offset: 0, Reason: "header checksum mismatch"}
		}
	}
	// the blocks in sequence, a chunk at a time: a block per read would
	// ask the disk for a page at a time once read-ahead is off (a small
	// bucket, read whole for a cancel or a peek, gets a small buffer)
	br := bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), int(min(max(size-off, 16), datadir.BackgroundChunk)))
	var bh [blockHeaderSize]byte
	var buf []byte
	for off < size {
		if size-off < blockHeaderSize {
			return &DamageError{File: path, Offset: off, Reason: fmt.Sprintf("torn block header: the file ends at %d bytes, the snapshot covers %d", size, want)}
		}
		if _, err := io.ReadFull(br, bh[:]); err != nil {
			return fmt.Errorf("farstore: read %s at %d: %w", path, off, err)
		}
		length := binary.LittleEndian.Uint32(bh[0:])
		count := binary.LittleEndian.Uint32(bh[4:])
		if length > MaxBlock || int64(length) > size-off-blockHeaderSize {
			reason := fmt.Sprintf("block length %d runs past the end (%d bytes)", length, size)
			if want > size {
				reason = fmt.Sprintf("torn block: the file ends at %d bytes, the snapshot covers %d", size, want)
			}
			return &DamageError{File: path, Offset: off, Reason: reason}
		}
		if cap(buf) < int(length) {
			buf = make([]byte, length)
		}
		buf = buf[:length]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("farstore: read %s at %d: %w", path, off, err)
		}
		if blockCRC(off, length, count, buf) != binary.LittleEndian.Uint32(bh[8:]) {
			return &DamageError{File: path, Offset: off, Reason: "block checksum mismatch"}
		}
		p := buf
		for i := uint32(0); i < count; i++ {
			n, k := binary.Uvarint(p)
			if k <= 0 || n > uint64(len(p)-k) {
				return &DamageError{File: path, Offset: off, Reason: "bad item length"}
			}
			if err := fn(off, p[k:k+int(n)]); err != nil {
				return err
			}
			p = p[k+int(n):]
		}
		if len(p) != 0 {
			return &DamageError{File: path, Offset: off, Reason: "trailing bytes in block"}
		}
		off += blockHeaderSize + int64(length)
	}
	if want > size {
		return &DamageError{File: path, Offset: size, Reason: fmt.Sprintf("file ends at %d bytes, the snapshot covers %d", size, want)}
	}
	return nil
}

// Remove deletes generation gen of a bucket, and with the side file when
// side (a missing one is not an error). The side file goes first: one
// left without its bucket is swept at the next start.
func Remove(dir string, start int64, gen uint32, side bool) error {
	if side {
		if err := RemoveSide(dir, start); err != nil {
			return err
		}
	}
	err := os.Remove(filepath.Join(dir, Name(start, gen)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func syncDir(dir string) error {
	if err := datadir.SyncDir(dir); err != nil {
		return fmt.Errorf("farstore: %w", err)
	}
	return nil
}
