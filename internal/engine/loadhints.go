package engine

import "encoding/binary"

// LoadHints are the sizes of the tables a snapshot's jobs fill, written in
// the snapshot's metadata entry (a KindLoadHints record after the
// KindCounters one, whose Jobs sizes the slab) so that a loader makes
// each table once at its final size instead of growing it by doubling as
// jobs arrive: every doubling of a map rehashes what it holds and every
// doubling of a slice copies it, and both touch fresh memory the kernel
// faults in page by page (docs/benchmarks.md, "Restart at 100 M jobs").
//
// They are hints: the snapshot walk is fuzzy (snapshot.go), so they are
// the counts when it began. A count larger than the slab the counters
// record sized (itself bounded by the snapshot's size, Options.ReserveLimit)
// is cut to it, so a damaged count cannot make the loader allocate more
// than the jobs the snapshot can hold would; a snapshot without the record
// (written before it existed) loads with the tables growing as before.
//
// Encoding: count:uvarint then count uvarints in the order of the fields
// below. A reader takes the fields it knows and skips the rest, so a later
// build may append fields without a new record kind.
type LoadHints struct {
	Keys     uint64 // distinct job keys (the key table)
	Exts     uint64 // jobs with rare fields (the arena's slot map, ext.go)
	ExtBytes uint64 // bytes of their encoded entries
	Tags     uint64 // distinct tags (name and value) in the tag index
	Tagged   uint64 // (tag, job) pairs in the tag index
	Reserved uint64 // reserved jobs (the reservation map)
	Attempts uint64 // jobs taken before and not reserved now (the attempt map)
	// jobs in the sequence index's overflow table (seqtable.go): after a
	// peak, or once a table shrank, most numbers sit there, and growing
	// it by doubling reads every job it holds again per doubling
	SeqOver uint64
	IDs     uint64 // jobs in the id table (client ids: idtable.go)
}

func (h *LoadHints) fields() []*uint64 {
	return []*uint64{&h.Keys, &h.Exts, &h.ExtBytes, &h.Tags, &h.Tagged, &h.Reserved, &h.Attempts, &h.SeqOver, &h.IDs}
}

func (h *LoadHints) encode(dst []byte) []byte {
	if h == nil {
		return binary.AppendUvarint(dst, 0)
	}
	f := h.fields()
	dst = binary.AppendUvarint(dst, uint64(len(f)))
	for _, v := range f {
		dst = binary.AppendUvarint(dst, *v)
	}
	return dst
}

func decodeLoadHints(d *decoder) *LoadHints {
	h := &LoadHints{}
	f := h.fields()
	n := d.uvarint("load hints count")
	if d.err == nil && n > uint64(len(d.b)-d.off) { // each takes at least a byte
		d.fail("load hints count")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		v := d.uvarint("load hint")
		if i < uint64(len(f)) {
			*f[i] = v
		}
	}
	return h
}

// loadHints returns the hints for a snapshot of the engine as it is now.
func (e *Engine) loadHints() *LoadHints {
	h := &LoadHints{
		Keys:     uint64(len(e.keys.ids)),
		Exts:     uint64(e.exts.len()),
		ExtBytes: uint64(max(e.exts.live, 0)),
		Tags:     uint64(len(e.tagIndex)),
		Reserved: uint64(len(e.resv)),
		Attempts: uint64(len(e.attempts)),
		SeqOver:  uint64(e.seqs.over.len()),
		IDs:      uint64(e.ids.len()),
	}
	for _, set := range e.tagIndex {
		h.Tagged += uint64(len(set))
	}
	return h
}

// applyLoadHints sizes the tables a snapshot's jobs are about to fill. It
// acts only on an engine that holds no job yet and whose slab the
// snapshot's counters record sized; every count is cut to that slab's
// size (a job has one key, one rare-field entry, at most one reservation;
// tag pairs are cut to one per job, beyond which the tag lists grow).
func (e *Engine) applyLoadHints(h *LoadHints) {
	n := uint64(len(e.jobs.chunks)) * chunkSize
	if h == nil || e.jobs.live != 0 || n == 0 {
		return
	}
	c := func(v uint64) int { return int(min(v, n)) }
	if k := c(h.Keys); k > 0 && len(e.keys.ids) == 0 {
		e.keys.ids = make(map[string]uint32, k)
		e.keys.keys = append(make([]string, 0, k+1), e.keys.keys...)
		e.keys.refs = append(make([]uint32, 0, k+1), e.keys.refs...)
	}
	if x := c(h.Exts); x > 0 && e.exts.len() == 0 {
		e.exts.refs.reserve(x)
		// the arena's chunks are appended, never copied: only the list
		// of them is sized
		e.exts.chunks = make([][]byte, 0, c(h.ExtBytes)/extChunkSize+1)
	}
	if r := c(h.Reserved); r > 0 && len(e.resv) == 0 {
		e.resv = make(map[uint32]resvInfo, r)
	}
	if a := c(h.Attempts); a > 0 && len(e.attempts) == 0 {
		e.attempts = make(map[uint32]uint32, a)
	}
	if o := c(h.SeqOver); o > 0 && e.seqs.len() == 0 {
		e.seqs.over.init(slotTableSize(o))
	}
	if i := c(h.IDs); i > 0 && e.ids.len() == 0 {
		e.ids.init(slotTableSize(i))
	}
	if t := c(h.Tags); t > 0 && len(e.tagIndex) == 0 {
		e.tagIndex = make(map[string]map[uint32]struct{}, t)
		e.hints.tags = t
		e.hints.perTag = c(h.Tagged) / t
	}
}
