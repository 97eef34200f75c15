package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"
)

// RecoveryReport says what Replay read and what it had to repair or skip.
type RecoveryReport struct {
	From     Position // where replay was asked to start
	End      Position // where appends continue
	Segments int      // segment files read
	Records  int      // frames passed to fn
	Bytes    int64    // body bytes passed to fn

	// TornTail: the last write before the crash was incomplete and was cut
	// off at TornAt. TornBytes counts the non-zero bytes discarded,
	// TornFrames the frames of that write discarded (the incomplete one and
	// any intact ones found after it), TornJobs the job records in those of
	// them that decode (-1 without Options.CountJobs). None of them was
	// acknowledged: under SyncAlways a write is answered after its fsync.
	TornTail   bool
	TornAt     Position
	TornBytes  int64
	TornFrames int
	TornJobs   int

	// Only with ForceRecovery: what was skipped as corrupt.
	SkippedBytes    int64
	SkippedRegions  int
	SkippedSegments int // segments whose header could not be read
	MissingSegments int // segment numbers absent from the sequence
	// SkippedFrames and SkippedJobs count, best effort, the frames in the
	// skipped regions and the job records in those that still decode
	// (frames in skipped or missing segments cannot be counted).
	SkippedFrames int
	SkippedJobs   int

	// Damaged lists byte ranges whose content cannot be trusted: what
	// forced recovery skipped, and segments before the replay start whose
	// header is unreadable (their frames are checked after Replay:
	// oldcheck.go). Payloads that live inside them are lost; the caller
	// decides what happens to the jobs that own them.
	Damaged []DamagedRange

	// Problems has one human-readable line per repair or skip.
	Problems []string
	Duration time.Duration
}

// DamagedRange is a span [From, To) of byte offsets in a segment file that
// failed its checks. A whole missing or unreadable segment is [0, MaxUint32).
type DamagedRange struct {
	Segment  uint32
	From, To uint32
	File     string
	Reason   string
}

func (d DamagedRange) String() string {
	return fmt.Sprintf("%s bytes %d-%d: %s", d.File, d.From, d.To, d.Reason)
}

// Repaired reports whether recovery changed or skipped anything.
func (r *RecoveryReport) Repaired() bool { return len(r.Problems) > 0 }

// Replay reads every frame at or after from, in log order, and calls fn
// with its position and body (valid only during the call). It must be
// called once, before the first Append; appends then continue after the
// last valid frame of the last segment. A torn tail is truncated; other
// damage returns a *CorruptionError unless Options.ForceRecovery is set. An
// error from fn stops the replay and is returned as is.
func (l *Log) Replay(from Position, fn func(pos Position, body []byte) error) (RecoveryReport, error) {
	rep := RecoveryReport{From: from}
	if l.opts.CountJobs == nil {
		rep.TornJobs, rep.SkippedJobs = -1, -1
	}
	switch l.state {
	case stateClosed:
		return rep, ErrClosed
	case stateOpen:
	default:
		return rep, errors.New("wal: Replay called more than once")
	}
	l.state = stateReplayFailed
	began := time.Now()
	r := &replayer{l: l, from: from, fn: fn, rep: &rep, force: l.opts.ForceRecovery, count: l.opts.CountJobs}
	err := r.run()
	l.readBuf = nil
	rep.Duration = time.Since(began)
	if err != nil {
		return rep, err
	}
	l.state = stateReplayed
	l.startSyncer()
	rep.End = l.End()
	l.log.Info("wal: replay complete", "dir", l.dir, "from", from.String(), "end", rep.End.String(),
		"segments", rep.Segments, "records", rep.Records, "torn_tail", rep.TornTail, "torn_frames", rep.TornFrames,
		"skipped_regions", rep.SkippedRegions, "skipped_bytes", rep.SkippedBytes, "skipped_frames", rep.SkippedFrames,
		"skipped_jobs", rep.SkippedJobs, "damaged_ranges", len(rep.Damaged), "duration", rep.Duration)
	return rep, nil
}

type replayer struct {
	l     *Log
	from  Position
	fn    func(Position, []byte) error
	rep   *RecoveryReport
	force bool
	count JobCounter

	// cutPath, cutOff: where the last segment's valid data ends, when
	// something after it (a torn tail, or damage forced recovery skipped)
	// must be zeroed before appends continue there.
	cutPath string
	cutOff  int64
}

// tailSeg remembers the last segment read, which becomes the active one.
type tailSeg struct {
	num      uint32
	path     string
	salt     uint32
	capacity int64
	end      int64
}

func (r *replayer) path(num uint32) string { return filepath.Join(r.l.dir, segmentName(num)) }

