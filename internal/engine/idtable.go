package engine

import (
	"hash/maphash"

	"github.com/oklog/ulid/v2"
)

// The id table maps (queue, job id) to a slot (a slotTable). ULIDs — and
// client ids spelled as canonical ULIDs — are compared by their 16 bytes,
// other ids as strings.

type idHasher struct{ seed maphash.Seed }

func (h idHasher) hash(e *Engine, slot uint32) uint64 {
	k := e.slotKey(slot)
	return h.key(e.jq(e.jobs.get(slot)), &k)
}

func newIDTable() slotTable[idHasher] {
	t := slotTable[idHasher]{h: idHasher{seed: maphash.MakeSeed()}}
	t.init(1024)
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

func (h idHasher) key(queue uint32, k *idKey) uint64 {
	var mh maphash.Hash
	mh.SetSeed(h.seed)
	var b [5]byte
	b[0], b[1], b[2], b[3] = byte(queue), byte(queue>>8), byte(queue>>16), byte(queue>>24)
	if k.isULID {
		b[4] = 1
		mh.Write(b[:])
		mh.Write(k.u[:])
	} else {
		mh.Write(b[:])
		mh.WriteString(k.s)
	}
	return mh.Sum64()
}

func (e *Engine) slotKey(slot uint32) idKey {
	j := e.jobs.get(slot)
	if j.flags&fULID != 0 {
		return idKey{isULID: true, u: j.id}
	}
	return idKey{s: e.exts.clientID(slot)}
}

func (e *Engine) slotMatches(slot, queue uint32, k *idKey) bool {
	j := e.jobs.get(slot)
	if e.jq(j) != queue {
		return false
	}
	if k.isULID {
		return j.flags&fULID != 0 && j.id == k.u
	}
	return j.flags&fULID == 0 && e.exts.clientID(slot) == k.s
}

func (e *Engine) idLookup(queue uint32, k *idKey) uint32 {
	t := &e.ids
	mask := uint64(len(t.slots) - 1)
	for i := t.h.key(queue, k) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.slotMatches(s, queue, k) {
			return s
		}
	}
}
