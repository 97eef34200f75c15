package farstore

import (
	"os"
	"path/filepath"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Bucket bytes are written into the page cache. Left there, the kernel's
// flusher writes back whatever is older than 30 s every 5 s: during a far
// drain tens to hundreds of MB at once, and the log's fdatasyncs queue
// behind them (put max ~100 ms, docs/benchmarks.md "Far buckets written
// back as they grow"). WriteBack hands them to the disk at its pace
// instead, and SyncFiles does the same before its syncfs.

// writebackChunk is how many bytes WriteBack has in the disk's queue at
// most; writebackFiles bounds the descriptors it holds meanwhile (bucket
// appends are a few KB each, spread over many files).
const (
	writebackChunk = 1 << 20
	writebackFiles = 32
)

// Range is the bytes [From, To) of bucket file Start of generation Gen.
type Range struct {
	Start int64
	Gen   uint32
	From  int64
	To    int64
}

// WriteBack hands ranges of bucket files in dir to the kernel's write-back
// and waits for them, keeping at most writebackChunk bytes and
// writebackFiles files in flight. It makes nothing durable (SyncFiles
// does): it leaves the sync, and the flusher, little to write. Files that
// are gone are skipped; errors are left to the sync that follows.
func WriteBack(dir string, ranges []Range) {
	var p pacer
	for _, r := range ranges {
		p.add(filepath.Join(dir, Name(r.Start, r.Gen)), r.From, r.To)
	}
	p.wait(nil)
}

// writeBackFn is datadir.WriteBack (a variable so a test can watch the
// pacing).
var writeBackFn = datadir.WriteBack

// pacer hands byte ranges of files to write-back a chunk at a time.
type pacer struct {
	flight []span // handed over, not yet waited for
	bytes  int64  // their total
	files  []*os.File
}

type span struct {
	f      *os.File
	off, n int64
}

// add hands [from, to) of the file at path over, in pieces of at most
// writebackChunk, waiting for what is in flight whenever a chunk's worth
// or writebackFiles files are.
func (p *pacer) add(path string, from, to int64) {
	if to <= from {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	p.files = append(p.files, f)
	for off := from; off < to; {
		n := min(to-off, writebackChunk-p.bytes)
		writeBackFn(f, 0, 0, off, n)
		p.flight = append(p.flight, span{f, off, n})
		p.bytes += n
		off += n
		if p.bytes >= writebackChunk || len(p.files) >= writebackFiles {
			p.wait(f)
		}
	}
}

// wait waits until everything in flight is written and closes the files
// but keep.
func (p *pacer) wait(keep *os.File) {
	for _, s := range p.flight {
		writeBackFn(s.f, s.off, s.n, 0, 0)
	}
	clear(p.flight)
	p.flight, p.bytes = p.flight[:0], 0
	kept := p.files[:0]
	for _, f := range p.files {
		if f == keep {
			kept = append(kept, f)
			continue
		}
		f.Close()
	}
	clear(p.files[len(kept):])
	p.files = kept
}
