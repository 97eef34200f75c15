package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
	"github.com/chronoq/chronoq/internal/wal"
)

// Info describes a complete snapshot file.
type Info struct {
	Path  string
	Pos   wal.Position // replay starts here
	Items uint64
	Size  int64
}

// Writer builds one snapshot. Snapshots are written in the background
// while the broker keeps running, so a Writer is independent of the WAL;
// it is not safe for concurrent use.
type Writer struct {
	dir, final, tmp string
	f               *os.File
	pos             wal.Position
	block           []byte
	blockItems      uint32
	blocks, items   uint64
	written         int64
	wb              *writebacker
	err             error // sticky: after a failed write only Abort makes sense
	finished        bool
}

// writing holds the temporary files of writers in this process, so that
// List, which removes temporary files left by crashes, spares them.
var writing sync.Map // tmp path -> struct{}

// Create starts a snapshot in dir (created if missing) for WAL position
// pos: the snapshot must reflect every record before pos.
func Create(dir string, pos wal.Position) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: create directory %s: %w", dir, err)
	}
	name := Name(pos)
	f, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot: create %s: %w", filepath.Join(dir, name), err)
	}
	writing.Store(f.Name(), struct{}{})
	return &Writer{
		dir: dir, final: filepath.Join(dir, name), tmp: f.Name(), f: f, pos: pos,
		block: make([]byte, 0, BlockSize+binary.MaxVarintLen64),
		wb:    startWriteback(f),
	}, nil
}

// Add appends one item. The item is copied.
func (w *Writer) Add(item []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return errors.New("snapshot: Add after Commit or Abort")
	}
	if len(item) > MaxItemSize {
		return fmt.Errorf("snapshot: item of %d bytes exceeds the maximum of %d", len(item), MaxItemSize)
	}
	if len(w.block) > 0 && len(w.block)+binary.MaxVarintLen64+len(item) > BlockSize {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	w.block = binary.AppendUvarint(w.block, uint64(len(item)))
	w.block = append(w.block, item...)
	w.blockItems++
	w.items++
	if len(w.block) >= BlockSize {
		return w.flushBlock()
	}
	return nil
}

func (w *Writer) flushBlock() error {
	if len(w.block) == 0 {
		return nil
	}
	var h [blockHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(w.block)))
	binary.LittleEndian.PutUint32(h[4:], w.blockItems)
	binary.LittleEndian.PutUint32(h[8:], blockCRC(w.blocks, uint32(len(w.block)), w.blockItems, w.block))
	if err := w.write(h[:]); err != nil {
		return err
	}
	if err := w.write(w.block); err != nil {
		return err
	}
	w.blocks++
	w.blockItems = 0
	if cap(w.block) > 4*BlockSize {
		// An oversized item grew the buffer; do not keep it for the rest
		// of the snapshot.
		w.block = make([]byte, 0, BlockSize+binary.MaxVarintLen64)
	} else {
		w.block = w.block[:0]
	}
	return nil
}

func (w *Writer) write(b []byte) error {
	n, err := w.f.Write(b)
	w.written += int64(n)
	if err != nil {
		w.err = fmt.Errorf("snapshot: write %s: %w", w.tmp, err)
		return w.err
	}
	w.wb.advance(w.written)
	return nil
}

// Commit completes the snapshot: footer, fsync, rename to its final name,
// directory fsync. On error the temporary file is removed.
func (w *Writer) Commit() (Info, error) {
	if w.finished {
		return Info{}, errors.New("snapshot: Commit after Commit or Abort")
	}
	fail := func(err error) (Info, error) {
		w.Abort()
		return Info{}, err
	}
	if w.err != nil {
		return fail(w.err)
	}
	if err := w.flushBlock(); err != nil {
		return fail(err)
	}
	ft := footer{pos: w.pos, items: w.items, blocks: w.blocks, dataLen: uint64(w.written), createdNs: time.Now().UnixNano()}
	if err := w.write(ft.encode()); err != nil {
		return fail(err)
	}
	w.wb.stop()
	if err := w.f.Sync(); err != nil {
		return fail(fmt.Errorf("snapshot: fsync %s: %w", w.tmp, err))
	}
	if err := w.f.Close(); err != nil {
		return fail(fmt.Errorf("snapshot: close %s: %w", w.tmp, err))
	}
	if err := os.Rename(w.tmp, w.final); err != nil {
		return fail(fmt.Errorf("snapshot: rename %s: %w", w.tmp, err))
	}
	w.finished = true
	writing.Delete(w.tmp)
	if err := datadir.SyncDir(w.dir); err != nil {
		return Info{}, fmt.Errorf("snapshot: %s written but not durable: %w", w.final, err)
	}
	return Info{Path: w.final, Pos: w.pos, Items: w.items, Size: w.written}, nil
}

// Abort discards the snapshot. It is safe to call after Commit failed and
// is a no-op after Commit succeeded.
func (w *Writer) Abort() error {
	if w.finished {
		return nil
	}
	w.finished = true
	w.wb.stop()
	w.f.Close()
	defer writing.Delete(w.tmp)
	if err := os.Remove(w.tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot: remove %s: %w", w.tmp, err)
	}
	return nil
}
