package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
)

// SyncPolicy says when committed data is made durable.
type SyncPolicy int

const (
	// SyncAlways: Commit returns only after fdatasync. The default.
	SyncAlways SyncPolicy = iota
	// SyncInterval: a background goroutine fdatasyncs every SyncInterval
	// if anything was written; a crash can lose that much.
	SyncInterval
	// SyncNever: only Sync and Close flush; the OS decides the rest.
	SyncNever
)

func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

const (
	DefaultSegmentSize  = 64 << 20
	DefaultSyncInterval = 10 * time.Millisecond
	// keepBufferCap bounds the batch buffer kept between commits; a batch
	// that needed more gets a fresh buffer next time.
	keepBufferCap = 16 << 20
)

// Options configure a Log. The zero value is valid.
type Options struct {
	// SegmentSize is the size segments are preallocated to (default 64 MiB,
	// at most 4 GiB-1). A frame that does not fit an empty segment gets a
	// segment sized to fit it.
	SegmentSize  int64
	Sync         SyncPolicy
	SyncInterval time.Duration // for SyncInterval; default 10ms
	// ForceRecovery makes Replay skip corrupt regions, bad segments and
	// missing segments (counting them) instead of refusing to start.
	ForceRecovery bool
	// CountJobs, when set, lets discard and corruption messages say how
	// many job records the lost frames held.
	CountJobs JobCounter
	Logger    *slog.Logger // default slog.Default()
	// Preallocate and FreeSpace replace fallocate and statfs when set:
	// tests use them to simulate a full disk.
	Preallocate func(f *os.File, size int64) error
	FreeSpace   func(dir string) (int64, error)
	// OnDamage, when set, is called (from the reading goroutine) each time
	// ReadAt refuses damaged bytes, so the caller can count it and retire
	// the data that points there.
	OnDamage func(*DamageError)
	// OnCheckDamage, when set, is called with the bad regions the deferred
	// check of a segment before the replay start found (Log.CheckSegment,
	// or the first payload read from that segment: oldcheck.go), from the
	// goroutine that ran the check; every payload in them is lost.
	OnCheckDamage func([]DamagedRange)
}

// Log is an open write-ahead log.
//
// Open, Replay, Append, Commit, Sync, End and Close belong to one goroutine
// (the broker loop). ReadAt, ReadFrame, Segments, RemoveSegmentsBefore and
// Failed may be called from any goroutine, concurrently with the loop.
type Log struct {
	dir  string
	opts Options
	log  *slog.Logger

	// Owned by the loop goroutine.
	state   int // stateOpen, stateReplayed, stateReplayFailed, stateClosed
	active  *writeSeg
	nextNum uint32
	pending []*pendingWrite
	spare   []byte
	readBuf []byte // replay's segment image, reused across segments

	// checkMu serialises the deferred checks of old segments (oldcheck.go),
	// which share checkBuf.
	checkMu  sync.Mutex
	checkBuf []byte
	initNums []uint32

	failMu  sync.Mutex
	failErr error

	// mu guards the segment table and the read-file cache, shared with
	// ReadAt and RemoveSegmentsBefore callers.
	mu           sync.Mutex
	segs         []segMeta // ascending by number
	removedBelow uint32    // segments numbered below this were removed
	activeNum    uint32    // 0 until a segment is open for writing
	pendingLow   uint32    // lowest segment with buffered frames, 0 if none
	readers      map[uint32]*readFile
	useClock     uint64
	tableClosed  bool
	rawBytes     atomic.Int64 // bytes readRaw read (BytesRead)
	written      atomic.Int64 // bytes Commit and Sync wrote (BytesWritten)

	// syncMu serialises background and explicit syncs with segment rolls.
	syncMu   sync.Mutex
	syncFile *os.File // the active segment's descriptor, for the syncer
	unsynced []uint32 // sealed segments whose data may not be durable yet
	dirty    atomic.Bool
	syncStop chan struct{}
	syncDone chan struct{}

	noPreallocOnce sync.Once

	// Disk-full state, shared with NoSpace callers (readiness checks).
	spaceMu      sync.Mutex
	noSpaceSince time.Time // zero while writes are not refused for space
	noSpaceNeed  int64     // bytes the refused segment needed at least
	noSpaceErr   error
	noSpaceProbe time.Time // last free-space check
	noSpaceCount int64     // appends refused since noSpaceSince
	// spaceProbeEvery is noSpaceProbeEvery; tests shorten it.
	spaceProbeEvery time.Duration

	// The next segment is created in the background while the current
	// one fills, so a roll costs the loop no fallocate and no fsyncs.
	prepCh    chan preparedSeg // result of the preparation in flight, or nil
	noPrepare bool             // tests that inject creation failures set this
}

