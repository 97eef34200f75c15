package engine

import (
	"hash/maphash"

	"github.com/oklog/ulid/v2"
)

// The id table maps (queue, job id) to a slot (a slotTable). ULIDs — and
// client ids spelled as canonical ULIDs — are compared by their 16 bytes,
// other ids as strings.
//
// Jobs whose id needs no table entry: a server ULID carries the job's
// sequence number in the 48 bits after its timestamp (newULID), so the
// sequence table finds it — the id is decoded to a sequence number, looked
// up there and compared. Only the other jobs (client ids, and ULIDs made
// before ids carried their sequence number) have an entry here, which
// saves a 4-byte slot at 60–75 % load per job that has a server id.

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

// newULID makes the id of the job with sequence number seq put at now
// (unix ms): the timestamp, the sequence number (48 bits) and 32 random
// bits. Ids made this way sort in put order, and they are unique on a
// node without relying on chance.
func newULID(now int64, seq uint64, random uint32) ulid.ULID {
	var u ulid.ULID
	ms := uint64(now)
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6], u[7], u[8], u[9], u[10], u[11] = byte(seq>>40), byte(seq>>32), byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	u[12], u[13], u[14], u[15] = byte(random>>24), byte(random>>16), byte(random>>8), byte(random)
	return u
}

// ulidSeq is the sequence number a ULID made by newULID carries.
func ulidSeq(u *[16]byte) uint64 {
	return uint64(u[6])<<40 | uint64(u[7])<<32 | uint64(u[8])<<24 | uint64(u[9])<<16 | uint64(u[10])<<8 | uint64(u[11])
}

// bySeq reports whether the job's id is found through the sequence table
// (its ULID carries its own sequence number) rather than the id table. It
// depends only on the job's id and sequence number, which never change.
func (j *job) bySeq() bool { return j.flags&fULID != 0 && ulidSeq(&j.id) == j.seqNo() }

func (e *Engine) idInsert(slot uint32) {
	if !e.jobs.get(slot).bySeq() {
		e.ids.insert(e, slot)
	}
}

func (e *Engine) idRemove(slot uint32) {
	if !e.jobs.get(slot).bySeq() {
		e.ids.remove(e, slot)
	}
}

func (e *Engine) idLookup(queue uint32, k *idKey) uint32 {
	if k.isULID {
		if s := e.seqLookup(ulidSeq(&k.u)); s != noSlot && e.jobs.get(s).bySeq() && e.slotMatches(s, queue, k) {
			return s
		}
	}
	t := &e.ids
	t.flush(e)
	mask := uint64(len(t.slots) - 1)
	for i := t.h.key(queue, k) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.slotMatches(s, queue, k) {
			return s
		}
	}
}
