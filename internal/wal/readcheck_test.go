package wal

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
)

func flipOnDisk(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A payload whose bytes changed on disk is refused, with the file and
// offset, whether the damage happened while running or was there at start
// in a segment before the replay position, which start-up does not read:
// its deferred check (a read from it, or CheckSegment) reports the damage.
func TestReadAtRefusesDamagedPayload(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var reported []*DamageError
	onDamage := func(e *DamageError) { mu.Lock(); reported = append(reported, e); mu.Unlock() }
	opts := Options{SegmentSize: 16 << 10, OnDamage: onDamage}
	l, _, _ := openReplay(t, dir, opts)
	var recs []rec
	for i := 0; i < 60; i++ { // several segments, many marks each
		b := body(i, 200+(i*53)%900)
		recs = append(recs, rec{mustAppend(t, l, b), b})
		if i%3 == 2 {
			mustCommit(t, l)
		}
	}
	mustCommit(t, l)
	read := func(l *Log, r rec) ([]byte, error) {
		// The middle of the body, as a payload inside a record would be.
		return l.ReadAt(r.pos.Segment, r.pos.Offset+FrameHeaderSize+10, uint32(len(r.body)-20))
	}
	for _, r := range recs {
		got, err := read(l, r)
		if err != nil || !bytes.Equal(got, r.body[10:len(r.body)-10]) {
			t.Fatalf("clean read at %v: %v", r.pos, err)
		}
	}
	victim := recs[7] // in segment 1
	if victim.pos.Segment != 1 {
		t.Fatalf("victim in segment %d", victim.pos.Segment)
	}
	flipOnDisk(t, segPath(dir, 1), int64(victim.pos.Offset)+FrameHeaderSize+15)
	_, err := read(l, victim)
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) || de.File != segPath(dir, 1) || de.FrameOffset != int64(victim.pos.Offset) {
		t.Fatalf("read of damaged payload: %v", err)
	}
	if len(reported) != 1 {
		t.Fatalf("OnDamage called %d times", len(reported))
	}
	for _, r := range recs {
		if r.pos == victim.pos {
			continue
		}
		if _, err := read(l, r); err != nil {
			t.Fatalf("read of an intact payload at %v: %v", r.pos, err)
		}
	}
	l.Close()

	// Restart as after a snapshot at the start of the last segment:
	// segment 1 is not replayed, and not read at start either; its check
	// runs on the first read from it (here) or from CheckSegment (below).
	last := recs[len(recs)-1].pos.Segment
	var checked [][]DamagedRange
	opts.OnCheckDamage = func(d []DamagedRange) { mu.Lock(); checked = append(checked, d); mu.Unlock() }
	restart := func() *Log {
		t.Helper()
		checked = nil
		l := mustOpen(t, dir, opts)
		_, rep, err := replayAll(t, l, Position{Segment: last, Offset: HeaderSize})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Damaged) != 0 {
			t.Fatalf("start-up reported damage it should not have read: %+v", rep.Damaged)
		}
		if u := l.Unchecked(); len(u) != int(last-1) || u[0] != 1 {
			t.Fatalf("unchecked segments after start: %v (last %d)", u, last)
		}
		return l
	}
	wantChecked := func() {
		t.Helper()
		if len(checked) != 1 || len(checked[0]) != 1 || checked[0][0].Segment != 1 || checked[0][0].From != victim.pos.Offset || checked[0][0].File != segPath(dir, 1) {
			t.Fatalf("damage found by the deferred check: %+v", checked)
		}
	}
	readAll := func(l *Log) {
		t.Helper()
		if _, err := read(l, victim); !errors.As(err, &de) {
			t.Fatalf("read after restart: %v", err)
		}
		for _, r := range recs {
			if r.pos != victim.pos {
				if got, err := read(l, r); err != nil || !bytes.Equal(got, r.body[10:len(r.body)-10]) {
					t.Fatalf("read after restart at %v: %v", r.pos, err)
				}
			}
		}
	}

	l = restart()
	readAll(l) // the victim first: its read runs segment 1's check
	wantChecked()
	if u := l.Unchecked(); len(u) != 0 {
		t.Fatalf("segments left unchecked after reading from all: %v", u)
	}
	l.Close()

	l = restart()
	defer l.Close()
	for _, num := range l.Unchecked() {
		n, err := l.CheckSegment(num)
		if err != nil || n == 0 {
			t.Fatalf("check of segment %d: %d bytes, %v", num, n, err)
		}
	}
	wantChecked()
	if n, err := l.CheckSegment(1); n != 0 || err != nil || len(checked) != 1 {
		t.Fatalf("a second check of segment 1 ran: %d bytes, %v", n, err)
	}
	readAll(l)
}

// A FrameReader reading the payloads of one large frame one after another
// (compaction re-logging a batch put's jobs) reads and checks the frame
// once, not once per payload; every answer, of ReadAt too, is a copy that
// does not keep the frame alive.
func TestReadAtReadsAFrameOnceForItsPayloads(t *testing.T) {
	l, _, _ := openReplay(t, t.TempDir(), Options{})
	defer l.Close()
	const n, size = 1000, 200
	b := body(1, n*size) // one frame: a batch of a thousand 200-byte payloads
	pos := mustAppend(t, l, b)
	mustCommit(t, l)
	before := l.rawBytes.Load()
	r := l.NewFrameReader()
	for i := 0; i < n; i++ {
		got, err := r.ReadAt(pos.Segment, pos.Offset+FrameHeaderSize+uint32(i*size), size)
		if err != nil || !bytes.Equal(got, b[i*size:(i+1)*size]) {
			t.Fatalf("payload %d: %v", i, err)
		}
		if cap(got) > 2*size {
			t.Fatalf("payload %d: capacity %d, a slice of the frame", i, cap(got))
		}
		got[0] ^= 0xff // the caller's copy: the next read is unaffected
	}
	if read := l.rawBytes.Load() - before; read > 2*int64(len(b)) {
		t.Fatalf("%d payloads of one %d-byte frame read %d bytes from the segment", n, len(b), read)
	}
	got, err := l.ReadAt(pos.Segment, pos.Offset+FrameHeaderSize+size, size)
	if err != nil || !bytes.Equal(got, b[size:2*size]) || cap(got) > 2*size {
		t.Fatalf("ReadAt: %v, capacity %d", err, cap(got))
	}
}

