package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// Snapshot job chunks carry jobs as the slab holds them, so a restart
// copies records instead of decoding a record image per job and looking
// each id up: a chunk is the raw job records of up to n slots plus what
// they point to outside the slab (queue names, TTRs and priorities of their
// classes, key strings, rare fields, reservations, attempt counts). The
// metadata (namespaces, queues, tokens, counters, the load hints that size
// the loader's tables: loadhints.go ...) still travels as an ordinary
// entry in the snapshot's first item.
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
//	magic 0xC5 | version u8 (2) | record size u32 (56)
//	classes u32 × (id u32 | ns str | queue name str | ttr u32 | prio u32)
//	keys    u32 × (id u32 | key str)
//	jobs    u32 × record (record size bytes, the slab's in-memory layout;
//	               class and key hold the ids of the tables above)
//	exts   u32 × (job u32 | entry str)          rare fields (ext.go)
//	resvs  u32 × (job u32 | nonce u64 | until i64 | ttr u32 | origAt i64 | attempt u32)
//	attempts u32 × (job u32 | attempt u32)      taken jobs not reserved now
//
// job is the index of the job in the chunk's record table. Version-1
// chunks (64-byte records that held the priority and attempt count
// themselves, classes without a priority, no attempt table; jobV1) still
// load.
//
// The record layout is the machine's, which is why the record size is
// recorded and only little-endian machines write or read chunks; a build
// with another layout refuses the chunk (and so the snapshot) with an
// error instead of misreading it.

const (
	chunkMagic     = 0xC5
	chunkVersion   = 2
	chunkVersionV1 = 1
	jobSize        = int(unsafe.Sizeof(job{}))
	jobSizeV1      = int(unsafe.Sizeof(jobV1{}))
)

// jobV1 is the job record of version-1 chunks (64 bytes).
type jobV1 struct {
	id      [16]byte
	seqLo   uint32
	atLo    uint32
	seqHi   uint16
	atHi    int16
	prio    uint32
	cls     uint32
	key     uint32
	payload BlobRef
	hidx    uint32
	attempt uint32
	tries   uint16
	state   State
	flags   uint8
}

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
	nx, nr, na := 0, 0, 0
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
		if j.flags&fAttempt != 0 {
			na++
		}
	}
	if len(slots) == 0 {
		it.Close()
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
		b = binary.LittleEndian.AppendUint32(b, k.prio)
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
			b = binary.LittleEndian.AppendUint32(b, r.attempt)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(na))
	for i, slot := range slots {
		if e.jobs.get(slot).flags&fAttempt != 0 {
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
			b = binary.LittleEndian.AppendUint32(b, e.attempts[slot])
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
		if e.bulk.on {
			e.FinishBulkLoad()
			defer e.StartBulkLoad()
		}
		e.Apply(ent)
		return nil
	}
	pc, err := ParseChunk(item)
	if err != nil {
		return err
	}
	return e.LoadParsed(pc)
}

// A bulk load (StartBulkLoad ... FinishBulkLoad around the LoadItem calls
// of one snapshot) puts the delayed jobs of chunks into the delayed heap's
// array in load order, with their activation times alongside, and builds
// the heap once at the end (Floyd's bottom-up construction, O(n), comparing
// the times in that array). Pushing each job instead compares it with
// random other jobs' records, a cache miss each: with a million-job heap
// that was the largest part of a restart (22 % of the load at 30 M jobs,
// docs/benchmarks.md). Nothing but LoadItem may run between the two calls;
// an encoded entry among the items (the metadata entry, first) is applied
// with the heap in order.
//
// The tag index is built at the end too: a bulk load lists each tag's
// slots in a slice (an append, no hashing of the slot) and
// FinishBulkLoad makes each tag's set once, at its final size, instead of
// inserting into sets that grow (and rehash) as they go — 5.8 s of a
// 100 M-job restart (docs/benchmarks.md).
type bulkLoad struct {
	on   bool
	at   []int64              // activation of delayed.s[i], ms; valid while on
	tags map[string]*[]uint32 // tagKey → slots tagged so, in load order
	// keyIDs maps the snapshot writer's key ids to this engine's (loadKey)
	keyIDs []uint32
	chains []chainTail // by key id (loadChainAdd)
	// unsorted lists the chains FinishBulkLoad must sort (loadChainAdd)
	unsorted []unsortedChain
	key      []byte // scratch for tagKey lookups without a string
}

