package engine

import (
	"hash/maphash"

	"github.com/oklog/ulid/v2"
)

// The id table maps (queue, job id) to a slot with open addressing and
// linear probing over a flat []uint32: ~5 bytes per job, no pointers. The
// slab is the key storage: a probe compares against the job in the slot.
// Deletion shifts later members of the probe run back, so there are no
// tombstones to sweep.

type idTable struct {
	slots []uint32 // noSlot = empty
	n     int
	seed  maphash.Seed
}

func newIDTable() idTable {
	t := idTable{seed: maphash.MakeSeed(), slots: make([]uint32, 1024)}
	for i := range t.slots {
		t.slots[i] = noSlot
	}
	return t
}

// idKey is a job id in the form the table compares: server ULIDs (and client
// ids spelled as canonical ULIDs) by their 16 bytes, other ids as strings.
type idKey struct {
	isULID bool
	u      [16]byte
	s      string
}

func makeIDKey(id string) idKey {
	if len(id) == ulid.EncodedSize && isUpperCrockford(id) {
		if u, err := ulid.ParseStrict(id); err == nil {
			return idKey{isULID: true, u: u}
		}
	}
	return idKey{s: id}
}

func isUpperCrockford(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (e *Engine) hashKey(queue uint32, k *idKey) uint64 {
	var h maphash.Hash
	h.SetSeed(e.ids.seed)
	var b [5]byte
	b[0], b[1], b[2], b[3] = byte(queue), byte(queue>>8), byte(queue>>16), byte(queue>>24)
	if k.isULID {
		b[4] = 1
		h.Write(b[:])
		h.Write(k.u[:])
	} else {
		h.Write(b[:])
		h.WriteString(k.s)
	}
	return h.Sum64()
}

func (e *Engine) slotKey(slot uint32) idKey {
	j := e.jobs.get(slot)
	if j.flags&fULID != 0 {
		return idKey{isULID: true, u: j.id}
	}
	return idKey{s: e.ext[slot].clientID}
}

func (e *Engine) hashSlot(slot uint32) uint64 {
	k := e.slotKey(slot)
	return e.hashKey(e.jobs.get(slot).queue, &k)
}

func (e *Engine) slotMatches(slot, queue uint32, k *idKey) bool {
	j := e.jobs.get(slot)
	if j.queue != queue {
		return false
	}
	if k.isULID {
		return j.flags&fULID != 0 && j.id == k.u
	}
	return j.flags&fULID == 0 && e.ext[slot].clientID == k.s
}

func (e *Engine) idLookup(queue uint32, k *idKey) uint32 {
	t := &e.ids
	mask := uint64(len(t.slots) - 1)
	for i := e.hashKey(queue, k) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.slotMatches(s, queue, k) {
			return s
		}
	}
}

func (e *Engine) idInsert(slot uint32) {
	t := &e.ids
	if (t.n+1)*4 > len(t.slots)*3 {
		e.idGrow()
	}
	mask := uint64(len(t.slots) - 1)
	i := e.hashSlot(slot) & mask
	for t.slots[i] != noSlot {
		i = (i + 1) & mask
	}
	t.slots[i] = slot
	t.n++
}

func (e *Engine) idRemove(slot uint32) {
	t := &e.ids
	mask := uint64(len(t.slots) - 1)
	i := e.hashSlot(slot) & mask
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
			home := e.hashSlot(t.slots[j]) & mask
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

func (e *Engine) idGrow() {
	t := &e.ids
	old := t.slots
	t.slots = make([]uint32, len(old)*2)
	for i := range t.slots {
		t.slots[i] = noSlot
	}
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == noSlot {
			continue
		}
		i := e.hashSlot(s) & mask
		for t.slots[i] != noSlot {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
