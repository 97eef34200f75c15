package engine

import "math/bits"

// slotTable is an open-addressing hash set of slots over a flat []uint32
// (~5 bytes per job, no pointers): the slab is the key storage, so the
// table only needs a way to hash the key of the job in a slot. Linear
// probing; deletion shifts later members of the probe run back, so there
// are no tombstones to sweep. Lookups, which compare keys, live with each
// table's key type (idtable.go, seqtable.go).
type slotTable[H slotHasher] struct {
	slots []uint32 // noSlot = empty
	n     int
	h     H
	// During a bulk load (snapchunk.go) inserted slots wait in pending and
	// flush places them all at once, in table order (placeAll). Placed one
	// by one between the load's other per-job work, each was a cache miss
	// in a table of millions: 0.55 s of a 5 M-job restart
	// (docs/benchmarks.md, "Restart with far-future jobs"). Lookups and
	// removals flush first, so deferring only changes when the work is
	// done.
	deferring bool
	pending   []uint32
}

// len is the number of slots held, placed or pending.
func (t *slotTable[H]) len() int { return t.n + len(t.pending) }

// flush places the pending slots and ends deferring.
func (t *slotTable[H]) flush(e *Engine) {
	if !t.deferring {
		return
	}
	t.deferring = false
	t.placeAll(e, t.pending)
	t.pending = nil
}

type slotHasher interface {
	hash(e *Engine, slot uint32) uint64
}

func (t *slotTable[H]) init(size int) {
	t.slots = make([]uint32, size)
	for i := range t.slots {
		t.slots[i] = noSlot
	}
	t.n = 0
}

// slotTableSize is the table size that holds n slots without growing.
func slotTableSize(n int) int {
	size := 1024
	for n*4 > size*3 {
		size *= 2
	}
	return size
}

func (t *slotTable[H]) insert(e *Engine, slot uint32) {
	if t.deferring {
		t.pending = append(t.pending, slot)
		return
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(e, len(t.slots)*2)
	}
	t.place(e, slot)
}

// resize rebuilds the table at size slots (a power of two that holds its
// members).
func (t *slotTable[H]) resize(e *Engine, size int) {
	old := t.slots
	t.init(size)
	for _, s := range old {
		if s != noSlot {
			t.place(e, s)
		}
	}
}

// placeAll inserts many slots at once, in table order (placeSorted).
func (t *slotTable[H]) placeAll(e *Engine, slots []uint32) {
	if len(slots) == 0 {
		return
	}
	if need := slotTableSize(t.n + len(slots)); need > len(t.slots) {
		t.resize(e, need)
	}
	mask := uint64(len(t.slots) - 1)
	placeSorted(len(slots), mask, func(k int) uint64 { return t.h.hash(e, slots[k]) & mask }, func(k int, i uint64) {
		for t.slots[i] != noSlot {
			i = (i + 1) & mask
		}
		t.slots[i] = slots[k]
		t.n++
	})
}

// placeSorted calls place for n items of a table of mask+1 cells in the
// order of their home positions. In runs of up to placeRun items, each
// item's home is computed in the order given (a bulk load's: slot order,
// so the jobs' records are read front to back), the run is sorted by home
// with one counting-sort pass over the top 16 bits, and placed in that
// order, so the table is written front to back instead of at random. A run
// bounds the scratch memory to 16 bytes per item of it.
func placeSorted(n int, mask uint64, home func(k int) uint64, place func(k int, home uint64)) {
	if n < 4096 || mask >= 1<<32 {
		for k := 0; k < n; k++ {
			place(k, home(k))
		}
		return
	}
	shift := max(bits.Len64(mask)-16, 0)
	start := make([]int, mask>>shift+2)
	run := min(n, placeRun)
	homes := make([]uint64, run)  // home<<32 | index in the run, in the order given
	sorted := make([]uint64, run) // the same, by home
	for base := 0; base < n; base += run {
		m := min(n-base, run)
		clear(start)
		for i := 0; i < m; i++ {
			h := home(base + i)
			homes[i] = h<<32 | uint64(i)
			start[h>>shift+1]++
		}
		for i := 1; i < len(start); i++ {
			start[i] += start[i-1]
		}
		for _, v := range homes[:m] {
			b := v >> 32 >> shift
			sorted[start[b]] = v
			start[b]++
		}
		for _, v := range sorted[:m] {
			place(base+int(uint32(v)), v>>32)
		}
	}
}

// placeRun is the most slots placeAll sorts at once (a variable so tests
// can sort in several runs).
var placeRun = 1 << 20

func (t *slotTable[H]) place(e *Engine, slot uint32) {
	mask := uint64(len(t.slots) - 1)
	i := t.h.hash(e, slot) & mask
	for t.slots[i] != noSlot {
		i = (i + 1) & mask
	}
	t.slots[i] = slot
	t.n++
}

func (t *slotTable[H]) remove(e *Engine, slot uint32) {
	t.flush(e)
	mask := uint64(len(t.slots) - 1)
	i := t.h.hash(e, slot) & mask
	for t.slots[i] != slot {
		if t.slots[i] == noSlot {
			return
		}
		i = (i + 1) & mask
	}
	j := i
	for {
		t.slots[i] = noSlot
		for {
			j = (j + 1) & mask
			if t.slots[j] == noSlot {
				t.n--
				return
			}
			home := t.h.hash(e, t.slots[j]) & mask
			// Leave j in place while its home lies cyclically in (i, j].
			if i <= j {
				if i < home && home <= j {
					continue
				}
			} else if i < home || home <= j {
				continue
			}
			break
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}
