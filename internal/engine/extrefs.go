package engine

import "math/bits"

// extRefs is the rare-field arena's slot → entry map (ext.go): open
// addressing over one flat array of 12-byte cells (no pointers), linear
// probing from a Fibonacci hash of the slot, deletion by backward shift
// (no tombstones). It is not a Go map for the sake of a snapshot load:
// setAll places millions of entries in table order, front to back
// (placeSorted, as the slot tables do), where a map insert each was a
// cache miss — 0.55 s of a 3 s restart of 10 M keyed jobs, half of them
// tagged (docs/benchmarks.md). At the ≤ 3/4 load it grows at, a cell
// array costs 12–24 bytes per entry; the map cost ~20.
type extRefs struct {
	cells []extCell // len a power of two, or 0
	n     int
	shift uint8 // 64 - log2(len(cells))
}

// extCell is one entry: the slot (noSlot: empty) and where its encoded
// fields are, chunk and offset (extStore's ref).
type extCell struct{ slot, chunk, off uint32 }

func (c extCell) ref() uint64 { return uint64(c.chunk)<<32 | uint64(c.off) }

func (t *extRefs) len() int { return t.n }

func (t *extRefs) home(slot uint32) uint64 {
	return uint64(slot) * 0x9E3779B97F4A7C15 >> t.shift
}

// find returns the cell index of slot, or of the empty cell ending its
// probe run (found false). The table must not be empty.
func (t *extRefs) find(slot uint32) (i uint64, found bool) {
	mask := uint64(len(t.cells) - 1)
	for i = t.home(slot); ; i = (i + 1) & mask {
		switch t.cells[i].slot {
		case slot:
			return i, true
		case noSlot:
			return i, false
		}
	}
}

func (t *extRefs) get(slot uint32) (uint64, bool) {
	if t.n == 0 {
		return 0, false
	}
	i, ok := t.find(slot)
	return t.cells[i].ref(), ok
}

// set maps slot to ref, replacing what it had.
func (t *extRefs) set(slot uint32, ref uint64) {
	t.reserve(t.n + 1)
	i, found := t.find(slot)
	if !found {
		t.n++
	}
	t.cells[i] = extCell{slot: slot, chunk: uint32(ref >> 32), off: uint32(ref)}
}

// del forgets slot; later members of its probe run move back into the gap.
func (t *extRefs) del(slot uint32) {
	if t.n == 0 {
		return
	}
	i, found := t.find(slot)
	if !found {
		return
	}
	mask := uint64(len(t.cells) - 1)
	for j := i; ; {
		j = (j + 1) & mask
		c := t.cells[j]
		if c.slot == noSlot {
			break
		}
		// c stays while its home lies cyclically in (i, j]
		h := t.home(c.slot)
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		t.cells[i] = c
		i = j
	}
	t.cells[i] = extCell{slot: noSlot}
	t.n--
}

// reserve grows the table to hold n entries at ≤ 3/4 load.
func (t *extRefs) reserve(n int) {
	if n*4 <= len(t.cells)*3 {
		return
	}
	size := 1024
	for n*4 > size*3 {
		size *= 2
	}
	old := t.cells
	t.cells = make([]extCell, size)
	for i := range t.cells {
		t.cells[i].slot = noSlot
	}
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for _, c := range old {
		if c.slot != noSlot {
			i, _ := t.find(c.slot)
			t.cells[i] = c
			t.n++
		}
	}
}

// setAll adds entries for slots that have none (a bulk load's, which
// allocated them fresh), in table order: placeSorted sorts runs of them by
// home, so the table is written front to back instead of at random.
func (t *extRefs) setAll(p []extPending) {
	if len(p) == 0 {
		return
	}
	t.reserve(t.n + len(p))
	mask := uint64(len(t.cells) - 1)
	placeSorted(len(p), mask, func(k int) uint64 { return t.home(p[k].slot) }, func(k int, i uint64) {
		for t.cells[i].slot != noSlot {
			i = (i + 1) & mask
		}
		ref := p[k].ref
		t.cells[i] = extCell{slot: p[k].slot, chunk: uint32(ref >> 32), off: uint32(ref)}
		t.n++
	})
}

// each calls f for every entry, in table order; f may change the entry's
// ref through the pointer.
func (t *extRefs) each(f func(c *extCell)) {
	for i := range t.cells {
		if t.cells[i].slot != noSlot {
			f(&t.cells[i])
		}
	}
}
