package broker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// recover rebuilds the engine: the newest snapshot that validates (else
// the one before, else none), then every log record after its position.
func (b *Broker) recover() error {
	start := time.Now()
	if b.opts.WAL.CountJobs == nil {
		b.opts.WAL.CountJobs = CountJobRecords
	}
	log, err := wal.Open(b.walDir(), b.opts.WAL)
	if err != nil {
		return fmt.Errorf("broker: open log: %w", err)
	}
	b.log = log
	snaps, err := snapshot.List(b.snapDir())
	if err != nil {
		return fmt.Errorf("broker: list snapshots: %w", err)
	}
	var from wal.Position
	b.eng = engine.New(engine.Options{})
	loaded := ""
	for _, s := range snaps {
		eng, _, err := loadSnapshot(s.Path)
		if err != nil {
			b.lg.Warn("snapshot unusable, trying an older one", "file", s.Path, "err", err)
			continue
		}
		b.eng, from, loaded = eng, s.Pos, s.Path
		break
	}
	var decodeErr error
	report, err := log.Replay(from, func(pos wal.Position, body []byte) error {
		ent, err := engine.DecodeEntry(body, pos.Segment, pos.Offset+wal.FrameHeaderSize)
		if err != nil {
			// The frame's CRC matched, so these bytes are what was written:
			// a record this version cannot read is not a torn write.
			decodeErr = fmt.Errorf("record at %s of %s: %w", pos, b.walDir(), err)
			if b.opts.WAL.ForceRecovery {
				b.lg.Warn("skipping undecodable record (--force-recovery)", "pos", pos.String(), "err", err)
				return nil
			}
			return decodeErr
		}
		b.eng.Apply(ent)
		return nil
	})
	if err != nil {
		log.Close()
		return fmt.Errorf("broker: recover: %w", err)
	}
	b.eng.Advance(b.now())
	b.snap.init(b, report)
	b.lg.Info("recovered", "snapshot", loaded, "records", report.Records, "segments", report.Segments,
		"torn_tail", report.TornTail, "jobs", b.eng.Jobs(), "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// CountJobRecords is the log's wal.JobCounter: how many job records
// (changes and deletions) a log record holds, so that messages about
// dropped frames can say how many jobs they cost. A body that does not
// decode (it is damaged) is not counted.
func CountJobRecords(body []byte) (int, bool) {
	ent, err := engine.DecodeEntry(body, 0, 0)
	if err != nil {
		return 0, false
	}
	n := 0
	for i := range ent.Records {
		if k := ent.Records[i].Kind; k == engine.KindJob || k == engine.KindJobDelete {
			n++
		}
	}
	return n, true
}

func loadSnapshot(path string) (*engine.Engine, wal.Position, error) {
	r, err := snapshot.Open(path)
	if err != nil {
		return nil, wal.Position{}, err
	}
	defer r.Close()
	// Decoding and applying overlap: one goroutine reads and decodes the
	// next entries while this one applies, which keeps both cores busy.
	type decoded struct {
		ent *engine.Entry
		err error
	}
	ch := make(chan decoded, 4)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(ch)
		for {
			item, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var d decoded
			if err != nil {
				d.err = err
			} else if d.ent, d.err = engine.DecodeEntry(item, 0, 0); d.err != nil {
				d.err = fmt.Errorf("snapshot %s: %w", path, d.err)
			}
			select {
			case ch <- d:
			case <-stop:
				return
			}
			if d.err != nil {
				return
			}
		}
	}()
	// A job takes at least minJobRecord bytes of a snapshot, which bounds
	// what the snapshot's sizing hint may reserve.
	const minJobRecord = 24
	limit := 0
	if st, err := os.Stat(path); err == nil {
		limit = int(min(st.Size()/minJobRecord, 1<<32-2))
	}
	eng := engine.New(engine.Options{ReserveLimit: limit})
	for d := range ch {
		if d.err != nil {
			return nil, wal.Position{}, d.err
		}
		eng.Apply(d.ent)
	}
	return eng, r.Pos(), nil
}
