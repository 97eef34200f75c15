package wal

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Verify and Dump are offline tools (`chronoq wal verify`, `wal dump`):
// they only read, so they can run against a copy or a stopped server's
// directory. Run against a live log they may report the segment being
// written as torn.

// VerifyReport is what Verify found.
type VerifyReport struct {
	Dir      string
	Segments []SegmentReport
	Records  int   // valid frames replay would deliver from the oldest segment
	Bytes    int64 // their body bytes
	TornTail bool
	TornAt   Position
	// Corruptions lists damage that recovery would refuse to skip without
	// ForceRecovery. Empty means the log is sound.
	Corruptions []*CorruptionError
	Leftovers   []string // unfinished segment creations (.tmp) that Open would delete
}

// OK reports whether recovery would succeed without ForceRecovery.
func (r *VerifyReport) OK() bool { return len(r.Corruptions) == 0 }

// SegmentReport describes one segment file.
type SegmentReport struct {
	Number      uint32
	Path        string
	FileSize    int64
	HeaderError string // empty when the header is valid
	Salt        uint32
	Capacity    int64
	Created     time.Time
	Records     int
	Bytes       int64
	ValidEnd    int64 // offset after the last frame recovery would keep
	BadRegions  int
	TornAt      int64 // -1 unless this segment ends in a torn tail
	TornFrames  int   // intact frames after the tear, discarded with it
}

type verifiedSeg struct {
	rep  *SegmentReport
	scan *segScan
	hdr  bool
}

// Verify checks every segment in dir — header, frame CRCs, numbering, torn
// tail — prints a human report to w, and returns an error wrapping
// ErrCorrupt when it finds damage that recovery would not repair on its own
// (a torn tail alone is not an error: recovery truncates it).
func Verify(dir string, w io.Writer) (VerifyReport, error) {
	return VerifyCounting(dir, w, nil)
}