func (r *replayer) run() error {
	l := r.l
	nums := l.initNums
	from := r.from
	if len(nums) == 0 {
		if from.Segment > 1 || (from.Segment == 1 && from.Offset > HeaderSize) {
			return fmt.Errorf("wal: replay must start at %v but the log in %s has no segments", from, l.dir)
		}
		l.nextNum = 1
		return nil
	}
	last := nums[len(nums)-1]
	if uint64(from.Segment) > uint64(last)+1 || (uint64(from.Segment) == uint64(last)+1 && from.Offset > HeaderSize) {
		return fmt.Errorf("wal: replay must start at %v, beyond the end of the log in %s (last segment %d)", from, l.dir, last)
	}
	if err := r.checkMissing(nums); err != nil {
		return err
	}

	var todo []uint32
	for _, n := range nums {
		if n >= from.Segment {
			todo = append(todo, n)
		} else {
			if err := r.noteUnreplayed(n); err != nil {
				return err
			}
		}
	}

	var tail *tailSeg
	for i, num := range todo {
		t, err := r.replaySegment(num, todo[i+1:])
		if err != nil {
			return err
		}
		tail = t // nil when the segment was skipped
	}

	if r.cutPath != "" {
		if err := truncateTail(r.cutPath, r.cutOff); err != nil {
			return fmt.Errorf("wal: truncate %s at offset %d after its last valid frame: %w", r.cutPath, r.cutOff, err)
		}
	}
	if r.force && (r.rep.SkippedRegions > 0 || r.rep.SkippedSegments > 0 || r.rep.MissingSegments > 0) {
		l.log.Warn("wal: forced recovery skipped damaged data; take a snapshot soon so the damage is never replayed again",
			"dir", l.dir, "skipped_regions", r.rep.SkippedRegions, "skipped_bytes", r.rep.SkippedBytes,
			"skipped_frames", r.rep.SkippedFrames, "skipped_jobs", r.rep.SkippedJobs,
			"skipped_segments", r.rep.SkippedSegments, "missing_segments", r.rep.MissingSegments)
	}

	l.nextNum = last + 1 // 0 after overflow, which roll refuses
	if tail != nil && tail.num == last {
		f, err := os.OpenFile(tail.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("wal: open segment %s for writing: %w", tail.path, err)
		}
		l.active = &writeSeg{num: tail.num, path: tail.path, f: f, salt: tail.salt, capacity: tail.capacity, end: tail.end, lastMark: -1}
		l.mu.Lock()
		l.activeNum = tail.num
		if m := l.findSeg(tail.num); m != nil && len(m.marks) > 0 {
			l.active.lastMark = int64(m.marks[len(m.marks)-1])
		}
		l.mu.Unlock()
		l.syncMu.Lock()
		l.syncFile = f
		l.syncMu.Unlock()
	}
	return nil
}

// checkMissing reports holes in the segment sequence that replay would
// have to cross. Holes entirely before from do not matter: the snapshot
// that from comes from covers them.
func (r *replayer) checkMissing(nums []uint32) error {
	from := r.from
	type hole struct{ a, b uint32 }
	var holes []hole
	// Replaying "everything" (the zero position) needs segment 1: a log
	// whose prefix was removed is only complete together with a snapshot.
	if first := max(from.Segment, 1); first < nums[0] {
		holes = append(holes, hole{first, nums[0] - 1})
	}
	for i := 1; i < len(nums); i++ {
		a, b := nums[i-1]+1, nums[i]-1
		if nums[i] != nums[i-1]+1 && b >= from.Segment {
			holes = append(holes, hole{max(a, from.Segment), b})
		}
	}
	for _, h := range holes {
		lost := maxPos(from, Position{Segment: h.a})
		ce := &CorruptionError{
			File:   r.path(h.a),
			Reason: fmt.Sprintf("segment file missing (segments %d to %d are absent)", h.a, h.b),
			From:   lost,
			To:     Position{Segment: h.b + 1, Offset: HeaderSize},
			Frames: -1, Jobs: -1,
		}
		if !r.force {
			return ce
		}
		r.rep.MissingSegments += int(h.b - h.a + 1)
		r.problem(ce.Error())
		for n := uint64(h.a); n <= uint64(h.b); n++ {
			r.damaged(uint32(n), 0, math.MaxUint32, "segment file missing")
		}
	}
	return nil
}

func maxPos(a, b Position) Position {
	if a.Less(b) {
		return b
	}
	return a
}

func (r *replayer) problem(msg string) {
	r.rep.Problems = append(r.rep.Problems, msg)
}

func (r *replayer) damaged(seg uint32, from, to int64, reason string) {
	r.rep.Damaged = append(r.rep.Damaged, DamagedRange{
		Segment: seg, From: uint32(min(max(from, 0), math.MaxUint32)), To: uint32(min(max(to, 0), math.MaxUint32)),
		File: r.path(seg), Reason: reason,
	})
}