// StartBulkLoad begins a bulk load (above).
func (e *Engine) StartBulkLoad() {
	if e.bulk.on {
		return
	}
	e.bulk.on = true
	e.bulk.at = e.bulk.at[:0]
	e.exts.deferring = true
	e.seqs.over.deferring = true
	e.ids.deferring = true
	if n := len(e.jobs.chunks) * chunkSize; e.jobs.live == 0 && len(e.delayed.s) == 0 && n > cap(e.delayed.s) {
		// The slab was sized from the snapshot's job count (its metadata
		// comes first): size the arrays alike rather than double them
		// from nothing, which copies and touches twice the memory (3.9 s
		// of a 100 M-job load). FinishBulkLoad gives back what the
		// delayed jobs did not use.
		e.delayed.s = make([]uint32, 0, n)
		e.bulk.at = make([]int64, 0, n)
	}
	for _, slot := range e.delayed.s {
		e.bulk.at = append(e.bulk.at, e.jobs.get(slot).atMS())
	}
}

// FinishBulkLoad puts the delayed jobs a bulk load added in heap order.
// It is a no-op outside a bulk load.
func (e *Engine) FinishBulkLoad() {
	if !e.bulk.on {
		return
	}
	s, at := e.delayed.s, e.bulk.at
	less := func(a, b int) bool {
		if at[a] != at[b] {
			return at[a] < at[b]
		}
		return e.jobs.get(s[a]).seqNo() < e.jobs.get(s[b]).seqNo()
	}
	n := len(s)
	for i := n/2 - 1; i >= 0; i-- {
		for p := i; ; {
			m := 2*p + 1
			if m >= n {
				break
			}
			if r := m + 1; r < n && less(r, m) {
				m = r
			}
			if !less(m, p) {
				break
			}
			s[p], s[m] = s[m], s[p]
			at[p], at[m] = at[m], at[p]
			p = m
		}
	}
	for i, slot := range s {
		e.jobs.get(slot).hidx = uint32(i)
	}
	if cap(s) > 2*len(s)+4096 {
		e.delayed.s = append([]uint32(nil), s...)
	}
	e.sortLoadedChains()
	e.exts.flush()
	e.seqs.over.flush(e)
	e.ids.flush(e) // after the arena's: a client id is read from it to hash
	for k, p := range e.bulk.tags {
		slots := *p
		set := e.tagIndex[k]
		if set == nil {
			set = make(map[uint32]struct{}, len(slots))
			e.tagIndex[k] = set
		}
		for _, slot := range slots {
			set[slot] = struct{}{}
		}
	}
	e.bulk = bulkLoad{}
	e.hints.tags, e.hints.perTag = 0, 0
}

// unsortedChain is a chain a bulk load appended to out of seq order.
type unsortedChain struct {
	c      *chain
	q, key uint32
}

