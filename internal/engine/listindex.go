package engine

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/tidwall/btree"
)

// Listing indexes (docs/api.md, list; list.go walks them). Two per queue,
// kept by setState, which every change of a job's state goes through:
//
//   - the queue's sequence blocks: for each block of 4096 consecutive
//     sequence numbers (one page of the sequence index, seqtable.go) that
//     holds jobs of the queue, how many it holds in each state. A listing
//     in enqueue order walks the sequence index only over the blocks that
//     hold jobs of the listed states, so a queue that is a small share of
//     every job never reads the others' pages. It costs one small record
//     per (queue, block) pair, not per job: a ready or delayed job pays
//     nothing beyond it;
//   - per state other than ready and delayed (blocked, reserved, dead,
//     completed), an index of the queue's jobs in that state by id, the
//     order those listings answer in (idindex.go: a sorted slice while
//     small, a B-tree once large). Ready and delayed jobs, the bulk of
//     any large queue, are never in one; their listings walk the heaps
//     they already live in.
type queueLists struct {
	blocks *btree.BTreeG[*seqBlock] // in order, for the walks
	byIdx  map[uint64]*seqBlock     // the same, for updates
	// the blocks used last: puts fill the newest block while takes and
	// acks empty the oldest, so most updates hit one of these
	hot   [2]*seqBlock
	probe seqBlock
	byID  [len(idIndexed)]*idIndex
}

// seqBlock counts a queue's jobs per state in one block of sequence numbers.
type seqBlock struct {
	idx   uint64 // seq >> seqPageBits
	n     [StateCompleted]uint32
	total uint32
}

// count is the number of the block's jobs in the states of mask.
func (b *seqBlock) count(mask uint8) uint32 {
	var c uint32
	for s := StateDelayed; s <= StateCompleted; s++ {
		if mask&(1<<s) != 0 {
			c += b.n[s-1]
		}
	}
	return c
}

func lessBlock(a, b *seqBlock) bool { return a.idx < b.idx }

// idIndexed are the states whose jobs a queue keeps in an id index.
var idIndexed = [...]State{StateBlocked, StateReserved, StateDead, StateCompleted}

func idIndexOf(s State) int {
	switch s {
	case StateBlocked:
		return 0
	case StateReserved:
		return 1
	case StateDead:
		return 2
	case StateCompleted:
		return 3
	}
	return -1
}

// block returns the queue's record of block idx, creating it.
func (l *queueLists) block(idx uint64) *seqBlock {
	if b := l.hot[0]; b != nil && b.idx == idx {
		return b
	}
	b := l.hot[1]
	if b == nil || b.idx != idx {
		if b = l.byIdx[idx]; b == nil {
			if l.blocks == nil {
				l.blocks = btree.NewBTreeGOptions(lessBlock, btree.Options{Degree: 16, NoLocks: true})
				l.byIdx = make(map[uint64]*seqBlock)
			}
			b = &seqBlock{idx: idx}
			l.blocks.Set(b)
			l.byIdx[idx] = b
		}
	}
	l.hot[0], l.hot[1] = b, l.hot[0]
	return b
}

// noteState keeps the listing indexes as the job j of q goes from its
// current state to s (setState); slot is j's slot.
func (e *Engine) noteState(q *queue, slot uint32, j *job, s State) {
	old := j.state
	if old == s {
		return
	}
	l := &q.lists
	b := l.block(j.seqNo() >> seqPageBits)
	if old != StateNone {
		b.n[old-1]--
		b.total--
	}
	if s != StateNone {
		b.n[s-1]++
		b.total++
	}
	if b.total == 0 {
		l.blocks.Delete(b)
		delete(l.byIdx, b.idx)
		for i := range l.hot {
			if l.hot[i] == b {
				l.hot[i] = nil
			}
		}
	}
	oi, ni := idIndexOf(old), idIndexOf(s)
	if oi < 0 && ni < 0 {
		return
	}
	it := e.idItemOf(slot)
	if oi >= 0 {
		l.byID[oi].Delete(it)
	}
	if ni >= 0 {
		t := l.byID[ni]
		if t == nil {
			t = newIDIndex(e.idLess)
			l.byID[ni] = t
		}
		if e.bulk.on {
			// A snapshot lists a queue's jobs mostly in id order: Load
			// appends such an item to a tree's last leaf with one
			// comparison (a full descent otherwise, 0.45 s of a restart of
			// 5 M keyed jobs) and leaves full leaves behind instead of
			// half-full ones; an item out of order it inserts as Set does.
			t.Load(it)
		} else {
			t.Set(it)
		}
	}
}

