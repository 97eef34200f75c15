package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/chronoq/chronoq/internal/wal"
)

// Reader returns the items of a snapshot that Open has verified.
type Reader struct {
	path  string
	f     *os.File
	br    *bufio.Reader
	ft    footer
	block []byte // payload of the current block
	rest  []byte // unread part of block
	left  uint32 // items left in the current block
	index uint64 // next block to read
	off   uint64 // file offset of the next block

	blockOff uint64 // file offset of the block items come from now
	stream   bool   // OpenStream: nothing checked ahead of Next
	items    uint64 // items handed out
	fresh    bool   // FreshBlocks: each block read into new memory
	alloc    func() []byte
}

// FreshBlocks makes the items Next returns stay valid after later calls:
// each block is read into memory of its own instead of the one buffer
// every block reuses, so a caller that hands items to another goroutine
// need not copy each one (a restart copied every job chunk of the
// snapshot once more for that, docs/benchmarks.md). The garbage collector
// frees a block once no item of it is referenced — or, with alloc, the
// caller recycles it: each block is read into the slice alloc returns
// (a new one when that is too small for the block), which the caller
// must not reuse before it is done with every item of the block. Call it
// before the first Next.
func (r *Reader) FreshBlocks(alloc func() []byte) {
	r.fresh, r.alloc = true, alloc
	if r.items == 0 && r.index == 0 {
		// A small read buffer: a block's payload (up to BlockSize and
		// more) then mostly goes from the file straight into its own
		// memory (bufio reads a request larger than its buffer
		// directly) instead of through the buffer, one copy fewer of the
		// whole snapshot; the reads stay BlockSize large, as fast as 4
		// MiB ones on a cold file here.
		r.br = bufio.NewReaderSize(io.NewSectionReader(r.f, 0, int64(r.ft.dataLen)), 16<<10)
	}
}

// Open opens a snapshot and verifies all of it — footer, every block
// checksum, every item boundary, the counts — before returning, so that a
// caller can fall back to an older snapshot before applying anything.
// Errors about damage wrap ErrCorrupt.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: open %s: %w", path, err)
	}
	r := &Reader{path: path, f: f}
	if err := r.verify(); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: %s: %w", path, err)
	}
	r.br = bufio.NewReaderSize(f, 1<<20)
	return r, nil
}

// OpenStream opens a snapshot checking only its footer; every block is
// checked (checksum, item framing) as Next reaches it, and the counts
// against the footer at the end, so the file is read once. For a caller
// that can throw away what it applied when Next fails (recovery builds a
// fresh engine per snapshot it tries); Open suits one that cannot.
func OpenStream(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: open %s: %w", path, err)
	}
	r := &Reader{path: path, f: f, stream: true}
	if r.ft, _, err = readFooter(f, path); err != nil {
		f.Close()
		return nil, err
	}
	// Large reads: a restart reads the snapshot from end to end, often
	// not from the page cache (several GB at 100 M jobs).
	r.br = bufio.NewReaderSize(io.NewSectionReader(f, 0, int64(r.ft.dataLen)), 4<<20)
	return r, nil
}

func (r *Reader) corrupt(format string, args ...any) error {
	return fmt.Errorf("snapshot: %s: %s: %w", r.path, fmt.Sprintf(format, args...), ErrCorrupt)
}

// readFooter reads and checks the footer of f against its size and name.
func readFooter(f *os.File, path string) (footer, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return footer{}, 0, fmt.Errorf("snapshot: stat %s: %w", path, err)
	}
	size := st.Size()
	if size < footerSize {
		return footer{}, size, fmt.Errorf("snapshot: %s: file is %d bytes, shorter than the %d-byte footer: %w", path, size, footerSize, ErrCorrupt)
	}
	b := make([]byte, footerSize)
	if _, err := f.ReadAt(b, size-footerSize); err != nil {
		return footer{}, size, fmt.Errorf("snapshot: read footer of %s: %w", path, err)
	}
	ft, err := decodeFooter(b)
	if err != nil {
		return ft, size, fmt.Errorf("snapshot: %s: %v: %w", path, err, ErrCorrupt)
	}
	if ft.dataLen != uint64(size-footerSize) {
		return ft, size, fmt.Errorf("snapshot: %s: footer says %d bytes of data, file has %d: %w", path, ft.dataLen, size-footerSize, ErrCorrupt)
	}
	if pos, ok := parseName(filepath.Base(path)); ok && pos != ft.pos {
		return ft, size, fmt.Errorf("snapshot: %s: footer position %v does not match the file name: %w", path, ft.pos, ErrCorrupt)
	}
	return ft, size, nil
}