// sortLoadedChains puts in seq order the chains a bulk load appended to
// out of order (loadChainAdd) and makes their heads what the key mode
// allows.
func (e *Engine) sortLoadedChains() {
	type entry struct {
		seq  uint64
		slot uint32
	}
	var buf []entry
	for _, u := range e.bulk.unsorted {
		q := e.queues[u.q]
		if q == nil || q.chains[u.key] != u.c {
			continue // the chain went away (refresh)
		}
		live := u.c.live()
		buf = buf[:0]
		for _, s := range live {
			buf = append(buf, entry{e.jobs.get(s).seqNo(), s})
		}
		slices.SortFunc(buf, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
		for i := range buf {
			live[i] = buf[i].slot
		}
		e.refresh(q, u.key)
	}
	e.bulk.unsorted = nil
}

// bulkTags notes the tags of a job a bulk load adds, for FinishBulkLoad.
func (e *Engine) bulkTags(slot uint32, tags []string) {
	if e.bulk.tags == nil {
		e.bulk.tags = make(map[string]*[]uint32, e.hints.tags)
	}
	for i := 0; i+1 < len(tags); i += 2 {
		b := append(append(append(e.bulk.key[:0], tags[i]...), 0), tags[i+1]...)
		e.bulk.key = b
		if p := e.bulk.tags[string(b)]; p != nil { // no string made for a known tag
			*p = append(*p, slot)
		} else {
			// the snapshot's tag counts (loadhints.go) size each tag's
			// list at the mean, instead of from one slot up
			l := append(make([]uint32, 0, max(e.hints.perTag, 1)), slot)
			e.bulk.tags[string(b)] = &l
		}
	}
}

// bulkDelay places a pending job due later than now during a bulk load:
// placePending without the heap push.
func (e *Engine) bulkDelay(q *queue, slot uint32) {
	j := e.jobs.get(slot)
	e.setState(q, slot, j, StateDelayed)
	if len(e.delayed.s) == cap(e.delayed.s) {
		// double rather than let append grow a slice of a hundred
		// million by a quarter at a time
		c := max(2*cap(e.delayed.s), 1024)
		e.delayed.s = append(make([]uint32, 0, c), e.delayed.s...)
		e.bulk.at = append(make([]int64, 0, c), e.bulk.at...)
	}
	e.delayed.s = append(e.delayed.s, slot)
	e.bulk.at = append(e.bulk.at, j.atMS())
	e.noteFar(slot)
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

// ParsedChunk is a job chunk read and checked without an engine
// (ParseChunk), so that a loader can parse the next chunk on another
// goroutine while the engine installs this one (Engine.LoadParsed). It
// points into the item's bytes, which must stay unchanged until then.
type ParsedChunk struct {
	v1      bool
	recSize int
	n       int
	recs    []byte
	classes map[uint32]*chunkClass
	// the keyed records' key bytes, found in the chunk's key table by
	// ParseChunk, which runs on a goroutine of its own: a lookup per
	// keyed job off the installing one
	keyed    []chunkKey
	exts     []chunkExt
	resvs    []chunkResv
	attempts []chunkAttempt
}

type chunkClass struct {
	ns, name  []byte
	ttr, prio uint32
	q         *queue // in the installing engine
	id        uint32 // in that engine, once a job has taken it
}

// The tables below list jobs by their index in the record table, in
// increasing order (NextItem writes them so), which lets the loops walk
// them with a cursor instead of a map lookup per job.
type chunkExt struct {
	at uint32
	b  []byte
}

type chunkResv struct {
	at uint32
	ri resvInfo
}

type chunkAttempt struct{ at, a uint32 }

type chunkKey struct {
	at uint32
	b  []byte
}

// ParseChunk reads and checks a job chunk (IsChunk) for LoadParsed. A
// chunk whose bytes do not make sense is refused with an error wrapping
// ErrCorrupt.
func ParseChunk(item []byte) (*ParsedChunk, error) {
	pc, err := parseChunk(item)
	if err != nil {
		return nil, fmt.Errorf("%w: job chunk: %v", ErrCorrupt, err)
	}
	return pc, nil
}

func parseChunk(item []byte) (*ParsedChunk, error) {
	if !littleEndian {
		return nil, errors.New("job chunks are only read on little-endian machines")
	}
	if !IsChunk(item) {
		return nil, errors.New("not a job chunk")
	}
	r := chunkReader{b: item[1:]}
	if len(r.b) < 1 || (r.b[0] != chunkVersion && r.b[0] != chunkVersionV1) {
		return nil, fmt.Errorf("unknown chunk version")
	}
	v1 := r.b[0] == chunkVersionV1
	r.b = r.b[1:]
	recSize := jobSize
	if v1 {
		recSize = jobSizeV1
	}
	if size := r.u32("record size"); r.err == nil && int(size) != recSize {
		return nil, fmt.Errorf("job records of %d bytes, this build's are %d (written by another version)", size, recSize)
	}
	minClass := 14
	if v1 {
		minClass = 10
	}
	// the tables are made at their size (count bounds it by the bytes)
	nc := r.count("class table", minClass)
	classes := make(map[uint32]*chunkClass, nc)
	for i := 0; i < nc; i++ {
		id := r.u32("class id")
		ns, name := r.bytes("namespace"), r.bytes("queue name")
		c := &chunkClass{ns: ns, name: name, ttr: r.u32("ttr")}
		if !v1 {
			c.prio = r.u32("priority")
		}
		if r.err != nil {
			break
		}
		classes[id] = c
	}
	nk := r.count("key table", 5)
	keys := make(map[uint32][]byte, nk)
	for i := 0; i < nk; i++ {
		id := r.u32("key id")
		k := r.bytes("key")
		if r.err == nil && (id == 0 || len(k) == 0) {
			r.fail("key")
		}
		keys[id] = k
	}
	n := r.count("job count", recSize)
	if r.err != nil {
		return nil, r.err
	}
	recs := r.b[:n*recSize]
	r.b = r.b[n*recSize:]
	var exts []chunkExt
	for i, m := 0, r.count("rare-field table", 5); i < m; i++ {
		at := r.u32("rare-field job")
		b := r.bytes("rare fields")
		if r.err == nil && (int(at) >= n || !validExt(b) || (i > 0 && at <= exts[i-1].at)) {
			r.fail("rare fields")
		}
		exts = append(exts, chunkExt{at, b})
	}
	var resvs []chunkResv
	minResv := 36
	if v1 {
		minResv = 32
	}
	for i, m := 0, r.count("reservation table", minResv); i < m; i++ {
		at := r.u32("reservation job")
		ri := resvInfo{nonce: r.u64("nonce"), until: int64(r.u64("until")), ttr: r.u32("ttr"), origAt: int64(r.u64("origin"))}
		if !v1 {
			ri.attempt = r.u32("attempt")
		}
		if r.err == nil && (int(at) >= n || (i > 0 && at <= resvs[i-1].at)) {
			r.fail("reservation job")
		}
		resvs = append(resvs, chunkResv{at, ri})
	}
	var attempts []chunkAttempt
	if !v1 {
		for i, m := 0, r.count("attempt table", 8); i < m; i++ {
			at, a := r.u32("attempt job"), r.u32("attempt")
			if r.err == nil && (int(at) >= n || a == 0 || (i > 0 && at <= attempts[i-1].at)) {
				r.fail("attempt")
			}
			attempts = append(attempts, chunkAttempt{at, a})
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("chunk end")
	}
	if r.err != nil {
		return nil, r.err
	}
	pc := &ParsedChunk{v1: v1, recSize: recSize, n: n, recs: recs, classes: classes, exts: exts, resvs: resvs, attempts: attempts}
	// check every record before installing any, so a bad chunk leaves
	// nothing half-loaded behind
	var j job
	var lastCls uint32
	xi, ri, ai := 0, 0, 0
	for i := 0; i < n; i++ {
		pc.rec(i, &j)
		at := uint32(i)
		hasExt := xi < len(exts) && exts[xi].at == at
		hasResv := ri < len(resvs) && resvs[ri].at == at
		hasAttempt := ai < len(attempts) && attempts[ai].at == at
		if hasExt {
			xi++
		}
		if hasResv {
			ri++
		}
		if hasAttempt {
			ai++
		}
		if j.state < StateDelayed || j.state > StateCompleted {
			return nil, fmt.Errorf("job %d: bad state %d", i, j.state)
		}
		if j.cls != lastCls || i == 0 {
			if classes[j.cls] == nil {
				return nil, fmt.Errorf("job %d: class %d not in the chunk's table", i, j.cls)
			}
			lastCls = j.cls
		}
		if j.key != 0 {
			k, ok := keys[j.key]
			if !ok {
				return nil, fmt.Errorf("job %d: key id %d not in the chunk's table", i, j.key)
			}
			pc.keyed = append(pc.keyed, chunkKey{at, k})
		}
		if hasResv != (j.state == StateReserved) {
			return nil, fmt.Errorf("job %d: reservation does not match its state", i)
		}
		if hasAttempt && j.state == StateReserved {
			return nil, fmt.Errorf("job %d: a reserved job's attempt count belongs to its reservation", i)
		}
		if hasExt != (j.flags&fHasExt != 0) || (j.flags&fULID == 0 && !hasExt) {
			return nil, fmt.Errorf("job %d: rare fields do not match its flags", i)
		}
	}
	return pc, nil
}

// rec reads record i into j, with the priority the record's version keeps
// elsewhere (and, for v1, the attempt count).
func (pc *ParsedChunk) rec(i int, j *job) (prio, attemptV1 uint32) {
	if !pc.v1 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(j)), jobSize), pc.recs[i*jobSize:])
		if c := pc.classes[j.cls]; c != nil {
			prio = c.prio
		}
		return prio, 0
	}
	var o jobV1
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&o)), jobSizeV1), pc.recs[i*jobSizeV1:])
	*j = job{id: o.id, seqLo: o.seqLo, atLo: o.atLo, seqHi: o.seqHi, atHi: o.atHi, cls: o.cls, key: o.key,
		payload: o.payload, hidx: o.hidx, tries: o.tries, state: o.state, flags: o.flags}
	return o.prio, o.attempt
}

