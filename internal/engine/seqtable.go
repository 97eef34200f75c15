package engine

// seqTable maps a job's enqueue sequence number to its slot (beanstalkd
// addresses jobs by this number). Open addressing over a flat []uint32 like
// the id table: ~5 bytes per job, no pointers; the slab holds the keys.
type seqTable struct {
	slots []uint32
	n     int
}

func seqHash(seq uint64) uint64 { return seq * 0x9e3779b97f4a7c15 }

func (e *Engine) seqInit() {
	e.seqs.slots = make([]uint32, 1024)
	for i := range e.seqs.slots {
		e.seqs.slots[i] = noSlot
	}
}

func (e *Engine) seqLookup(seq uint64) uint32 {
	t := &e.seqs
	mask := uint64(len(t.slots) - 1)
	for i := seqHash(seq) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.jobs.get(s).seq == seq {
			return s
		}
	}
}

func (e *Engine) seqInsert(slot uint32) {
	t := &e.seqs
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.slots = make([]uint32, len(old)*2)
		for i := range t.slots {
			t.slots[i] = noSlot
		}
		t.n = 0
		for _, s := range old {
			if s != noSlot {
				e.seqInsert(s)
			}
		}
	}
	mask := uint64(len(t.slots) - 1)
	i := seqHash(e.jobs.get(slot).seq) & mask
	for t.slots[i] != noSlot {
		i = (i + 1) & mask
	}
	t.slots[i] = slot
	t.n++
}

func (e *Engine) seqRemove(slot uint32) {
	t := &e.seqs
	mask := uint64(len(t.slots) - 1)
	i := seqHash(e.jobs.get(slot).seq) & mask
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
			home := seqHash(e.jobs.get(t.slots[j]).seq) & mask
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