// VerifyCounting is Verify with a JobCounter, so that each problem also
// says how many job records it would cost.
func VerifyCounting(dir string, w io.Writer, count JobCounter) (VerifyReport, error) {
	rep := VerifyReport{Dir: dir}
	nums, leftovers, err := readSegmentNames(dir)
	if err != nil {
		return rep, err
	}
	rep.Leftovers = leftovers
	fmt.Fprintf(w, "wal verify %s: %d segment(s)\n", dir, len(nums))

	segs := make([]*verifiedSeg, len(nums))

	tail := -1
	for i, num := range nums {
		vs, err := verifySegment(dir, num)
		if err != nil {
			return rep, err
		}
		segs[i] = vs
		if !vs.hdr || vs.scan.nonZeroEnd > HeaderSize {
			tail = i
		}
	}

	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			a, b := nums[i-1]+1, nums[i]-1
			rep.Corruptions = append(rep.Corruptions, &CorruptionError{
				File:   filepath.Join(dir, segmentName(a)),
				Reason: fmt.Sprintf("segment file missing (segments %d to %d are absent)", a, b),
				From:   Position{Segment: a}, To: Position{Segment: b + 1, Offset: HeaderSize},
				Frames: -1, Jobs: -1,
			})
		}
	}

	for i, vs := range segs {
		sr := vs.rep
		rep.Segments = append(rep.Segments, *sr)
		sr = &rep.Segments[len(rep.Segments)-1]
		if !vs.hdr {
			rep.Corruptions = append(rep.Corruptions, &CorruptionError{
				File: sr.Path, Reason: "unreadable segment header: " + sr.HeaderError,
				From: Position{Segment: sr.Number}, To: Position{Segment: sr.Number + 1, Offset: HeaderSize},
				Frames: -1, Jobs: -1,
			})
			continue
		}
		sc := vs.scan
		cut := len(sc.regions)
		if i == tail {
			cut = sc.tornFrom()
		}
		if cut > 0 {
			// Segments are not kept in memory; read the damaged one again
			// to count what the damage holds.
			data, err := os.ReadFile(sr.Path)
			if err != nil {
				return rep, fmt.Errorf("wal: read %s: %w", sr.Path, err)
			}
			for j := 0; j < cut; j++ {
				rep.Corruptions = append(rep.Corruptions, regionError(sr.Path, sr.Number, data, sc, j, count))
			}
		}
		sr.ValidEnd = sc.validEnd()
		for k := 0; k < len(sc.runs); k++ {
			if k > cut {
				break
			}
			sr.Records += sc.runs[k].frames
			sr.Bytes += sc.runs[k].bodyBytes
		}
		if cut < len(sc.regions) {
			sr.TornAt = sc.regions[cut].start
			sr.TornFrames = sc.framesAfter(cut)
			sr.ValidEnd = sr.TornAt
			rep.TornTail = true
			rep.TornAt = Position{Segment: sr.Number, Offset: uint32(sr.TornAt)}
		}
		rep.Records += sr.Records
		rep.Bytes += sr.Bytes
	}

	for _, sr := range rep.Segments {
		name := filepath.Base(sr.Path)
		if sr.HeaderError != "" {
			fmt.Fprintf(w, "  %s  size %d  CORRUPT: unreadable header: %s\n", name, sr.FileSize, sr.HeaderError)
			continue
		}
		status := "ok"
		switch {
		case sr.BadRegions > 0 && sr.TornAt < 0:
			status = fmt.Sprintf("CORRUPT: %d bad region(s)", sr.BadRegions)
		case sr.TornAt >= 0 && sr.BadRegions > 1:
			status = fmt.Sprintf("CORRUPT: %d bad region(s) before a torn tail at offset %d", sr.BadRegions-1, sr.TornAt)
		case sr.TornAt >= 0:
			status = fmt.Sprintf("torn tail at offset %d (recovery truncates it", sr.TornAt)
			if sr.TornFrames > 0 {
				status += fmt.Sprintf(", dropping %d frame(s) of the incomplete write", sr.TornFrames)
			}
			status += ")"
		}
		fmt.Fprintf(w, "  %s  size %d  salt %#08x  records %d  valid to %d  %s\n",
			name, sr.FileSize, sr.Salt, sr.Records, sr.ValidEnd, status)
	}
	for _, ce := range rep.Corruptions {
		fmt.Fprintf(w, "  problem: %s\n", strings.TrimPrefix(ce.Error(), "wal: "))
	}
	for _, name := range rep.Leftovers {
		fmt.Fprintf(w, "  note: %s is an unfinished segment creation; opening the log deletes it\n", name)
	}
	fmt.Fprintf(w, "summary: %d segment(s), %d record(s), %d body bytes", len(rep.Segments), rep.Records, rep.Bytes)
	if rep.TornTail {
		fmt.Fprintf(w, ", torn tail at %v", rep.TornAt)
	}
	if rep.OK() {
		fmt.Fprintf(w, "\nresult: OK\n")
		return rep, nil
	}
	fmt.Fprintf(w, ", %d problem(s)\nresult: CORRUPT (recovery stops unless forced; forced recovery skips the damaged records)\n", len(rep.Corruptions))
	return rep, fmt.Errorf("wal: verify %s: %d problem(s), first: %s: %w", dir, len(rep.Corruptions), rep.Corruptions[0].Error(), ErrCorrupt)
}

func verifySegment(dir string, num uint32) (*verifiedSeg, error) {
	path := filepath.Join(dir, segmentName(num))
	sr := &SegmentReport{Number: num, Path: path, TornAt: -1}
	vs := &verifiedSeg{rep: sr}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("wal: stat %s: %w", path, err)
	}
	sr.FileSize = st.Size()
	if st.Size() > maxSegmentSize {
		sr.HeaderError = errTooLarge.Error()
		return vs, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	h, err := decodeHeader(data)
	if err == nil && h.number != num {
		err = fmt.Errorf("header belongs to segment %d", h.number)
	}
	if err != nil {
		sr.HeaderError = err.Error()
		return vs, nil
	}
	vs.hdr = true
	sr.Salt = h.salt
	sr.Capacity = int64(h.capacity)
	sr.Created = time.Unix(0, h.createdNs)
	vs.scan = scanSegment(data, HeaderSize, h.salt)
	sr.BadRegions = len(vs.scan.regions)
	return vs, nil
}

func regionError(path string, num uint32, data []byte, sc *segScan, j int, count JobCounter) *CorruptionError {
	reg := sc.regions[j]
	ce := &CorruptionError{File: path, Offset: reg.start, From: Position{Segment: num, Offset: uint32(reg.start)}}
	ce.Frames, ce.Jobs = countRegion(data, reg, count)
	switch {
	case reg.damagedFrame:
		word := binary.LittleEndian.Uint32(data[reg.start:])
		ce.Reason = fmt.Sprintf("a complete frame of %d body bytes fails its checksum (its declared length is present and no sector of it is unwritten, so this is damage to written data, not a torn write)", word&lengthMask)
	case reg.trailing:
		ce.Reason = fmt.Sprintf("%d bytes that are not valid frames at the end of a segment that is followed by more data", reg.end-reg.start)
	default:
		ce.Reason = fmt.Sprintf("%d bytes that are not valid frames, followed by valid frames", reg.end-reg.start)
	}
	if reg.trailing {
		ce.To = Position{Segment: num + 1, Offset: HeaderSize}
	} else {
		ce.To = Position{Segment: num, Offset: uint32(reg.end)}
	}
	return ce
}