// Warm (log compaction reading a segment ahead, off the broker's loop)
// runs the deferred check of a segment not checked yet — damage it finds
// is reported as by any check — and reads a checked segment through; a
// segment that is gone reads nothing.
func TestWarmChecksOrReadsASegment(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var checked [][]DamagedRange
	opts := Options{SegmentSize: 16 << 10}
	l, _, _ := openReplay(t, dir, opts)
	var recs []rec
	for i := 0; i < 150; i++ {
		b := body(i, 500)
		recs = append(recs, rec{mustAppend(t, l, b), b})
		mustCommit(t, l)
	}
	l.Close()
	last := recs[len(recs)-1].pos.Segment
	if last < 3 {
		t.Fatalf("fixture: %d segments", last)
	}
	flipOnDisk(t, segPath(dir, 1), int64(recs[2].pos.Offset)+FrameHeaderSize+15)

	opts.OnCheckDamage = func(d []DamagedRange) { mu.Lock(); checked = append(checked, d); mu.Unlock() }
	l = mustOpen(t, dir, opts)
	defer l.Close()
	if _, _, err := replayAll(t, l, Position{Segment: last, Offset: HeaderSize}); err != nil {
		t.Fatal(err)
	}
	if u := l.Unchecked(); len(u) != int(last-1) {
		t.Fatalf("unchecked after start: %v", u)
	}
	n, err := l.Warm(1)
	if err != nil || n == 0 {
		t.Fatalf("warm of unchecked segment 1: %d bytes, %v", n, err)
	}
	if u := l.Unchecked(); len(u) != int(last-2) || u[0] != 2 {
		t.Fatalf("unchecked after warming segment 1: %v", u)
	}
	mu.Lock()
	if len(checked) != 1 || checked[0][0].Segment != 1 {
		t.Fatalf("damage the warming check found: %+v", checked)
	}
	mu.Unlock()
	st, err := os.Stat(segPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.Warm(1); err != nil || n != st.Size() {
		t.Fatalf("warm of checked segment 1: %d bytes of %d, %v", n, st.Size(), err)
	}
	if n, err := l.Warm(last + 100); n != 0 || err != nil {
		t.Fatalf("warm of a segment that does not exist: %d, %v", n, err)
	}
}

// A FrameReader moving from frame to frame (compaction reading payloads
// of many batch frames in log order) reads each into the same memory: a
// read allocates the caller's copy, not the frame, and earlier answers
// stay as they were.
func TestFrameReaderReusesItsMemory(t *testing.T) {
	l, _, _ := openReplay(t, t.TempDir(), Options{})
	defer l.Close()
	const frames, size = 8, 100
	var pos []Position
	var bodies [][]byte
	for i := range frames {
		b := body(i, 40*size) // a 4 KB frame of forty payloads
		pos = append(pos, mustAppend(t, l, b))
		bodies = append(bodies, b)
		mustCommit(t, l)
	}
	r := l.NewFrameReader()
	read := func(i, k int) []byte {
		t.Helper()
		got, err := r.ReadAt(pos[i].Segment, pos[i].Offset+FrameHeaderSize+uint32(k*size), size)
		if err != nil || !bytes.Equal(got, bodies[i][k*size:(k+1)*size]) {
			t.Fatalf("frame %d payload %d: %v", i, k, err)
		}
		return got
	}
	first := read(0, 39) // the frame's end: what a read up to a payload leaves out is read after
	kept := bytes.Clone(first)
	const reads = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 1; i <= reads; i++ {
		read(i%frames, 39)
	}
	runtime.ReadMemStats(&m1)
	if !bytes.Equal(first, kept) {
		t.Fatal("an earlier answer changed when the reader moved on")
	}
	// a new frame each time: reading it into new memory would be ≥ 4 KB
	if per := (m1.TotalAlloc - m0.TotalAlloc) / reads; per > 1024 {
		t.Fatalf("%d bytes allocated a read of a new %d-byte frame; want about the caller's %d-byte copy", per, len(bodies[0])+FrameHeaderSize, size)
	}
}

// ReadAt of a payload in a small frame reads the frame into pooled memory,
// its tail in the same read: what it allocates is the caller's copy.
func TestReadAtAllocatesOnlyTheCopy(t *testing.T) {
	l, _, _ := openReplay(t, t.TempDir(), Options{})
	defer l.Close()
	var pos []Position
	for i := range 50 { // frames of a single put's size, past a mark or two
		pos = append(pos, mustAppend(t, l, body(i, 180)))
	}
	mustCommit(t, l)
	p, want := pos[len(pos)-1], body(49, 180)[40:140]
	read := func() {
		got, err := l.ReadAt(p.Segment, p.Offset+FrameHeaderSize+40, 100)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadAt: %v", err)
		}
	}
	read()
	if n := testing.AllocsPerRun(200, read); n > 1 {
		t.Errorf("ReadAt allocates %v times, want 1 (the copy)", n)
	}
}
