package broker

import (
	"errors"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// logSink is the engine's Sink: it encodes each entry and appends it to the
// log's batch buffer, telling the entry where its blobs will live. Nothing
// reaches the disk until the loop commits the batch.
type logSink struct {
	b       *Broker
	buf     []byte
	pending bool
	written int64 // bytes appended since the last snapshot began
	entries int   // entries and bytes in the batch being built
	bytes   int
}

func (s *logSink) Append(ent *engine.Entry) error {
	if p := s.b.failed.Load(); p != nil {
		return unavailable("log failed earlier: %v", *p)
	}
	s.buf = ent.Encode(s.buf[:0])
	pos, err := s.b.log.Append(s.buf)
	if err != nil {
		if errors.Is(err, wal.ErrNoSpace) {
			return &engine.Error{Code: engine.CodeUnavailable, Message: "insufficient storage: the disk is full; nothing was written"}
		}
		if errors.Is(err, wal.ErrFailed) {
			s.b.fail(err)
		}
		return unavailable("log append failed: %v", err)
	}
	ent.Locate(pos.Segment, pos.Offset+wal.FrameHeaderSize)
	s.b.far.noteFrame(pos, len(s.buf))
	s.pending = true
	n := len(s.buf) + wal.FrameHeaderSize
	s.written += int64(n)
	s.entries++
	s.bytes += n
	return nil
}