// LoadParsed installs a chunk ParseChunk accepted, like LoadItem. A
// chunk naming a queue this engine does not have is refused (wrapping
// ErrCorrupt) before anything is installed.
func (e *Engine) LoadParsed(pc *ParsedChunk) error {
	for _, c := range pc.classes {
		c.q, c.id = e.lookupQueue(string(c.ns), string(c.name)), 0
		if c.q == nil {
			return fmt.Errorf("%w: job chunk: job of unknown queue %q in namespace %q", ErrCorrupt, c.name, c.ns)
		}
	}
	v1, n, classes, exts, resvs, attempts := pc.v1, pc.n, pc.classes, pc.exts, pc.resvs, pc.attempts
	rec := pc.rec
	xi, ri, ai, ki := 0, 0, 0, 0
	// Into a slab with no freed slots (a snapshot load's) the chunk's jobs
	// go to consecutive slots: copy their records in one move per slab
	// chunk rather than one per job (the per-job copy was a sixth of a
	// load, docs/benchmarks.md); the loop below then fixes each up in place.
	copied := !v1 && len(e.jobs.free) == 0
	if copied {
		e.copyRecords(pc.recs, n)
	}
	// most of a chunk's jobs share a class: look it up when it changes
	var lastCls uint32
	var c *chunkClass
	// v1 records carry their own priority, so their classes are looked up
	// per job; the last one found is kept, as a chunk's jobs mostly share it
	var lastKey classKey
	var lastID uint32
	// payload bytes per log segment, summed for runs of jobs whose
	// payloads share a segment (most do) instead of a map update per job
	var runSeg uint32
	var runBytes, runBlobs int64
	for i := 0; i < n; i++ {
		slot := e.jobs.alloc()
		j := e.jobs.get(slot)
		var prio, attempt uint32
		if !copied {
			prio, attempt = rec(i, j)
		}
		if !v1 && ai < len(attempts) && attempts[ai].at == uint32(i) {
			attempt = attempts[ai].a
			ai++
		}
		if c == nil || j.cls != lastCls {
			c, lastCls = classes[j.cls], j.cls
		}
		if copied {
			prio = c.prio
		}
		q := c.q
		switch {
		case v1:
			k := classKey{q.idx, c.ttr, prio}
			if lastID == 0 || k != lastKey {
				lastKey, lastID = k, e.cls.ref(k)
			} else {
				e.cls.refs[lastID]++
			}
			j.cls = lastID
		case c.id == 0:
			c.id = e.cls.ref(classKey{q.idx, c.ttr, c.prio})
			j.cls = c.id
		default:
			e.cls.refs[c.id]++
			j.cls = c.id
		}
		state := j.state
		j.state, j.hidx = StateNone, 0
		j.flags &^= fAttempt
		if j.key != 0 {
			j.key = e.loadKey(j.key, pc.keyed[ki].b) // ParseChunk listed every keyed record
			ki++
		}
		e.seq = max(e.seq, j.seqNo())
		var x jobExt
		if xi < len(exts) && exts[xi].at == uint32(i) {
			b := exts[xi].b
			xi++
			e.exts.addRaw(slot, b)
			x.decode(b)
			if e.bulk.on {
				e.bulkTags(slot, x.tags)
			} else {
				e.indexTags(slot, x.tags, true)
			}
			if x.expire != 0 {
				e.ttl.push(ttlEnt{expire: x.expire, slot: slot, seq: j.seqNo()})
			}
		}
		if p := j.payload; p.Len > 0 {
			if p.Segment != runSeg && runBytes > 0 {
				e.live[runSeg] += runBytes
				e.liveN[runSeg] += runBlobs
				runBytes, runBlobs = 0, 0
			}
			runSeg = p.Segment
			runBytes += int64(p.Len)
			runBlobs++
		}
		e.trackBlob(x.result, 1)
		e.idInsert(slot)
		e.seqs.insert(e, slot)
		chained := j.key != 0 && (state != StateDead && state != StateCompleted)
		var ch *chain
		if chained {
			ch = e.loadChainAdd(q, slot, j)
		}
		switch state {
		case StateReserved:
			ri2 := resvs[ri].ri
			ri++
			if v1 {
				ri2.attempt = attempt
			}
			j.setAt(ri2.origAt)
			e.placeReserved(q, slot, ri2)
		case StateDead:
			e.setState(q, slot, j, StateDead)
			e.hpush(&q.dead, slot)
		case StateCompleted:
			e.setState(q, slot, j, StateCompleted)
			e.tpush(&e.completed, x.retainUntil, slot)
		default:
			switch {
			case j.atMS() <= e.now:
				e.ripen(q, slot, ch) // the chain it is in, not looked up again
			case e.bulk.on:
				e.bulkDelay(q, slot)
			default:
				e.placePending(q, slot)
			}
		}
		if state != StateReserved {
			e.setAttempt(slot, attempt)
		}
		// A delayed job added behind the head of its key's chain changes
		// neither the head nor what is reserved, so the chain's ready
		// member stays what it was: refresh would only re-read the head
		// (a cache miss per keyed job, 10 % of the restart at 30 M jobs).
		// A ripe job's chain was refreshed by ripen.
		switch {
		case j.key == 0:
		case !chained:
			e.refresh(q, j.key)
		case j.state == StateDelayed && ch.live()[0] != slot:
		case j.state == StateReady || j.state == StateBlocked:
		default:
			e.refreshChain(q, j.key, ch)
		}
	}
	if runBytes > 0 {
		e.live[runSeg] += runBytes
		e.liveN[runSeg] += runBlobs
	}
	return nil
}

