package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// frameEnd is the offset just after a record's frame.
func frameEnd(r rec) int64 { return int64(r.pos.Offset) + FrameHeaderSize + int64(len(r.body)) }

// recsBefore returns the records of want that lie wholly before cut in
// segment seg (all records of earlier segments included).
func recsBefore(want []rec, seg uint32, cut int64) []rec {
	var out []rec
	for _, w := range want {
		if w.pos.Segment < seg || (w.pos.Segment == seg && frameEnd(w) <= cut) {
			out = append(out, w)
		}
	}
	return out
}

// checkRecoversTo replays dir and expects exactly want, a torn tail iff
// torn, and then a working append + reopen.
func checkRecoversTo(t *testing.T, dir string, want []rec, torn bool, what string) {
	t.Helper()
	opts := Options{Sync: SyncNever, SegmentSize: 4096}
	l := mustOpen(t, dir, opts)
	got, rep, err := replayAll(t, l, Position{})
	if err != nil {
		t.Fatalf("%s: Replay: %v", what, err)
	}
	sameRecs(t, got, want)
	if rep.TornTail != torn {
		t.Fatalf("%s: TornTail=%v, want %v (%+v)", what, rep.TornTail, torn, rep)
	}
	if torn {
		last := want[len(want)-1]
		if rep.TornAt != (Position{last.pos.Segment, uint32(frameEnd(last))}) {
			t.Fatalf("%s: TornAt %v, last good frame ends at %d", what, rep.TornAt, frameEnd(last))
		}
	}
	extra := []byte("after recovery " + what)
	pos := mustAppend(t, l, extra)
	mustCommit(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, opts)
	got, rep, err = replayAll(t, l, Position{})
	if err != nil {
		t.Fatalf("%s: second Replay: %v", what, err)
	}
	sameRecs(t, got, append(append([]rec(nil), want...), rec{pos, extra}))
	if rep.TornTail || rep.Repaired() {
		t.Fatalf("%s: second replay still repaired something: %+v", what, rep)
	}
	l.Close()
}

func TestTornTailEveryOffset(t *testing.T) {
	src := t.TempDir()
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = 11 + (i*13)%40
	}
	// Commit one record at a time so the last three frames are three
	// separate writes, like the broker's last batches before a crash.
	want := writeLog(t, src, Options{SegmentSize: 4096}, sizes, 1)
	last := want[len(want)-1].pos.Segment
	if want[len(want)-3].pos.Segment != last {
		t.Fatal("last three frames span segments; adjust sizes")
	}
	orig, err := os.ReadFile(segPath(src, last))
	if err != nil {
		t.Fatal(err)
	}
	start := int64(want[len(want)-3].pos.Offset)
	end := frameEnd(want[len(want)-1])
	garbage := make([]byte, len(orig))
	gr := rand.New(rand.NewPCG(7, 7))
	for i := range garbage {
		garbage[i] = byte(gr.Uint32())
	}

	for cut := start; cut <= end; cut++ {
		// A preallocated segment keeps its size; what a crash leaves
		// unwritten is whole sectors of zeros. The sector holding cut was
		// rewritten by the write starting at ws (every record is its own
		// write here), so unwritten, it holds the bytes before ws.
		ws := int64(recsBefore(want, last, cut)[len(recsBefore(want, last, cut))-1].pos.Offset)
		if cut == frameEnd(recsBefore(want, last, cut)[len(recsBefore(want, last, cut))-1]) {
			ws = cut
		}
		zc := max(cut&^(sectorSize-1), ws)
		variants := []struct {
			name string
			cut  int64
			data []byte
			torn bool
		}{
			{"truncate", cut, orig[:cut], false},
			{"zeros", zc, append(append([]byte(nil), orig[:zc]...), make([]byte, len(orig)-int(zc))...), false},
			{"garbage", cut, append(append([]byte(nil), orig[:cut]...), garbage[cut:end+50]...), true},
		}
		for _, v := range variants {
			if v.cut == end && v.name != "garbage" {
				continue // nothing removed
			}
			expect := recsBefore(want, last, v.cut)
			atBoundary := v.cut == frameEnd(expect[len(expect)-1])
			dir := copyDir(t, src)
			if err := os.WriteFile(segPath(dir, last), v.data, 0o644); err != nil {
				t.Fatal(err)
			}
			// Truncating or zeroing exactly at a frame boundary leaves a
			// clean log; anything else leaves a partial frame.
			torn := v.torn || !atBoundary
			checkRecoversTo(t, dir, expect, torn, fmt.Sprintf("%s at %d", v.name, v.cut))
		}
	}
}

