package wal

import (
	"errors"
	"fmt"
	"os"

	"github.com/chronoq/chronoq/internal/datadir"
)

// Creating a segment means fallocate, fsync of the new file, rename and a
// directory fsync: several journal commits, tens of milliseconds on a busy
// disk. Done inside roll, that stalls every request of the batch that
// crosses a segment boundary. So right after each roll a goroutine creates
// the next segment — complete, durable, under its final name — and the
// next roll just starts using it. Being off the request path, it can also
// write the segment full of zeros, so commits into it never convert
// unwritten extents (createSegment says why that matters). It does so only
// after a segment filled up: the segment prepared when a new log creates its
// first one is fallocate-only, so a server or test that never fills a
// segment never writes 64 MiB of zeros.
//
// A prepared segment that is never used is an empty segment at the end of
// the log, which recovery accepts (and Close deletes it). Errors from the
// preparation are not reported: roll retries synchronously and reports
// them there (ErrNoSpace included), unless the preparation failed the log.

type preparedSeg struct {
	seg *writeSeg
	err error
}

// startPrepare creates the next segment in the background; zeroFill is
// passed on to createSegment.
func (l *Log) startPrepare(zeroFill bool) {
	if l.noPrepare || l.prepCh != nil || l.nextNum == 0 {
		return
	}
	ch := make(chan preparedSeg, 1)
	l.prepCh = ch
	num, size := l.nextNum, l.opts.SegmentSize
	go func() {
		seg, err := l.createSegment(num, size, zeroFill)
		ch <- preparedSeg{seg, err}
	}()
}

// takePrepared returns the prepared segment if there is one and a frame of
// need bytes fits in it, waiting for a preparation still in flight.
func (l *Log) takePrepared(need int64) (*writeSeg, error) {
	if l.prepCh == nil {
		return nil, nil
	}
	p := <-l.prepCh
	l.prepCh = nil
	if p.err != nil {
		if errors.Is(p.err, ErrFailed) {
			return nil, p.err
		}
		return nil, nil
	}
	if p.seg.num != l.nextNum {
		return nil, l.fail(fmt.Errorf("wal: prepared segment %d but segment %d is next", p.seg.num, l.nextNum))
	}
	if HeaderSize+need <= p.seg.capacity {
		return p.seg, nil
	}
	// Too small for this frame: give its number to a segment that fits.
	if err := l.removeUnused(p.seg); err != nil {
		return nil, err
	}
	return nil, nil
}

// discardPrepared removes a prepared segment that was never used.
func (l *Log) discardPrepared() error {
	if l.prepCh == nil {
		return nil
	}
	p := <-l.prepCh
	l.prepCh = nil
	if p.err != nil {
		return nil
	}
	return l.removeUnused(p.seg)
}

func (l *Log) removeUnused(s *writeSeg) error {
	s.f.Close()
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Its number must not be reused while the file exists.
		return l.fail(fmt.Errorf("wal: remove unused segment %s: %w", s.path, err))
	}
	if err := datadir.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("wal: after removing unused segment %s: %w", s.path, err))
	}
	return nil
}