// copyRecords copies a chunk's n records into the slab from its next
// unused slot on, which the n allocations that follow hand out in order.
func (e *Engine) copyRecords(recs []byte, n int) {
	s := &e.jobs
	for i := 0; i < n; {
		slot := s.next + uint32(i)
		c, off := int(slot>>chunkBits), int(slot&(chunkSize-1))
		for c >= len(s.chunks) {
			s.chunks = append(s.chunks, make([]job, chunkSize))
		}
		m := min(chunkSize-off, n-i)
		dst := s.chunks[c][off : off+m]
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), m*jobSize), recs[i*jobSize:(i+m)*jobSize])
		i += m
	}
}

// loadKey returns this engine's id for a job's key, given as the id the
// snapshot's writer had for it (w) and its bytes, taking a reference. A
// bulk load remembers the writer's ids it has seen: every chunk of one
// snapshot comes from one engine, so the same w is mostly the same key
// again, and comparing the bytes with the key it stood for last time
// costs less than hashing them into the key table (a cache miss or two on
// a table of millions of keys: 3.6 s of a 100 M-job load,
// docs/benchmarks.md). The comparison keeps it right when the writer
// reused an id for another key during its walk.
func (e *Engine) loadKey(w uint32, b []byte) uint32 {
	m := e.bulk.keyIDs
	if int(w) < len(m) {
		if id := m[w]; id != 0 && e.keys.keys[id] == string(b) {
			e.keys.refs[id]++
			return id
		}
	}
	id, ok := e.keys.ids[string(b)]
	if ok {
		e.keys.refs[id]++ // no string made for a key the engine has
	} else {
		id = e.keys.ref(string(b))
	}
	// writer ids are dense (refTable) and a chunk's records were checked
	// against its key table, but bound the memory by the slab all the same
	if e.bulk.on && uint64(w) < uint64(len(e.jobs.chunks))*chunkSize {
		if int(w) >= len(m) {
			m = append(m, make([]uint32, max(int(w)+1-len(m), len(m)))...)
			e.bulk.keyIDs = m
		}
		m[w] = id
	}
	return id
}