const (
	stateOpen = iota
	stateReplayed
	stateReplayFailed
	stateClosed
)

type segMeta struct {
	num  uint32
	path string
	size int64 // committed bytes; ReadAt refuses to read past them
	salt uint32
	// marks: frame starts for the checked read walk (readcheck.go).
	marks []uint32
	// unchecked: a segment before the replay start whose frames have not
	// been scanned yet, so it has no marks (oldcheck.go).
	unchecked bool
}

// pendingWrite is the part of the current batch destined for one segment.
type pendingWrite struct {
	seg  *writeSeg
	off  int64
	buf  []byte
	last int // offset in buf of the last frame
}

// Open opens (creating if needed) the log in dir. Replay must be called
// before the first Append.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.SegmentSize < HeaderSize+FrameHeaderSize+1 || opts.SegmentSize > maxSegmentSize {
		return nil, fmt.Errorf("wal: segment size %d out of range [%d, %d]", opts.SegmentSize, HeaderSize+FrameHeaderSize+1, int64(maxSegmentSize))
	}
	if opts.Sync < SyncAlways || opts.Sync > SyncNever {
		return nil, fmt.Errorf("wal: unknown sync policy %d", int(opts.Sync))
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: create directory %s: %w", dir, err)
	}
	l := &Log{dir: dir, opts: opts, log: opts.Logger, readers: map[uint32]*readFile{}, spaceProbeEvery: noSpaceProbeEvery}
	nums, err := listSegments(dir, l.log.Info)
	if err != nil {
		return nil, err
	}
	l.initNums = nums
	for _, n := range nums {
		l.segs = append(l.segs, segMeta{num: n, path: filepath.Join(dir, segmentName(n))})
	}
	return l, nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) writable() error {
	switch l.state {
	case stateClosed:
		return ErrClosed
	case stateOpen:
		return errors.New("wal: Replay must be called before writing")
	case stateReplayFailed:
		return errors.New("wal: replay did not complete; the log cannot be written")
	}
	return l.Failed()
}

// Failed returns nil, or the error that made the log refuse writes.
func (l *Log) Failed() error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return l.failErr
}

// fail makes the log permanently unwritable and returns the error callers
// see, which wraps ErrFailed and the cause.
func (l *Log) fail(cause error) error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	if l.failErr != nil {
		return l.failErr
	}
	l.failErr = fmt.Errorf("%w: %w", ErrFailed, cause)
	l.log.Error("wal: write or sync failed; the log accepts no more writes (restart to recover from disk)", "dir", l.dir, "err", cause)
	return l.failErr
}

// Append buffers body as the next frame and returns the position the frame
// will have; the body starts FrameHeaderSize bytes after it. Nothing reaches
// the disk until Commit. body is copied.
func (l *Log) Append(body []byte) (Position, error) {
	if err := l.writable(); err != nil {
		return Position{}, err
	}
	if len(body) == 0 {
		return Position{}, errors.New("wal: empty record")
	}
	if len(body) > MaxRecordSize {
		return Position{}, fmt.Errorf("wal: record of %d bytes exceeds the maximum of %d", len(body), MaxRecordSize)
	}
	need := int64(FrameHeaderSize + len(body))
	if l.active == nil || l.active.end+need > l.active.capacity {
		if err := l.roll(need); err != nil {
			return Position{}, err
		}
	}
	a := l.active
	var pw *pendingWrite
	if n := len(l.pending); n > 0 && l.pending[n-1].seg == a {
		pw = l.pending[n-1]
	} else {
		pw = &pendingWrite{seg: a, off: a.end, buf: l.spare[:0]}
		l.spare = nil
		if len(l.pending) == 0 {
			l.mu.Lock()
			l.pendingLow = a.num
			l.mu.Unlock()
		}
		l.pending = append(l.pending, pw)
	}
	pos := Position{Segment: a.num, Offset: uint32(a.end)}
	if a.lastMark < 0 || a.end-a.lastMark >= markStride {
		a.lastMark = a.end
		l.mu.Lock()
		if m := l.findSeg(a.num); m != nil {
			m.addMark(a.end)
		}
		l.mu.Unlock()
	}
	pw.last = len(pw.buf)
	pw.buf = appendFrame(pw.buf, a.salt, body, 0)
	a.end += need
	return pos, nil
}