// JobCounter says how many job records a record body holds, and whether
// it could tell (the body may be damaged). The log never interprets
// records; the broker supplies this so discard messages can say what was
// lost.
type JobCounter func(body []byte) (jobs int, ok bool)

// countRegion returns the frames of a bad region and the job records of
// those that decode (-1 without a counter).
func countRegion(data []byte, reg badRegion, count JobCounter) (frames, jobs int) {
	if count == nil {
		return regionFrames(data, reg, nil), -1
	}
	frames = regionFrames(data, reg, func(body []byte) {
		if n, ok := count(body); ok {
			jobs += n
		}
	})
	return frames, jobs
}

// countRuns returns the frames and job records of runs (-1 jobs without a
// counter).
func countRuns(data []byte, runs []frameRun, count JobCounter) (frames, jobs int) {
	if count == nil {
		jobs = -1
	}
	for _, r := range runs {
		frames += r.frames
		if count != nil {
			walkRun(data, r, func(_ int64, _ uint32, body []byte) error {
				if n, ok := count(body); ok {
					jobs += n
				}
				return nil
			})
		}
	}
	return frames, jobs
}

// readSegmentNames lists segment numbers and leftover temporary files
// without changing anything.
func readSegmentNames(dir string) ([]uint32, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	var nums []uint32
	var tmps []string
	for _, e := range entries {
		if base, ok := strings.CutSuffix(e.Name(), ".tmp"); ok {
			if _, ok := parseSegmentName(base); ok {
				tmps = append(tmps, e.Name())
			}
			continue
		}
		if n, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	return nums, tmps, nil
}

// Dump prints one line per frame — segment, offset, body length,
// describe(body) — separated by tabs, in log order. Lines starting with '#'
// describe segments and bad regions. describe may be nil (hex preview).
// Frames after a bad region are printed too: Dump shows what is on disk,
// not what recovery would keep.
func Dump(dir string, w io.Writer, describe func(body []byte) string) error {
	if describe == nil {
		describe = hexPreview
	}
	nums, _, err := readSegmentNames(dir)
	if err != nil {
		return err
	}
	for _, num := range nums {
		path := filepath.Join(dir, segmentName(num))
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("wal: stat %s: %w", path, err)
		}
		if st.Size() > maxSegmentSize {
			fmt.Fprintf(w, "# segment %d %s: %v\n", num, path, errTooLarge)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("wal: read %s: %w", path, err)
		}
		h, err := decodeHeader(data)
		if err == nil && h.number != num {
			err = fmt.Errorf("header belongs to segment %d", h.number)
		}
		if err != nil {
			fmt.Fprintf(w, "# segment %d %s: unreadable header: %v\n", num, path, err)
			continue
		}
		fmt.Fprintf(w, "# segment %d %s salt %#08x capacity %d created %s\n",
			num, path, h.salt, h.capacity, time.Unix(0, h.createdNs).UTC().Format(time.RFC3339Nano))
		sc := scanSegment(data, HeaderSize, h.salt)
		for k, run := range sc.runs {
			if k > 0 {
				reg := sc.regions[k-1]
				fmt.Fprintf(w, "# bad region at offset %d, %d bytes\n", reg.start, reg.end-reg.start)
			}
			err := walkRun(data, run, func(off int64, _ uint32, body []byte) error {
				_, err := fmt.Fprintf(w, "%d\t%d\t%d\t%s\n", num, off, len(body), describe(body))
				return err
			})
			if err != nil {
				return err
			}
		}
		if n := len(sc.regions); n > 0 && sc.regions[n-1].trailing {
			reg := sc.regions[n-1]
			fmt.Fprintf(w, "# bad region at offset %d, %d bytes, to the end of the data\n", reg.start, reg.end-reg.start)
		}
	}
	return nil
}

func hexPreview(body []byte) string {
	const n = 32
	if len(body) <= n {
		return hex.EncodeToString(body)
	}
	return hex.EncodeToString(body[:n]) + "..."
}