// chainTail is what a bulk load remembers of the chain it last added a
// job of a key to (loadChainAdd).
type chainTail struct {
	c        *chain
	q        uint32 // the chain's queue
	slot     uint32 // its last job
	seq      uint64 // the highest seq in the chain
	unsorted bool   // a job was appended out of seq order (e.bulk.unsorted)
}

// loadChainAdd adds a job to its key's chain, like chainAdd, and returns
// the chain. A job goes after the chain's last one when its seq is
// higher, which chainAdd learns by reading that job's record: a cache
// miss in a slab of gigabytes (the key's previous job is about as many
// jobs back as there are keys), most of the key chains' 2.2 s of a 100
// M-job load (docs/benchmarks.md). A bulk load keeps, per key, the chain
// and the seq of its last job instead, and uses them while that job is
// still the chain's last.
//
// A job with a lower seq than the chain's highest (a snapshot taken after
// the job table shrank lists jobs out of order: shrink.go) is appended
// too, and the chain sorted once by FinishBulkLoad: finding its place
// reads a record per probe, cache misses that took most of a restart of
// 5 M keyed jobs. Until then the chain's head may be wrong; FinishBulkLoad
// refreshes the chain after sorting it, and nothing else reads chains
// before the load ends.
func (e *Engine) loadChainAdd(q *queue, slot uint32, j *job) *chain {
	k, seq := j.key, j.seqNo()
	t := e.bulk.chains
	if int(k) < len(t) {
		if ct := &t[k]; ct.c != nil && ct.q == q.idx {
			if live := ct.c.live(); len(live) > 0 && live[len(live)-1] == ct.slot {
				ct.c.slots = append(ct.c.slots, slot)
				ct.slot = slot
				if ct.seq < seq {
					ct.seq = seq
				} else if !ct.unsorted {
					ct.unsorted = true
					e.bulk.unsorted = append(e.bulk.unsorted, unsortedChain{ct.c, q.idx, k})
				}
				return ct.c
			}
		}
	}
	e.chainAdd(q, slot)
	c := q.chains[k]
	if !e.bulk.on || uint64(k) >= uint64(len(e.jobs.chunks))*chunkSize {
		return c
	}
	if int(k) >= len(t) {
		t = append(t, make([]chainTail, max(int(k)+1-len(t), len(t)))...)
		e.bulk.chains = t
	}
	last := c.live()[len(c.live())-1]
	t[k] = chainTail{c: c, q: q.idx, slot: last, seq: e.jobs.get(last).seqNo()}
	return c
}

// LoadMemory returns the memory a bulk load is about to fill: the slab
// chunks no job has been given yet (the ones reserve made for a
// snapshot's jobs), in slot order, then the spare room of the delayed
// arrays StartBulkLoad sized alike. A loader can ask the operating system
// to back it ahead of the copy (huge pages, pre-faulting: internal/memhint)
// instead of taking a page fault every 4 KiB on the loading goroutine.
// The bytes must not be read or written through these slices: they are
// the engine's.
func (e *Engine) LoadMemory() [][]byte {
	var mem [][]byte
	for c := int(e.jobs.next >> chunkBits); c < len(e.jobs.chunks); c++ {
		ch := e.jobs.chunks[c]
		if c == int(e.jobs.next>>chunkBits) {
			ch = ch[e.jobs.next&(chunkSize-1):]
		}
		mem = append(mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ch))), len(ch)*jobSize))
	}
	if d := e.delayed.s; e.bulk.on && cap(d) > len(d) {
		d = d[len(d):cap(d)]
		mem = append(mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*4))
	}
	if a := e.bulk.at; e.bulk.on && cap(a) > len(a) {
		a = a[len(a):cap(a)]
		mem = append(mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a)*8))
	}
	return mem
}