// roll starts a new segment with room for a frame of need bytes.
func (l *Log) roll(need int64) error {
	if l.nextNum == 0 {
		return l.fail(errors.New("wal: segment numbers exhausted"))
	}
	seg, err := l.takePrepared(need)
	if err != nil {
		return err
	}
	if seg == nil {
		if seg, err = l.createFitting(need); err != nil {
			if errors.Is(err, ErrNoSpace) {
				l.noteNoSpace(HeaderSize+need, err)
			}
			return err
		}
	}
	l.noteSpace()
	old := l.active
	l.mu.Lock()
	l.segs = append(l.segs, segMeta{num: seg.num, path: seg.path, size: HeaderSize, salt: seg.salt})
	l.activeNum = seg.num
	l.mu.Unlock()
	l.syncMu.Lock()
	l.syncFile = seg.f
	l.syncMu.Unlock()
	l.active = seg
	l.nextNum++
	if old != nil && !l.hasPending(old) {
		l.seal(old)
	}
	l.startPrepare(old != nil)
	return nil
}

func (l *Log) hasPending(s *writeSeg) bool {
	for _, pw := range l.pending {
		if pw.seg == s {
			return true
		}
	}
	return false
}

// seal closes the write descriptor of a segment that will get no more
// frames. Unless every write to it was fdatasync'd, it is remembered so the
// next background or explicit sync flushes it.
func (l *Log) seal(s *writeSeg) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.opts.Sync != SyncAlways || s.unsyncedWrites {
		l.unsynced = append(l.unsynced, s.num)
	}
	if err := s.f.Close(); err != nil {
		l.log.Warn("wal: close sealed segment", "file", s.path, "err", err)
	}
}

// Commit writes every frame appended since the last Commit: one write per
// segment touched and, under SyncAlways, one fdatasync per segment, in log
// order. An error fails the log for good.
func (l *Log) Commit() error {
	if err := l.writable(); err != nil {
		return err
	}
	return l.flush(l.opts.Sync == SyncAlways)
}

func (l *Log) flush(syncEach bool) error {
	for i, pw := range l.pending {
		setEndOfWrite(pw.buf, pw.last, pw.seg.salt)
		if _, err := pw.seg.f.WriteAt(pw.buf, pw.off); err != nil {
			l.dropPending()
			return l.fail(fmt.Errorf("write %d bytes to %s at offset %d: %w", len(pw.buf), pw.seg.path, pw.off, err))
		}
		l.written.Add(int64(len(pw.buf)))
		if syncEach {
			if err := fdatasync(pw.seg.f); err != nil {
				l.dropPending()
				return l.fail(fmt.Errorf("fdatasync %s: %w", pw.seg.path, err))
			}
		} else {
			pw.seg.unsyncedWrites = true
			l.dirty.Store(true)
		}
		l.mu.Lock()
		if m := l.findSeg(pw.seg.num); m != nil {
			m.size = pw.off + int64(len(pw.buf))
		}
		l.mu.Unlock()
		if pw.seg != l.active {
			l.seal(pw.seg)
		}
		if cap(pw.buf) <= keepBufferCap {
			l.spare = pw.buf[:0]
		}
		l.pending[i] = nil
	}
	l.pending = l.pending[:0]
	l.mu.Lock()
	l.pendingLow = 0
	l.mu.Unlock()
	return nil
}

// dropPending forgets the batch after a failure, closing descriptors of
// sealed segments that were waiting for it.
func (l *Log) dropPending() {
	for _, pw := range l.pending {
		if pw != nil && pw.seg != l.active {
			pw.seg.f.Close()
		}
	}
	clear(l.pending)
	l.pending = l.pending[:0]
}

