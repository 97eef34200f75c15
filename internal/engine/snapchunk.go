package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// Snapshot job chunks carry jobs as the slab holds them, so a restart
// copies records instead of decoding a record image per job and looking
// each id up: a chunk is the raw 64-byte job records of up to n slots plus
// what they point to outside the slab (queue names and TTRs of their
// classes, key strings, rare fields, reservations). The metadata (namespaces, queues, tokens, counters
// ...) still travels as an ordinary entry in the snapshot's first item.
//
// Only jobs that existed when the walk began (seq ≤ the counters record's
// seq) are written: a job put later has its put record in the log after
// the snapshot's position, so replay adds it, and leaving it out means no
// (queue, id) can appear twice in one snapshot — a job keeps its slot for
// life, and the walk visits each slot once. That is what lets the loader
// insert into the id table without looking the id up first.
//
// Layout (integers little endian; str = uvarint length ‖ bytes):
//
//	magic 0xC5 | version u8 (1) | record size u32 (64)
//	classes u32 × (id u32 | ns str | queue name str | ttr u32)
//	keys    u32 × (id u32 | key str)
//	jobs    u32 × record (record size bytes, the slab's in-memory layout;
//	               class and key hold the ids of the tables above)
//	exts   u32 × (job u32 | entry str)          rare fields (ext.go)
//	resvs  u32 × (job u32 | nonce u64 | until i64 | ttr u32 | origAt i64)
//
// The record layout is the machine's, which is why the record size is
// recorded and only little-endian machines write or read chunks; a build
// with another layout refuses the chunk (and so the snapshot) with an
// error instead of misreading it.

const (
	chunkMagic   = 0xC5
	chunkVersion = 1
	jobSize      = int(unsafe.Sizeof(job{}))
)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// IsChunk reports whether a snapshot item is a job chunk (else it is an
// encoded Entry).
func IsChunk(item []byte) bool { return len(item) > 0 && item[0] == chunkMagic }

// NextItem appends the next snapshot item to dst: first the metadata
// entry, then job chunks of at most n slots each. ok is false when the
// walk is over. Items load with Engine.LoadItem.
func (it *SnapshotIter) NextItem(dst []byte, n int) (item []byte, ok bool) {
	if !it.meta || !littleEndian {
		ent := it.Next(n)
		if ent == nil {
			return dst, false
		}
		return ent.Encode(dst), true
	}
	e := it.e
	if it.limit < e.jobs.next {
		it.limit = e.jobs.next
	}
	var slots []uint32
	var cidx, kidx []uint32
	cseen, kseen := map[uint32]bool{}, map[uint32]bool{}
	nx, nr := 0, 0
	// a run of slots holding only jobs put since the walk began yields
	// nothing: keep walking until a chunk has a job or the walk ends
	for it.slot < it.limit && len(slots) < n {
		slot := it.slot
		it.slot++
		j := e.jobs.get(slot)
		if j.state == StateNone || j.seqNo() > it.startSeq {
			continue
		}
		slots = append(slots, slot)
		if !cseen[j.cls] {
			cseen[j.cls] = true
			cidx = append(cidx, j.cls)
		}
		if j.key != 0 && !kseen[j.key] {
			kseen[j.key] = true
			kidx = append(kidx, j.key)
		}
		if j.flags&fHasExt != 0 {
			nx++
		}
		if j.state == StateReserved {
			nr++
		}
	}
	if len(slots) == 0 {
		return dst, false
	}
	b := append(dst, chunkMagic, chunkVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(jobSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cidx)))
	for _, ci := range cidx {
		k := e.cls.keys[ci]
		q := e.queues[k.queue]
		b = binary.LittleEndian.AppendUint32(b, ci)
		b = appendStr(b, q.ns.name)
		b = appendStr(b, q.name)
		b = binary.LittleEndian.AppendUint32(b, k.ttr)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(kidx)))
	for _, k := range kidx {
		b = binary.LittleEndian.AppendUint32(b, k)
		b = appendStr(b, e.keys.keys[k])
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(slots)))
	for _, slot := range slots {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(e.jobs.get(slot))), jobSize)...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(nx))
	for i, slot := range slots {
		if e.jobs.get(slot).flags&fHasExt != 0 {
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
			b = binary.AppendUvarint(b, uint64(len(e.exts.entry(slot))))
			b = append(b, e.exts.entry(slot)...)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(nr))
	for i, slot := range slots {
		if e.jobs.get(slot).state == StateReserved {
			r := e.resv[slot]
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
			b = binary.LittleEndian.AppendUint64(b, r.nonce)
			b = binary.LittleEndian.AppendUint64(b, uint64(r.until))
			b = binary.LittleEndian.AppendUint32(b, r.ttr)
			b = binary.LittleEndian.AppendUint64(b, uint64(r.origAt))
		}
	}
	return b, true
}