// idItem is a job in an id index (16 bytes): the first 12 bytes of its id
// (zero padded, big-endian) decide most comparisons without reading the
// job; equal prefixes compare the whole ids. slot noSlot is the pivot of a
// cursor (Engine.idPivot), placed before a job with the same id.
type idItem struct {
	k0   uint64
	k1   uint32
	slot uint32
}

const idPrefixLen = 12

func idPrefix[T string | []byte](s T) (k0 uint64, k1 uint32) {
	for i := 0; i < idPrefixLen; i++ {
		var c byte
		if i < len(s) {
			c = s[i]
		}
		if i < 8 {
			k0 = k0<<8 | uint64(c)
		} else {
			k1 = k1<<8 | uint32(c)
		}
	}
	return k0, k1
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidPrefix is idPrefix of a ULID's text, read from its bits (the text's
// first character holds the top 3 bits, each next one 5 more) rather than
// by encoding all 26 characters: a take and an ack each compute one.
func ulidPrefix(u *[16]byte) (k0 uint64, k1 uint32) {
	// 12 characters are the top 3 + 11 × 5 = 58 bits: all in the first 8 bytes
	hi := binary.BigEndian.Uint64(u[0:8])
	k0 = uint64(crockford[hi>>61])
	for sh := 56; sh >= 26; sh -= 5 {
		k0 = k0<<8 | uint64(crockford[hi>>sh&31])
	}
	for sh := 21; sh >= 6; sh -= 5 {
		k1 = k1<<8 | uint32(crockford[hi>>sh&31])
	}
	return k0, k1
}

func (e *Engine) idItemOf(slot uint32) idItem {
	j := e.jobs.get(slot)
	var it idItem
	if j.flags&fULID != 0 {
		it.k0, it.k1 = ulidPrefix(&j.id)
	} else {
		it.k0, it.k1 = idPrefix(e.exts.clientID(slot))
	}
	it.slot = slot
	return it
}

func pivotItem(id string) idItem {
	k0, k1 := idPrefix(id)
	return idItem{k0: k0, k1: k1, slot: noSlot}
}

func (e *Engine) idLess(a, b idItem) bool {
	if a.k0 != b.k0 {
		return a.k0 < b.k0
	}
	if a.k1 != b.k1 {
		return a.k1 < b.k1
	}
	if a.slot == b.slot {
		return false
	}
	if c := e.idCompare(a.slot, b.slot); c != 0 {
		return c < 0
	}
	// same id: the pivot first, then (never in one index) by slot
	return a.slot == noSlot || b.slot != noSlot && a.slot < b.slot
}

// idCompare compares the ids of two jobs (or the pivot) as strings.
func (e *Engine) idCompare(a, b uint32) int {
	if a != noSlot && b != noSlot {
		ja, jb := e.jobs.get(a), e.jobs.get(b)
		if ja.flags&jb.flags&fULID != 0 {
			// a ULID's text sorts as its bytes do
			return bytes.Compare(ja.id[:], jb.id[:])
		}
	}
	var ba, bb [ulid.EncodedSize]byte
	return strings.Compare(e.idText(a, &ba), e.idText(b, &bb))
}

// idText is the id of the job in slot (the pivot for noSlot), using buf
// for a ULID's text. The result is only compared, never kept.
func (e *Engine) idText(slot uint32, buf *[ulid.EncodedSize]byte) string {
	if slot == noSlot {
		return e.idPivot
	}
	j := e.jobs.get(slot)
	if j.flags&fULID != 0 {
		_ = ulid.ULID(j.id).MarshalTextTo(buf[:])
		return string(buf[:])
	}
	return e.exts.clientID(slot)
}
