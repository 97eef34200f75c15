package datadir

import (
	"io"
	"os"
)

// Reading a data file in the background — a log segment's check, the
// read-ahead of the segment compaction empties, a far bucket, a backup —
// must not hold up the log's fdatasync, which every acknowledgement waits
// for. Through the page cache a large read becomes requests of up to the
// device's request size (4 MiB on the VMs of docs/benchmarks.md), and the
// kernel's read-ahead adds more (8 MiB there); a commit's write and cache
// flush queue behind them. bench/syncstall measured it: a 64 MiB segment
// read every 500 ms in 1 MiB reads took the fdatasync p99.9 from 0.5 ms to
// 11–13 ms (max 12–23 ms); the same read in 128 KiB reads with
// read-ahead off kept it at 0.6 ms (max 1.3–1.8 ms), at ~600 MB/s.
//
// Turning read-ahead off for a file (posix_fadvise RANDOM) is not always
// enough: Linux 6.x still starts read-ahead when a read reaches a page
// that an earlier read through another descriptor marked for it, and from
// there it grows to full size for the rest of the file. So a reader that
// wants the pages cached drops what is cached first (DropCached), a
// reader that does not (a check, a backup) reads past the cache
// (OpenUncached, O_DIRECT), and the log's payload reads, point reads that
// read-ahead does not help, turn it off too (NoReadAhead), so that they
// neither queue large reads nor leave marks.

// BackgroundChunk is the most a background read asks of the disk at once.
const BackgroundChunk = 128 << 10

// directAlign is the alignment O_DIRECT asks of offsets, lengths and
// memory: a page covers every logical block size in use.
const directAlign = 4096

// BackgroundFile is a data file opened for reading in the background: no
// read asks the disk for more than BackgroundChunk at once, and the
// kernel adds no read-ahead.
type BackgroundFile struct {
	f      *os.File
	direct bool
	buf    []byte // direct: an aligned chunk
	pos    int64  // Read's offset
}

// OpenBackground opens path for reading in the background through the
// page cache: what it reads stays cached for the readers that follow.
func OpenBackground(path string) (*BackgroundFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	NoReadAhead(f)
	return &BackgroundFile{f: f}, nil
}

// NoReadAhead turns the kernel's read-ahead off for f, so that each read
// asks the disk for its own pages and no more, and leaves no page marked
// to start read-ahead for another reader of the file (see above). It is a
// hint: where the kernel refuses it, reads still work, in larger pieces.
func NoReadAhead(f *os.File) { _ = noReadAhead(f) }

// OpenUncached opens path for reading in the background past the page
// cache (O_DIRECT) where the filesystem allows it, as OpenBackground where
// it does not (tmpfs): for bytes read once, which should neither wait
// behind read-ahead nor push the log's recent pages out of the cache.
func OpenUncached(path string) (*BackgroundFile, error) {
	if f, err := openDirect(path); err == nil {
		return &BackgroundFile{f: f, direct: true, buf: aligned(BackgroundChunk)}, nil
	} else if os.IsNotExist(err) {
		return nil, err
	}
	return OpenBackground(path)
}

// DropCached drops the file's cached pages that are clean, so the reads
// that follow find no page marked for read-ahead. A hint, as NoReadAhead.
func (b *BackgroundFile) DropCached() { _ = dropCached(b.f) }

// Read reads from where the last Read ended, at most BackgroundChunk bytes.
func (b *BackgroundFile) Read(p []byte) (int, error) {
	n, err := b.ReadAt(p[:min(len(p), BackgroundChunk)], b.pos)
	b.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt fills p from off, one BackgroundChunk at a time; it follows the
// io.ReaderAt contract.
func (b *BackgroundFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		var k int
		var err error
		if b.direct {
			k, err = b.readDirect(p[n:], off+int64(n))
		} else {
			k, err = b.f.ReadAt(p[n:n+min(len(p)-n, BackgroundChunk)], off+int64(n))
		}
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readDirect reads one aligned chunk holding off and copies what p wants
// of it.
func (b *BackgroundFile) readDirect(p []byte, off int64) (int, error) {
	start := off &^ (directAlign - 1)
	skip := int(off - start)
	k, err := b.f.ReadAt(b.buf, start)
	if k <= skip {
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	n := copy(p, b.buf[skip:k])
	if n < len(p) && k < len(b.buf) {
		// a short read of a regular file is its end
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return n, nil
}

// Stat describes the file.
func (b *BackgroundFile) Stat() (os.FileInfo, error) { return b.f.Stat() }

// Close closes the file.
func (b *BackgroundFile) Close() error { return b.f.Close() }

// Copy copies what r reads to w in BackgroundChunk pieces; r is usually a
// section of a BackgroundFile.
func Copy(w io.Writer, r io.Reader) (int64, error) {
	return io.CopyBuffer(w, onlyReader{r}, make([]byte, BackgroundChunk))
}

// onlyReader hides everything but Read, so io.CopyBuffer uses the buffer
// instead of the source's WriteTo or the destination's ReadFrom.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// aligned returns n bytes starting at a multiple of directAlign.
func aligned(n int) []byte {
	b := make([]byte, n+directAlign)
	o := int(addr(b) & (directAlign - 1))
	if o != 0 {
		o = directAlign - o
	}
	return b[o : o+n : o+n]
}