// LoadItem applies one snapshot item (NextItem's output, or an encoded
// Entry from snapshots written before job chunks existed) to an engine
// being rebuilt from a snapshot. A chunk whose bytes do not make sense is
// refused with an error wrapping ErrCorrupt; the engine is then unusable
// (the caller falls back to another snapshot).
func (e *Engine) LoadItem(item []byte) error {
	if !IsChunk(item) {
		ent, err := DecodeEntry(item, 0, 0)
		if err != nil {
			return err
		}
		e.Apply(ent)
		return nil
	}
	if err := e.loadChunk(item); err != nil {
		return fmt.Errorf("%w: job chunk: %v", ErrCorrupt, err)
	}
	return nil
}

type chunkReader struct {
	b   []byte
	err error
}

func (r *chunkReader) fail(what string) {
	if r.err == nil {
		r.err = errors.New("truncated or bad " + what)
	}
}

func (r *chunkReader) u32(what string) uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *chunkReader) u64(what string) uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *chunkReader) bytes(what string) []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.fail(what)
		return nil
	}
	v := r.b[k : k+int(n)]
	r.b = r.b[k+int(n):]
	return v
}

// count reads a table length, refusing one the remaining bytes cannot hold
// (each entry takes at least min bytes) so a bad count cannot make the
// loader allocate without bound.
func (r *chunkReader) count(what string, min int) int {
	n := r.u32(what)
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)) {
		r.fail(what)
		return 0
	}
	return int(n)
}