// writeFrames builds a segment image by hand: frames grouped into writes,
// the last frame of each write flagged, as Commit does.
func buildSegment(num, salt uint32, size int, writes [][][]byte) ([]byte, []rec) {
	h := segmentHeader{version: formatVersion, headerSize: HeaderSize, number: num, salt: salt, capacity: uint64(size)}
	img := h.encode()
	var recs []rec
	for _, w := range writes {
		for i, b := range w {
			var fl uint32
			if i == len(w)-1 {
				fl = endOfWriteFl
			}
			recs = append(recs, rec{Position{num, uint32(len(img))}, b})
			img = appendFrame(img, salt, b, fl)
		}
	}
	if len(img) < size {
		img = append(img, make([]byte, size-len(img))...)
	}
	return img, recs
}

// A crash during the last write can persist its sectors out of order:
// a hole of zeros with intact frames of the same write after it is a torn
// tail, not corruption. The same hole in an earlier, completed write is
// corruption.
func TestTornWriteWithHole(t *testing.T) {
	var writes [][][]byte
	for w := 0; w < 3; w++ {
		var frames [][]byte
		for i := 0; i < 6; i++ {
			frames = append(frames, body(w*100+i, 1500))
		}
		writes = append(writes, frames)
	}
	img, recs := buildSegment(1, 0xfeedf00d, 32<<10, writes)
	hole := func(r rec) []byte {
		out := bytes.Clone(img)
		// Zero the first aligned sector wholly inside r's body.
		s := (int(r.pos.Offset) + FrameHeaderSize + sectorSize - 1) &^ (sectorSize - 1)
		clear(out[s : s+sectorSize])
		return out
	}
	// Hole in the second frame of the last write.
	dir := t.TempDir()
	bad := recs[12+1]
	os.WriteFile(segPath(dir, 1), hole(bad), 0o644)
	l := mustOpen(t, dir, Options{})
	got, rep, err := replayAll(t, l, Position{})
	if err != nil {
		t.Fatalf("hole in the last write: %v", err)
	}
	sameRecs(t, got, recs[:13])
	if !rep.TornTail || rep.TornAt != bad.pos || rep.TornFrames == 0 {
		t.Fatalf("report: %+v", rep)
	}
	l.Close()

	// The sector holding the start of the last write never made it: it
	// keeps the previous write's synced bytes and zeros after them.
	dir = t.TempDir()
	straddle := bytes.Clone(img)
	x := int(recs[12].pos.Offset)
	clear(straddle[x : (x+sectorSize)&^(sectorSize-1)])
	os.WriteFile(segPath(dir, 1), straddle, 0o644)
	l = mustOpen(t, dir, Options{})
	got, rep, err = replayAll(t, l, Position{})
	if err != nil {
		t.Fatalf("unwritten first sector of the last write: %v", err)
	}
	sameRecs(t, got, recs[:12])
	// Six frames go: the incomplete first one and the five intact ones of
	// the same write after it.
	if !rep.TornTail || rep.TornAt != recs[12].pos || rep.TornFrames != 6 {
		t.Fatalf("report: %+v", rep)
	}
	l.Close()

	// The same hole in the middle write: durable data was damaged.
	dir = t.TempDir()
	bad = recs[6+1]
	os.WriteFile(segPath(dir, 1), hole(bad), 0o644)
	l = mustOpen(t, dir, Options{})
	_, _, err = replayAll(t, l, Position{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != int64(bad.pos.Offset) || ce.From != bad.pos {
		t.Fatalf("hole in an earlier write: %v", err)
	}
	l.Close()

	// A bit flip (no zero sector) in the last write, followed by intact
	// frames of that write, is not the mark of a torn write either.
	dir = t.TempDir()
	flipped := bytes.Clone(img)
	bad = recs[12+1]
	flipped[bad.pos.Offset+100] ^= 0x10
	os.WriteFile(segPath(dir, 1), flipped, 0o644)
	l = mustOpen(t, dir, Options{})
	if _, _, err = replayAll(t, l, Position{}); !errors.As(err, &ce) {
		t.Fatalf("bit flip in the last write: %v", err)
	}
	l.Close()
}

func TestCorruptionBeforeTail(t *testing.T) {
	src := t.TempDir()
	sizes := make([]int, 120)
	for i := range sizes {
		sizes[i] = 30 + i%90
	}
	want := writeLog(t, src, Options{SegmentSize: 2048}, sizes, 3)
	victim := want[40] // followed by many committed writes
	if want[41].pos.Segment != victim.pos.Segment || want[len(want)-1].pos.Segment == victim.pos.Segment {
		t.Fatal("record 40 must have a successor in its segment and later segments; adjust sizes")
	}
	flipAt := int64(victim.pos.Offset) + FrameHeaderSize + 5

	dir := copyDir(t, src)
	path := segPath(dir, victim.pos.Segment)
	data, _ := os.ReadFile(path)
	data[flipAt] ^= 1
	os.WriteFile(path, data, 0o644)

	l := mustOpen(t, dir, Options{})
	_, _, err := replayAll(t, l, Position{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Replay of a damaged log: %v", err)
	}
	if ce.File != path || ce.Offset != int64(victim.pos.Offset) || ce.From != victim.pos || ce.To != want[41].pos {
		t.Fatalf("error names %s offset %d range %v-%v; want %s offset %d range %v-%v",
			ce.File, ce.Offset, ce.From, ce.To, path, victim.pos.Offset, victim.pos, want[41].pos)
	}
	msg := err.Error()
	if !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprint(victim.pos.Offset)) {
		t.Fatalf("message does not name file and offset: %s", msg)
	}
	l.Close()

	var vout bytes.Buffer
	if _, err := Verify(dir, &vout); !errors.Is(err, ErrCorrupt) || !strings.Contains(vout.String(), "CORRUPT") {
		t.Fatalf("Verify: %v\n%s", err, vout.String())
	}

	l = mustOpen(t, dir, Options{ForceRecovery: true})
	got, rep, err := replayAll(t, l, Position{})
	if err != nil {
		t.Fatalf("forced replay: %v", err)
	}
	expect := append(append([]rec(nil), want[:40]...), want[41:]...)
	sameRecs(t, got, expect)
	if rep.SkippedRegions != 1 || rep.SkippedBytes != int64(FrameHeaderSize+len(victim.body)) || len(rep.Problems) != 1 {
		t.Fatalf("forced report: %+v", rep)
	}
	mustAppend(t, l, []byte("more"))
	mustCommit(t, l)
	l.Close()
}

func TestCorruptHeaderAndMissingSegment(t *testing.T) {
	src := t.TempDir()
	sizes := make([]int, 60)
	for i := range sizes {
		sizes[i] = 400
	}
	want := writeLog(t, src, Options{SegmentSize: 2048}, sizes, 2) // 4 per segment
	if want[len(want)-1].pos.Segment < 5 {
		t.Fatal("expected more segments")
	}
	var inSeg3 int
	for _, w := range want {
		if w.pos.Segment == 3 {
			inSeg3++
		}
	}

	// Damaged header of segment 3.
	dir := copyDir(t, src)
	data, _ := os.ReadFile(segPath(dir, 3))
	data[20] ^= 4 // salt
	os.WriteFile(segPath(dir, 3), data, 0o644)
	l := mustOpen(t, dir, Options{})
	_, _, err := replayAll(t, l, Position{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != segPath(dir, 3) || ce.Offset != 0 {
		t.Fatalf("bad header: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, Options{ForceRecovery: true})
	got, rep, err := replayAll(t, l, Position{})
	if err != nil || rep.SkippedSegments != 1 || len(got) != len(want)-inSeg3 {
		t.Fatalf("forced: %d records (want %d), %+v, %v", len(got), len(want)-inSeg3, rep, err)
	}
	l.Close()

	// Missing segment 3.
	dir = copyDir(t, src)
	os.Remove(segPath(dir, 3))
	l = mustOpen(t, dir, Options{})
	if _, _, err := replayAll(t, l, Position{}); !errors.As(err, &ce) || ce.File != segPath(dir, 3) {
		t.Fatalf("missing segment: %v", err)
	}
	l.Close()
	l = mustOpen(t, dir, Options{ForceRecovery: true})
	got, rep, err = replayAll(t, l, Position{})
	if err != nil || rep.MissingSegments != 1 || len(got) != len(want)-inSeg3 {
		t.Fatalf("forced: %d records, %+v, %v", len(got), rep, err)
	}
	l.Close()
	// Replaying from after the hole does not care about it.
	l = mustOpen(t, dir, Options{})
	first4 := Position{4, HeaderSize}
	if _, _, err := replayAll(t, l, first4); err != nil {
		t.Fatalf("replay after the hole: %v", err)
	}
	l.Close()
}

// A roll creates the next segment before the batch reaches the previous
// one; a crash in between leaves an empty last segment after a torn one.
func TestTornTailBeforeEmptySegment(t *testing.T) {
	src := t.TempDir()
	want := writeLog(t, src, Options{SegmentSize: 2048}, []int{500, 500, 500}, 1)
	last := want[2]
	// Cut the last frame in half and add an empty segment 2.
	data, _ := os.ReadFile(segPath(src, 1))
	cut := int64(last.pos.Offset) + 100
	clear(data[cut:])
	os.WriteFile(segPath(src, 1), data, 0o644)
	h := segmentHeader{version: formatVersion, headerSize: HeaderSize, number: 2, salt: 99, capacity: 2048}
	os.WriteFile(segPath(src, 2), append(h.encode(), make([]byte, 2048-HeaderSize)...), 0o644)

	l, got, rep := openReplay(t, src, Options{})
	sameRecs(t, got, want[:2])
	if !rep.TornTail || rep.TornAt != last.pos {
		t.Fatalf("report %+v", rep)
	}
	if pos := mustAppend(t, l, []byte("x")); pos != (Position{2, HeaderSize}) {
		t.Fatalf("append after recovery at %v", pos)
	}
	mustCommit(t, l)
	l.Close()
	l, got, _ = openReplay(t, src, Options{})
	if len(got) != 3 {
		t.Fatalf("%d records", len(got))
	}
	l.Close()
}

// Random single-bit flips anywhere: never a panic, never a wrong record.
func TestRandomBitFlips(t *testing.T) {
	src := t.TempDir()
	sizes := make([]int, 200)
	for i := range sizes {
		sizes[i] = 5 + (i*37)%300
	}
	want := writeLog(t, src, Options{SegmentSize: 4096}, sizes, 4)
	byPos := map[Position][]byte{}
	for _, w := range want {
		byPos[w.pos] = w.body
	}
	nsegs := want[len(want)-1].pos.Segment
	images := map[uint32][]byte{}
	var total int
	for n := uint32(1); n <= nsegs; n++ {
		images[n], _ = os.ReadFile(segPath(src, n))
		total += len(images[n])
	}
	r := rand.New(rand.NewPCG(42, 42))
	outcomes := map[string]int{}
	dir := t.TempDir()
	for n := uint32(1); n <= nsegs; n++ {
		os.WriteFile(segPath(dir, n), images[n], 0o644)
	}
	for i := 0; i < 300; i++ {
		seg := uint32(1 + r.IntN(int(nsegs)))
		img := bytes.Clone(images[seg])
		// Half the flips hit the header or live frames, the rest anywhere.
		var off int
		if i%2 == 0 {
			off = r.IntN(len(img))
		} else {
			off = r.IntN(min(len(img), int(lastFrameEnd(want, seg))))
		}
		img[off] ^= 1 << r.IntN(8)
		os.WriteFile(segPath(dir, seg), img, 0o644)
		for _, force := range []bool{false, true} {
			l := mustOpen(t, dir, Options{ForceRecovery: force, Sync: SyncNever})
			got, rep, err := replayAll(t, l, Position{})
			l.Close()
			// Recovery may truncate the (copied) last segment; restore it.
			os.WriteFile(segPath(dir, nsegs), images[nsegs], 0o644)
			os.WriteFile(segPath(dir, seg), img, 0o644)
			switch {
			case err != nil && force:
				t.Fatalf("flip %d (segment %d offset %d): forced replay failed: %v", i, seg, off, err)
			case err != nil:
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip %d: error does not wrap ErrCorrupt: %v", i, err)
				}
				outcomes["refused"]++
			case rep.TornTail:
				outcomes["torn"]++
			case rep.SkippedRegions+rep.SkippedSegments > 0:
				outcomes["skipped"]++
			default:
				outcomes["unaffected"]++
			}
			for _, g := range got {
				if b, ok := byPos[g.pos]; !ok || !bytes.Equal(b, g.body) {
					t.Fatalf("flip %d (segment %d offset %d): delivered a record that was never written at %v", i, seg, off, g.pos)
				}
			}
			if err == nil && !force && len(got) < len(want)-1 && !rep.TornTail {
				t.Fatalf("flip %d: lost records without saying so", i)
			}
		}
		os.WriteFile(segPath(dir, seg), images[seg], 0o644)
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["refused"] == 0 || outcomes["skipped"] == 0 {
		t.Fatalf("flips never exercised corruption handling: %v", outcomes)
	}
}

func lastFrameEnd(want []rec, seg uint32) int64 {
	var end int64 = HeaderSize
	for _, w := range want {
		if w.pos.Segment == seg {
			end = frameEnd(w)
		}
	}
	return end
}

func TestVerifyAndDump(t *testing.T) {
	dir := t.TempDir()
	want := writeLog(t, dir, Options{SegmentSize: 1024}, []int{100, 200, 300, 400, 500, 50}, 2)
	var out bytes.Buffer
	rep, err := Verify(dir, &out)
	if err != nil || !rep.OK() || rep.Records != len(want) || rep.TornTail {
		t.Fatalf("Verify clean log: %v %+v\n%s", err, rep, out.String())
	}
	if !strings.Contains(out.String(), "result: OK") {
		t.Fatalf("report:\n%s", out.String())
	}
	out.Reset()
	if err := Dump(dir, &out, func(b []byte) string { return fmt.Sprintf("len=%d", len(b)) }); err != nil {
		t.Fatal(err)
	}
	var lines int
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, "#") {
			lines++
			if f := strings.Split(line, "\t"); len(f) != 4 || f[3] != "len="+f[2] {
				t.Fatalf("dump line %q", line)
			}
		}
	}
	if lines != len(want) {
		t.Fatalf("dump printed %d frames, want %d:\n%s", lines, len(want), out.String())
	}

	// A damaged last frame — complete, zeros after it — is corruption:
	// it was acknowledged, a crash cannot have produced it.
	last := want[len(want)-1]
	data, _ := os.ReadFile(segPath(dir, last.pos.Segment))
	orig := bytes.Clone(data)
	data[last.pos.Offset+10] ^= 0xff
	os.WriteFile(segPath(dir, last.pos.Segment), data, 0o644)
	out.Reset()
	rep, err = Verify(dir, &out)
	if !errors.Is(err, ErrCorrupt) || rep.OK() || rep.TornTail || len(rep.Corruptions) != 1 ||
		rep.Corruptions[0].Offset != int64(last.pos.Offset) || rep.Corruptions[0].Frames != 1 {
		t.Fatalf("Verify damaged last frame: %v %+v\n%s", err, rep, out.String())
	}
	if !strings.Contains(out.String(), "result: CORRUPT") || !strings.Contains(out.String(), "fails its checksum") {
		t.Fatalf("report:\n%s", out.String())
	}

	// A torn tail is reported but is not an error: a sector of the last
	// frame never reached the disk.
	big := body(99, 1500)
	l, _, _ := openReplay(t, dir+"-torn", Options{SegmentSize: 4096})
	pos := mustAppend(t, l, big)
	mustCommit(t, l)
	l.Close()
	os.WriteFile(segPath(dir, last.pos.Segment), orig, 0o644)
	data, _ = os.ReadFile(segPath(dir+"-torn", pos.Segment))
	z := (int(pos.Offset) + FrameHeaderSize + sectorSize) &^ (sectorSize - 1)
	clear(data[z:])
	os.WriteFile(segPath(dir+"-torn", pos.Segment), data, 0o644)
	out.Reset()
	rep, err = Verify(dir+"-torn", &out)
	if err != nil || !rep.TornTail || rep.TornAt != pos || rep.Records != 0 {
		t.Fatalf("Verify torn log: %v %+v\n%s", err, rep, out.String())
	}
}

// FuzzReplay feeds arbitrary bytes to recovery as a segment file. With the
// first byte odd, the rest follows a valid header (so the fuzzer can reach
// frame decoding); otherwise the bytes are the whole file.
func FuzzReplay(f *testing.F) {
	const salt = 0x5a17
	img, _ := buildSegment(1, salt, 1024, [][][]byte{{[]byte("hello"), []byte("world")}, {bytes.Repeat([]byte{7}, 300)}})
	f.Add(append([]byte{1}, img[HeaderSize:]...))
	f.Add(append([]byte{0}, img...))
	f.Add([]byte{1, 5, 0, 0, 0x80, 1, 2, 3, 4, 'a'})
	f.Add([]byte{0})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		var file []byte
		if in[0]&1 == 1 {
			h := segmentHeader{version: formatVersion, headerSize: HeaderSize, number: 1, salt: salt, capacity: 1024}
			file = append(h.encode(), in[1:]...)
		} else {
			file = in[1:]
		}
		path := segPath(dir, 1)
		for _, force := range []bool{false, true} {
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, Options{ForceRecovery: force, Logger: quietLogger, Sync: SyncNever, SegmentSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			if _, err := l.Replay(Position{}, func(pos Position, b []byte) error {
				if len(b) == 0 || int(pos.Offset)+FrameHeaderSize+len(b) > len(file) {
					t.Fatalf("frame at %v of %d bytes outside a %d-byte file", pos, len(b), len(file))
				}
				n++
				return nil
			}); err == nil {
				if _, err := l.Append([]byte("after")); err != nil {
					t.Fatalf("Append after successful replay: %v", err)
				}
				if err := l.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
		}
		os.WriteFile(path, file, 0o644)
		Verify(dir, discardWriter{})
		Dump(dir, discardWriter{}, nil)
		os.Remove(path)
		os.Remove(segPath(dir, 2))
	})
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