// noteUnreplayed enters a segment before the replay start in the table
// without reading it: its records are not replayed (the snapshot covers
// them), but live jobs' payloads may still be read from it. Only its header
// is read here (a few bytes; an unreadable one makes the whole segment
// damaged, reported in RecoveryReport.Damaged as before). Its frames are
// checked later, by Log.CheckSegment or by the first payload read from it
// (oldcheck.go), which finds the read marks and reports bad regions through
// Options.OnCheckDamage: reading and checking every old segment at start
// cost 12.6 s of a 56 s restart at 100 M jobs (docs/benchmarks.md).
func (r *replayer) noteUnreplayed(num uint32) error {
	l := r.l
	path := r.path(num)
	size, h, herr, err := readHeaderOnly(path, num)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("wal: read segment %s: %w", path, err)
	}
	if herr != nil {
		r.damaged(num, 0, math.MaxUint32, "unreadable segment header: "+herr.Error())
		l.log.Error("wal: segment before the snapshot position has an unreadable header; payloads stored in it are lost",
			"file", path, "err", herr)
		return nil
	}
	l.mu.Lock()
	if m := l.findSeg(num); m != nil {
		m.size, m.salt, m.marks, m.unchecked = size, h.salt, nil, true
	}
	l.mu.Unlock()
	return nil
}

// readSegment reads a whole segment file into the reusable buffer; a file
// larger than this package writes is read only as far as its header, which
// is enough to report it.
func (r *replayer) readSegment(path string) ([]byte, error) {
	data, size, err := readWhole(path, &r.l.readBuf, maxSegmentSize)
	if err != nil {
		return nil, err
	}
	if size > maxSegmentSize {
		return data[:min(int64(len(data)), HeaderSize)], errTooLarge
	}
	return data, nil
}

var errTooLarge = errors.New("segment file larger than 4 GiB")

// isTail reports whether every segment in rest is empty (a valid header and
// nothing else), which makes the segment before them the end of the log.
// Such empty segments exist when a crash came after a roll created the next
// segment but before the batch reached the previous one.
func (r *replayer) isTail(rest []uint32) (bool, error) {
	for _, num := range rest {
		data, err := os.ReadFile(r.path(num))
		if err != nil {
			return false, fmt.Errorf("wal: read segment %s: %w", r.path(num), err)
		}
		h, err := decodeHeader(data)
		if err != nil || h.number != num || nonZeroEnd(data, HeaderSize) != HeaderSize {
			return false, nil
		}
	}
	return true, nil
}

