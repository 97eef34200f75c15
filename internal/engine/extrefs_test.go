package engine

import (
	"math/rand/v2"
	"testing"
)

// extRefs against a Go map: random sets, replacements and deletions
// (backward shifts across the table's wrap-around included), then bulk
// adds through setAll in one sorted run and in several.
func TestExtRefsMatchesAMap(t *testing.T) {
	defer func(n int) { placeRun = n }(placeRun)
	for _, run := range []int{placeRun, 3000} {
		placeRun = run
		rng := rand.New(rand.NewPCG(7, uint64(run)))
		var tb extRefs
		want := map[uint32]uint64{}
		check := func(when string) {
			t.Helper()
			if tb.len() != len(want) {
				t.Fatalf("%s: %d entries, want %d", when, tb.len(), len(want))
			}
			for slot, ref := range want {
				if got, ok := tb.get(slot); !ok || got != ref {
					t.Fatalf("%s: slot %d → %x %v, want %x", when, slot, got, ok, ref)
				}
			}
			n := 0
			tb.each(func(c *extCell) {
				if want[c.slot] != c.ref() {
					t.Fatalf("%s: each gave slot %d → %x, want %x", when, c.slot, c.ref(), want[c.slot])
				}
				n++
			})
			if n != len(want) {
				t.Fatalf("%s: each visited %d entries, want %d", when, n, len(want))
			}
		}
		// a small range of slots so that probe runs collide and wrap
		for i := 0; i < 20000; i++ {
			slot := uint32(rng.IntN(3000))
			if rng.IntN(8) == 0 {
				tb.del(slot)
				delete(want, slot)
				continue
			}
			ref := rng.Uint64() & (1<<40 - 1)
			tb.set(slot, ref)
			want[slot] = ref
		}
		check("after random changes")
		if _, ok := tb.get(1 << 30); ok {
			t.Fatal("a slot never set is found")
		}
		var p []extPending
		for slot := uint32(10000); slot < 30000; slot++ {
			if rng.IntN(4) != 0 {
				ref := uint64(slot)<<32 | uint64(rng.Uint32())
				p = append(p, extPending{slot, ref})
				want[slot] = ref
			}
		}
		tb.setAll(p)
		check("after setAll")
		for slot := range want {
			if slot%2 == 0 {
				tb.del(slot)
				delete(want, slot)
			}
		}
		check("after deleting half")
	}
}

// A probe run that wraps around the end of the table: a and c have the
// last cell as their home, b the first. Set in that order they sit in the
// last cell, the first and the second. Deleting a must move c back across
// the end and leave b in its home.
func TestExtRefsDeleteAcrossTheEnd(t *testing.T) {
	var tb extRefs
	tb.reserve(1)
	last := uint64(len(tb.cells) - 1)
	var atLast []uint32
	b := noSlot
	for s := uint32(0); len(atLast) < 2 || b == noSlot; s++ {
		switch tb.home(s) {
		case last:
			atLast = append(atLast, s)
		case 0:
			if b == noSlot {
				b = s
			}
		}
	}
	a, c := atLast[0], atLast[1]
	tb.set(a, 1)
	tb.set(b, 2)
	tb.set(c, 3)
	if tb.cells[last].slot != a || tb.cells[0].slot != b || tb.cells[1].slot != c {
		t.Fatalf("cells %d, 0, 1 hold %d %d %d, want %d %d %d", last, tb.cells[last].slot, tb.cells[0].slot, tb.cells[1].slot, a, b, c)
	}
	tb.del(a)
	for s, want := range map[uint32]uint64{b: 2, c: 3} {
		if ref, ok := tb.get(s); !ok || ref != want {
			t.Fatalf("slot %d after the delete: %d %v, want %d", s, ref, ok, want)
		}
	}
	if tb.cells[last].slot != c || tb.cells[0].slot != b || tb.cells[1].slot != noSlot {
		t.Fatalf("after the delete cells %d, 0, 1 hold %d %d %d, want %d %d empty", last, tb.cells[last].slot, tb.cells[0].slot, tb.cells[1].slot, c, b)
	}
}
