package engine

// Rehome is how a cluster member's raft snapshot moves payload references
// into its copies (internal/cluster/snapshot.go, "Re-homing"): a snapshot
// is fuzzy, so an image it copied may be older than the job the engine
// holds now, and applying that image again would undo later changes.
// Rehome changes only a reference, and only while the job still refers to
// the very bytes that were copied: if job (ns, queue, id) holds a payload
// or a result at exactly from, it refers to to instead (the same bytes
// elsewhere in the log). It reports whether it changed anything.
func (e *Engine) Rehome(ns, queue, id string, from, to BlobRef) bool {
	if from.Len == 0 || to.Len != from.Len || from == to {
		return false
	}
	q := e.lookupQueue(ns, queue)
	if q == nil {
		return false
	}
	k := makeIDKey(id)
	slot := e.idLookup(q.idx, &k)
	if slot == noSlot {
		return false
	}
	j := e.jobs.get(slot)
	if j.payload == from {
		e.trackBlob(j.payload, -1)
		j.payload = to
		e.trackBlob(to, 1)
		return true
	}
	if x, ok := e.ext(slot); ok && x.result == from {
		e.trackBlob(x.result, -1)
		x.result = to
		e.trackBlob(to, 1)
		e.setExt(slot, &x)
		return true
	}
	return false
}