func (r *replayer) replaySegment(num uint32, rest []uint32) (*tailSeg, error) {
	l := r.l
	path := r.path(num)
	data, err := r.readSegment(path)
	if err != nil && !errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("wal: read segment %s: %w", path, err)
	}
	r.rep.Segments++
	var h segmentHeader
	herr := err
	if herr == nil {
		h, herr = decodeHeader(data)
		if herr == nil && h.number != num {
			herr = fmt.Errorf("header belongs to segment %d", h.number)
		}
	}
	if herr != nil {
		if errors.Is(herr, errUnsupportedVersion) {
			return nil, fmt.Errorf("wal: segment %s: %w", path, herr)
		}
		ce := &CorruptionError{
			File: path, Reason: "unreadable segment header: " + herr.Error(),
			From: maxPos(r.from, Position{Segment: num}), To: Position{Segment: num + 1, Offset: HeaderSize},
			Frames: -1, Jobs: -1,
		}
		if !r.force {
			return nil, ce
		}
		r.damaged(num, 0, math.MaxUint32, "unreadable segment header")
		r.rep.SkippedSegments++
		r.rep.SkippedBytes += int64(len(data))
		r.problem(ce.Error())
		l.log.Warn("wal: skipping segment with unreadable header", "file", path, "err", herr)
		return nil, nil
	}

	sc := scanSegment(data, HeaderSize, h.salt)
	cut := len(sc.regions) // regions[:cut] are corrupt, regions[cut] starts a torn tail
	tailAfter := false
	if len(sc.regions) > 0 {
		tail, err := r.isTail(rest)
		if err != nil {
			return nil, err
		}
		tailAfter = tail
		if tail {
			cut = sc.tornFrom()
		}
		if cut > 0 && !r.force {
			return nil, regionError(path, num, data, sc, 0, r.count)
		}
	}
	validEnd := sc.validEnd()
	if cut < len(sc.regions) {
		validEnd = sc.regions[cut].start
	}

	lo := int64(HeaderSize)
	if num == r.from.Segment && int64(r.from.Offset) > lo {
		lo = int64(r.from.Offset)
		if err := r.checkFrom(path, data, sc, cut, lo, validEnd); err != nil {
			return nil, err
		}
	}

	for k := 0; k <= cut && k < len(sc.runs); k++ {
		err := walkRun(data, sc.runs[k], func(off int64, _ uint32, body []byte) error {
			if off < lo {
				return nil
			}
			r.rep.Records++
			r.rep.Bytes += int64(len(body))
			return r.fn(Position{Segment: num, Offset: uint32(off)}, body)
		})
		if err != nil {
			return nil, err
		}
	}

	for j := 0; j < cut; j++ {
		reg := sc.regions[j]
		r.rep.SkippedRegions++
		r.rep.SkippedBytes += reg.end - reg.start
		ce := regionError(path, num, data, sc, j, r.count)
		r.rep.SkippedFrames += ce.Frames
		if ce.Jobs >= 0 && r.rep.SkippedJobs >= 0 {
			r.rep.SkippedJobs += ce.Jobs
		}
		end := reg.end
		if reg.trailing {
			end = int64(len(data))
			if tailAfter {
				// The log's data ends here and appends continue after it:
				// clear the damage, or a later write would leave part of
				// it behind the new frames.
				r.cutPath, r.cutOff = path, reg.start
			}
		}
		r.damaged(num, reg.start, end, "skipped by forced recovery: "+ce.Reason)
		r.problem("skipped: " + ce.Error())
		l.log.Warn("wal: forced recovery skipped a corrupt region", "file", path, "offset", reg.start, "bytes", reg.end-reg.start,
			"discarded_frames", ce.Frames, "discarded_jobs", ce.Jobs, "reason", ce.Reason)
	}
	if cut < len(sc.regions) {
		reg := sc.regions[cut]
		r.cutPath, r.cutOff = path, reg.start
		r.rep.TornTail = true
		r.rep.TornAt = Position{Segment: num, Offset: uint32(reg.start)}
		r.rep.TornBytes = sc.nonZeroEnd - reg.start
		frames, jobs := 0, 0
		if r.count == nil {
			jobs = -1
		}
		for j := cut; j < len(sc.regions); j++ {
			f, n := countRegion(data, sc.regions[j], r.count)
			frames += f
			if jobs >= 0 {
				jobs += n
			}
		}
		f, n := countRuns(data, sc.runs[cut+1:], r.count)
		frames += f
		if jobs >= 0 {
			jobs += n
		}
		r.rep.TornFrames, r.rep.TornJobs = frames, jobs
		msg := fmt.Sprintf("torn tail in %s at byte offset %d (position %v): %d bytes of an incomplete write discarded, %d frame(s)",
			path, reg.start, r.rep.TornAt, r.rep.TornBytes, frames)
		if jobs >= 0 {
			msg += fmt.Sprintf(" holding at least %d job record(s)", jobs)
		}
		msg += " (never acknowledged: a write is answered only after its fsync)"
		r.problem(msg)
		l.log.Warn("wal: truncating torn tail", "file", path, "offset", reg.start,
			"discarded_bytes", r.rep.TornBytes, "discarded_frames", frames, "discarded_jobs", jobs)
	}

	kept := sc.runs
	if cut+1 < len(kept) {
		kept = kept[:cut+1]
	}
	marks := markRuns(data, kept)
	l.mu.Lock()
	if m := l.findSeg(num); m != nil {
		m.size, m.salt, m.marks = validEnd, h.salt, marks
	}
	l.mu.Unlock()
	capacity := min(max(int64(h.capacity), int64(len(data)), validEnd), maxSegmentSize)
	return &tailSeg{num: num, path: path, salt: h.salt, capacity: capacity, end: validEnd}, nil
}

// checkFrom makes sure the replay start lands on a frame boundary: a
// snapshot position that is past the valid data means the log lost records
// the snapshot already reflects, and appending there would reuse their
// positions.
func (r *replayer) checkFrom(path string, data []byte, sc *segScan, cut int, lo, validEnd int64) error {
	if lo > validEnd {
		return fmt.Errorf("wal: replay must start at %v but the valid data of %s ends at byte offset %d: the log is missing records that precede the start position", r.from, path, validEnd)
	}
	if lo == validEnd || r.force {
		return nil
	}
	found := false
	for k := 0; k <= cut && k < len(sc.runs) && !found; k++ {
		walkRun(data, sc.runs[k], func(off int64, _ uint32, _ []byte) error {
			if off == lo {
				found = true
				return io.EOF
			}
			return nil
		})
	}
	if !found {
		return fmt.Errorf("wal: replay start %v is not the start of a frame in %s", r.from, path)
	}
	return nil
}
