package wal

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	data := randBytes(r, 300_000)
	ix := newCRCIndex(data)
	for i := 0; i < 500; i++ {
		a := r.IntN(len(data))
		b := a + r.IntN(len(data)-a+1)
		if got, want := ix.rangeCRC(a, b), crc32.Checksum(data[a:b], castagnoli); got != want {
			t.Fatalf("rangeCRC(%d, %d) = %#x, want %#x", a, b, got, want)
		}
		x, y := data[:a], data[a:b]
		if got, want := crcCombine(crc32.Checksum(x, castagnoli), crc32.Checksum(y, castagnoli), int64(len(y))), crc32.Checksum(data[:b], castagnoli); got != want {
			t.Fatalf("combine at %d/%d = %#x, want %#x", a, b, got, want)
		}
	}
}

// resync must find a frame whose body is far larger than the index stride
// (checked through the combine path) behind megabytes of garbage.
func TestResyncFindsLargeFrameInGarbage(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const salt = 0xabcdef
	data := randBytes(r, 4<<20)
	frame := appendFrame(nil, salt, randBytes(r, 200_000), 0)
	at := 3_000_001
	copy(data[at:], frame)
	ix := newCRCIndex(data)
	if got := resync(data, 1, salt, ix, int64(len(data))); got != int64(at) {
		t.Fatalf("resync = %d, want %d", got, at)
	}
	if got := resync(data, int64(at)+1, salt, ix, int64(len(data))); got != -1 {
		t.Fatalf("resync past the frame = %d", got)
	}
}

func TestScanRegions(t *testing.T) {
	const salt = 77
	img, recs := buildSegment(1, salt, 8192, [][][]byte{
		{[]byte("one"), []byte("two")},
		{[]byte("three")},
		{bytes.Repeat([]byte("x"), 500)},
	})
	sc := scanSegment(img, HeaderSize, salt)
	if len(sc.regions) != 0 || sc.frames() != 4 || sc.validEnd() != frameEnd(recs[3]) {
		t.Fatalf("clean scan: %+v", sc)
	}
	// Damage "two": one region, resync at "three".
	bad := bytes.Clone(img)
	bad[recs[1].pos.Offset+FrameHeaderSize] ^= 1
	sc = scanSegment(bad, HeaderSize, salt)
	if len(sc.regions) != 1 || sc.regions[0].start != int64(recs[1].pos.Offset) || sc.regions[0].end != int64(recs[2].pos.Offset) || sc.frames() != 3 {
		t.Fatalf("damaged scan: %+v", sc)
	}
	// A later write ("x...", flagged) follows the damage: not a torn tail.
	if sc.tornFrom() != 1 {
		t.Fatalf("tornFrom = %d", sc.tornFrom())
	}
	// Garbage after the last frame: a trailing region, a torn tail.
	bad = bytes.Clone(img)
	copy(bad[frameEnd(recs[3]):], "garbage")
	sc = scanSegment(bad, HeaderSize, salt)
	if len(sc.regions) != 1 || !sc.regions[0].trailing || sc.tornFrom() != 0 {
		t.Fatalf("trailing garbage: %+v", sc)
	}
}

// FuzzScan checks the scanner's invariants on arbitrary images: runs and
// regions tile the data in order, and every frame it accepts validates.
func FuzzScan(f *testing.F) {
	img, _ := buildSegment(1, 9, 600, [][][]byte{{[]byte("a"), []byte("bb")}, {bytes.Repeat([]byte{1}, 100)}})
	f.Add(img[HeaderSize:], uint32(9))
	f.Add([]byte{3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7}, uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, salt uint32) {
		sc := scanSegment(data, 0, salt)
		pos := int64(0)
		for k, run := range sc.runs {
			if run.start != pos || run.end < run.start || run.end > int64(len(data)) {
				t.Fatalf("run %d %+v does not continue at %d", k, run, pos)
			}
			n := 0
			walkRun(data, run, func(off int64, word uint32, b []byte) error {
				if _, _, ok := frameAt(data, off, salt); !ok {
					t.Fatalf("accepted an invalid frame at %d", off)
				}
				n++
				return nil
			})
			if n != run.frames {
				t.Fatalf("run %d: walked %d frames, scanned %d", k, n, run.frames)
			}
			pos = run.end
			if k < len(sc.regions) {
				reg := sc.regions[k]
				if reg.start != pos || reg.end <= reg.start {
					t.Fatalf("region %d %+v after run ending %d", k, reg, pos)
				}
				pos = reg.end
			}
		}
		sc.tornFrom()
	})
}