func (r *Reader) verify() error {
	ft, _, err := readFooter(r.f, r.path)
	if err != nil {
		return err
	}
	r.ft = ft
	br := bufio.NewReaderSize(io.NewSectionReader(r.f, 0, int64(ft.dataLen)), 1<<20)
	var off, items uint64
	var buf []byte
	var index uint64
	for off < ft.dataLen {
		payload, count, err := readBlock(br, index, ft.dataLen-off, &buf)
		if err != nil {
			return r.corrupt("block %d at offset %d: %v", index, off, err)
		}
		if err := checkItems(payload, count); err != nil {
			return r.corrupt("block %d at offset %d: %v", index, off, err)
		}
		off += blockHeaderSize + uint64(len(payload))
		items += uint64(count)
		index++
	}
	if index != ft.blocks || items != ft.items {
		return r.corrupt("found %d blocks and %d items, footer says %d and %d", index, items, ft.blocks, ft.items)
	}
	return nil
}

// readBlock reads the block numbered index, at most limit bytes, into *buf
// and checks its CRC.
func readBlock(br *bufio.Reader, index, limit uint64, buf *[]byte) ([]byte, uint32, error) {
	var h [blockHeaderSize]byte
	if limit < blockHeaderSize {
		return nil, 0, fmt.Errorf("%d bytes left, too few for a block header", limit)
	}
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, 0, fmt.Errorf("read block header: %w", err)
	}
	length := binary.LittleEndian.Uint32(h[0:])
	count := binary.LittleEndian.Uint32(h[4:])
	if uint64(length) > limit-blockHeaderSize {
		return nil, 0, fmt.Errorf("block length %d overruns the data (%d bytes left)", length, limit-blockHeaderSize)
	}
	if uint64(count) > uint64(length) {
		// Every item takes at least its one-byte length prefix.
		return nil, 0, fmt.Errorf("block claims %d items in %d bytes", count, length)
	}
	if uint32(cap(*buf)) < length {
		*buf = make([]byte, length)
	}
	payload := (*buf)[:length]
	if _, err := io.ReadFull(br, payload); err != nil {
		return nil, 0, fmt.Errorf("read block: %w", err)
	}
	if got, want := blockCRC(index, length, count, payload), binary.LittleEndian.Uint32(h[8:]); got != want {
		return nil, 0, fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", want, got)
	}
	return payload, count, nil
}

// checkItems makes sure payload is exactly count length-prefixed items.
func checkItems(payload []byte, count uint32) error {
	for i := uint32(0); i < count; i++ {
		n, k := binary.Uvarint(payload)
		if k <= 0 || n > uint64(len(payload)-k) {
			return fmt.Errorf("item %d: bad length", i)
		}
		payload = payload[k+int(n):]
	}
	if len(payload) != 0 {
		return fmt.Errorf("%d bytes after the last item", len(payload))
	}
	return nil
}

// Pos is the WAL position replay must start from after loading the items.
func (r *Reader) Pos() wal.Position { return r.ft.pos }

// Items is the number of items in the snapshot.
func (r *Reader) Items() uint64 { return r.ft.items }

// Next returns the next item, valid until the next call (for good after
// FreshBlocks), or io.EOF after the last one.
func (r *Reader) Next() ([]byte, error) {
	if r.f == nil {
		return nil, errors.New("snapshot: Next on a closed reader")
	}
	for r.left == 0 {
		if r.index == r.ft.blocks {
			if r.stream && (r.off != r.ft.dataLen || r.items != r.ft.items) {
				return nil, r.corrupt("found %d items in %d of %d data bytes, footer says %d items", r.items, r.off, r.ft.dataLen, r.ft.items)
			}
			return nil, io.EOF
		}
		// Checked by Open; checked again so a file changed since then
		// yields an error, never a wrong item.
		if r.off >= r.ft.dataLen {
			return nil, r.corrupt("data ends before block %d of %d (or the file changed after Open)", r.index, r.ft.blocks)
		}
		if r.fresh {
			r.block = nil
			if r.alloc != nil {
				r.block = r.alloc()
			}
		}
		payload, count, err := readBlock(r.br, r.index, r.ft.dataLen-r.off, &r.block)
		if err == nil {
			err = checkItems(payload, count)
		}
		if err != nil {
			return nil, r.corrupt("block %d at offset %d: %v", r.index, r.off, err)
		}
		r.rest, r.left = payload, count
		r.blockOff = r.off
		r.index++
		r.off += blockHeaderSize + uint64(len(payload))
	}
	n, k := binary.Uvarint(r.rest)
	item := r.rest[k : k+int(n)]
	r.rest = r.rest[k+int(n):]
	r.left--
	r.items++
	return item, nil
}

// Where names the block the last item came from: its number and the file
// offset of its header, for errors about an item's content.
func (r *Reader) Where() (block uint64, offset uint64) {
	if r.index == 0 {
		return 0, 0
	}
	return r.index - 1, r.blockOff
}

// Close releases the file.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
