package wal

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// countByte is a JobCounter for tests: a body's first byte is its job count.
func countByte(b []byte) (int, bool) { return int(b[0]), true }

// The last record of the log is complete — its declared length is present
// and zeros follow it — but one byte changed: damage to acknowledged data.
// Recovery refuses (naming file and offset); forced recovery drops it and
// counts the frame and its jobs; a torn write of the same record is still
// truncated silently.
func TestDamagedLastFrameIsNotATornTail(t *testing.T) {
	src := t.TempDir()
	first := append([]byte{3}, bytes.Repeat([]byte("a"), 700)...)
	last := append([]byte{100}, bytes.Repeat([]byte("b"), 1500)...)
	l, _, _ := openReplay(t, src, Options{SegmentSize: 8192})
	p1 := mustAppend(t, l, first)
	mustCommit(t, l)
	p2 := mustAppend(t, l, last)
	mustCommit(t, l)
	l.Close()
	img, err := os.ReadFile(segPath(src, p2.Segment))
	if err != nil {
		t.Fatal(err)
	}

	damaged := bytes.Clone(img)
	damaged[int(p2.Offset)+FrameHeaderSize+700] ^= 0x04
	dir := t.TempDir()
	os.WriteFile(segPath(dir, p2.Segment), damaged, 0o600)
	l = mustOpen(t, dir, Options{CountJobs: countByte})
	_, _, err = replayAll(t, l, Position{})
	l.Close()
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != int64(p2.Offset) || ce.File != segPath(dir, p2.Segment) || ce.Frames != 1 || ce.Jobs != 100 {
		t.Fatalf("normal start on a damaged last frame: %v (%+v)", err, ce)
	}
	if msg := err.Error(); !strings.Contains(msg, segPath(dir, p2.Segment)) || !strings.Contains(msg, "100 job record(s)") {
		t.Fatalf("message does not name the file and the jobs: %s", msg)
	}
	var out bytes.Buffer
	if _, err := VerifyCounting(dir, &out, countByte); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}

	l = mustOpen(t, dir, Options{CountJobs: countByte, ForceRecovery: true})
	got, rep, err := replayAll(t, l, Position{})
	if err != nil {
		t.Fatal(err)
	}
	sameRecs(t, got, []rec{{p1, first}})
	if rep.TornTail || rep.SkippedRegions != 1 || rep.SkippedFrames != 1 || rep.SkippedJobs != 100 || len(rep.Damaged) != 1 || rep.Damaged[0].From != p2.Offset {
		t.Fatalf("forced report: %+v", rep)
	}
	extra := []byte{1, 'x'}
	p3 := mustAppend(t, l, extra)
	mustCommit(t, l)
	l.Close()
	// The damage was cleared before appends went on: a normal start now
	// sees a clean log.
	l, got, rep = openReplay(t, dir, Options{})
	sameRecs(t, got, []rec{{p1, first}, {p3, extra}})
	if rep.Repaired() {
		t.Fatalf("second start repaired again: %+v", rep)
	}
	l.Close()

	// A torn write of the same record: its second sector never reached
	// the disk. Truncated, counted, no error.
	torn := bytes.Clone(img)
	z := (int(p2.Offset) + FrameHeaderSize + sectorSize) &^ (sectorSize - 1)
	clear(torn[z:])
	dir = t.TempDir()
	os.WriteFile(segPath(dir, p2.Segment), torn, 0o600)
	l = mustOpen(t, dir, Options{CountJobs: countByte})
	got, rep, err = replayAll(t, l, Position{})
	l.Close()
	if err != nil {
		t.Fatalf("torn write refused: %v", err)
	}
	sameRecs(t, got, []rec{{p1, first}})
	if !rep.TornTail || rep.TornAt != p2 || rep.TornFrames != 1 {
		t.Fatalf("torn report: %+v", rep)
	}
	// Not preallocated and cut short: also torn.
	dir = t.TempDir()
	os.WriteFile(segPath(dir, p2.Segment), img[:int(p2.Offset)+FrameHeaderSize+900], 0o600)
	l = mustOpen(t, dir, Options{})
	_, rep, err = replayAll(t, l, Position{})
	l.Close()
	if err != nil || !rep.TornTail {
		t.Fatalf("short file: %v %+v", err, rep)
	}
}