func (e *Engine) loadChunk(item []byte) error {
	if !littleEndian {
		return errors.New("job chunks are only read on little-endian machines")
	}
	r := chunkReader{b: item[1:]}
	if len(r.b) < 1 || r.b[0] != chunkVersion {
		return fmt.Errorf("unknown chunk version")
	}
	r.b = r.b[1:]
	if size := r.u32("record size"); r.err == nil && int(size) != jobSize {
		return fmt.Errorf("job records of %d bytes, this build's are %d (written by another version)", size, jobSize)
	}
	type class struct {
		q   *queue
		ttr uint32
		id  uint32 // in this engine, once a job has taken it
	}
	classes := map[uint32]*class{}
	for i, n := 0, r.count("class table", 10); i < n; i++ {
		id := r.u32("class id")
		ns, name := r.bytes("namespace"), r.bytes("queue name")
		ttr := r.u32("ttr")
		if r.err != nil {
			break
		}
		q := e.lookupQueue(string(ns), string(name))
		if q == nil {
			return fmt.Errorf("job of unknown queue %q in namespace %q", name, ns)
		}
		classes[id] = &class{q: q, ttr: ttr}
	}
	keys := map[uint32]string{}
	for i, n := 0, r.count("key table", 5); i < n; i++ {
		id := r.u32("key id")
		k := r.bytes("key")
		if r.err == nil && (id == 0 || len(k) == 0) {
			r.fail("key")
		}
		keys[id] = string(k)
	}
	n := r.count("job count", jobSize)
	if r.err != nil {
		return r.err
	}
	recs := r.b[:n*jobSize]
	r.b = r.b[n*jobSize:]
	exts := make(map[uint32][]byte)
	for i, m := 0, r.count("rare-field table", 5); i < m; i++ {
		at := r.u32("rare-field job")
		b := r.bytes("rare fields")
		if r.err == nil && (int(at) >= n || !validExt(b)) {
			r.fail("rare fields")
		}
		exts[at] = b
	}
	resvs := make(map[uint32]resvInfo)
	for i, m := 0, r.count("reservation table", 32); i < m; i++ {
		at := r.u32("reservation job")
		ri := resvInfo{nonce: r.u64("nonce"), until: int64(r.u64("until")), ttr: r.u32("ttr"), origAt: int64(r.u64("origin"))}
		if r.err == nil && int(at) >= n {
			r.fail("reservation job")
		}
		resvs[uint32(at)] = ri
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("chunk end")
	}
	if r.err != nil {
		return r.err
	}
	// check every record before installing any, so a bad chunk leaves
	// nothing half-loaded behind
	var rec job
	for i := 0; i < n; i++ {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&rec)), jobSize), recs[i*jobSize:])
		if rec.state < StateDelayed || rec.state > StateCompleted {
			return fmt.Errorf("job %d: bad state %d", i, rec.state)
		}
		if classes[rec.cls] == nil {
			return fmt.Errorf("job %d: class %d not in the chunk's table", i, rec.cls)
		}
		if _, ok := keys[rec.key]; rec.key != 0 && !ok {
			return fmt.Errorf("job %d: key id %d not in the chunk's table", i, rec.key)
		}
		if _, ok := resvs[uint32(i)]; ok != (rec.state == StateReserved) {
			return fmt.Errorf("job %d: reservation does not match its state", i)
		}
		if _, ok := exts[uint32(i)]; ok != (rec.flags&fHasExt != 0) || (rec.flags&fULID == 0 && !ok) {
			return fmt.Errorf("job %d: rare fields do not match its flags", i)
		}
	}
	for i := 0; i < n; i++ {
		slot := e.jobs.alloc()
		j := e.jobs.get(slot)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(j)), jobSize), recs[i*jobSize:])
		c := classes[j.cls]
		q := c.q
		if c.id == 0 {
			c.id = e.cls.ref(classKey{q.idx, c.ttr})
		} else {
			e.cls.refs[c.id]++
		}
		state := j.state
		j.cls, j.state, j.hidx = c.id, StateNone, 0
		if j.key != 0 {
			j.key = e.keys.ref(keys[j.key])
		}
		e.seq = max(e.seq, j.seqNo())
		var x jobExt
		if b, ok := exts[uint32(i)]; ok {
			e.exts.setRaw(slot, b)
			x.decode(b)
			e.indexTags(slot, x.tags, true)
			if x.expire != 0 {
				e.ttl.push(ttlEnt{expire: x.expire, slot: slot, seq: j.seqNo()})
			}
		}
		e.trackBlob(j.payload, 1)
		e.trackBlob(x.result, 1)
		e.ids.insert(e, slot)
		e.seqs.insert(e, slot)
		if j.key != 0 && (state != StateDead && state != StateCompleted) {
			e.chainAdd(q, slot)
		}
		switch state {
		case StateReserved:
			ri := resvs[uint32(i)]
			j.setAt(ri.origAt)
			e.placeReserved(q, slot, ri)
		case StateDead:
			e.setState(q, j, StateDead)
			e.hpush(&q.dead, slot)
		case StateCompleted:
			e.setState(q, j, StateCompleted)
			e.tpush(&e.completed, x.retainUntil, slot)
		default:
			e.placePending(q, slot)
		}
		if j.key != 0 {
			e.refresh(q, j.key)
		}
	}
	return nil
}