// Sync writes anything buffered and makes everything written durable,
// whatever the policy.
func (l *Log) Sync() error {
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.flush(l.opts.Sync == SyncAlways); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.syncUnsyncedLocked(); err != nil {
		return l.fail(err)
	}
	l.dirty.Store(false)
	if l.syncFile != nil {
		if err := fdatasync(l.syncFile); err != nil {
			return l.fail(fmt.Errorf("fdatasync %s: %w", l.active.path, err))
		}
	}
	return nil
}

// BytesRead is how many bytes payload reads have read from the segments
// so far (whole checked frames, not just the payloads asked for).
func (l *Log) BytesRead() int64 { return l.rawBytes.Load() }

// BytesWritten is how many bytes of frames the log has written since it
// opened. Safe for concurrent use.
func (l *Log) BytesWritten() int64 { return l.written.Load() }

// End returns the position the next frame will get if it fits in the
// current segment.
func (l *Log) End() Position {
	if l.active == nil {
		return Position{Segment: max(l.nextNum, 1), Offset: HeaderSize}
	}
	return Position{Segment: l.active.num, Offset: uint32(l.active.end)}
}

// Segments describes the live segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, m := range l.segs {
		out[i] = SegmentInfo{Number: m.num, FirstPos: Position{Segment: m.num, Offset: HeaderSize}, Size: m.size, Path: m.path}
	}
	return out
}

// findSeg returns the table entry for num; l.mu must be held.
func (l *Log) findSeg(num uint32) *segMeta {
	lo, hi := 0, len(l.segs)
	for lo < hi {
		m := (lo + hi) / 2
		if l.segs[m].num < num {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(l.segs) && l.segs[lo].num == num {
		return &l.segs[lo]
	}
	return nil
}

// RemoveSegmentsBefore deletes the segments numbered below seg. The segment
// being written, any segment with frames not yet committed, and the newest
// segment (whose number keeps numbering monotonic across restarts) are
// always kept. Safe to call from any goroutine after Replay.
func (l *Log) RemoveSegmentsBefore(seg uint32) error {
	l.mu.Lock()
	if l.tableClosed {
		l.mu.Unlock()
		return ErrClosed
	}
	limit := seg
	if n := len(l.segs); n > 0 {
		limit = min(limit, l.segs[n-1].num)
	}
	if l.activeNum != 0 {
		limit = min(limit, l.activeNum)
	}
	if l.pendingLow != 0 {
		limit = min(limit, l.pendingLow)
	}
	i := 0
	for i < len(l.segs) && l.segs[i].num < limit {
		i++
	}
	victims := slices.Clone(l.segs[:i])
	l.segs = slices.Clone(l.segs[i:])
	if limit > l.removedBelow {
		l.removedBelow = limit
	}
	for _, v := range victims {
		l.dropReaderLocked(v.num)
	}
	l.mu.Unlock()
	if len(victims) == 0 {
		return nil
	}
	// Ascending order: an interrupted removal leaves a shorter prefix
	// missing, never a hole.
	for _, v := range victims {
		if err := os.Remove(v.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: remove segment %s: %w", v.path, err)
		}
	}
	if err := datadir.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: after removing segments: %w", err)
	}
	l.log.Debug("wal: removed segments", "dir", l.dir, "below", limit, "count", len(victims))
	return nil
}

// Crash closes the log the way a crash of the process would leave it:
// frames appended since the last Commit are lost, nothing is synced. It is
// for tests and simulations of crashes.
func (l *Log) Crash() error {
	if l.state == stateClosed {
		return nil
	}
	l.dropPending()
	l.state = stateReplayFailed // Close must not flush or sync
	return l.Close()
}

// Close flushes and syncs what was appended (unless the log failed) and
// releases every file. Further calls return ErrClosed; Close is idempotent.
func (l *Log) Close() error {
	if l.state == stateClosed {
		return nil
	}
	var err error
	if l.state == stateReplayed && l.Failed() == nil {
		err = l.Sync()
	}
	l.stopSyncer()
	if perr := l.discardPrepared(); err == nil {
		err = perr
	}
	l.state = stateClosed
	l.dropPending()
	l.syncMu.Lock()
	if l.active != nil {
		if cerr := l.active.f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("wal: close %s: %w", l.active.path, cerr)
		}
		l.active = nil
	}
	l.syncFile = nil
	l.syncMu.Unlock()
	l.closeReaders()
	return err
}
