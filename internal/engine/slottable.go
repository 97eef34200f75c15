package engine

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
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.init(len(old) * 2)
		for _, s := range old {
			if s != noSlot {
				t.place(e, s)
			}
		}
	}
	t.place(e, slot)
}

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
