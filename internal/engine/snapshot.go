package engine

// A snapshot is the engine's state as a stream of entries, produced a
// bounded chunk at a time so the broker's loop can keep serving writes in
// between. It is fuzzy: chunks taken later reflect later writes. That is
// sound because replay restarts from the log position where the snapshot
// began and records are idempotent state images (record.go): any job whose
// chunk was taken after a change is simply overwritten with the same image.
// Jobs are visited by slot; a slot freed and reused meanwhile belongs to a
// job put after the start, whose put record replay applies anyway.

// SnapshotIter walks the engine's state.
type SnapshotIter struct {
	e        *Engine
	meta     bool
	slot     uint32
	limit    uint32
	startSeq uint64 // jobs put after the walk began are left to the log (snapchunk.go)
	closed   bool
}

// Snapshot starts a walk of the current state. Until the walk ends (Next
// or NextItem reports the end) or is closed, the job table does not shrink
// (shrink.go): moving a job below the walk's cursor would hide it.
func (e *Engine) Snapshot() *SnapshotIter {
	e.walks++
	return &SnapshotIter{e: e, startSeq: e.seq}
}

// Close ends a walk before its end; closing an ended walk does nothing.
func (it *SnapshotIter) Close() {
	if !it.closed {
		it.closed = true
		it.e.walks--
	}
}

// Next returns the next chunk of at most n records as an entry, or nil when
// the walk is over. The entry is valid until the next call.
func (it *SnapshotIter) Next(n int) *Entry {
	e := it.e
	ent := &Entry{Time: e.now}
	if !it.meta {
		it.meta = true
		it.limit = e.jobs.next
		r := ent.add()
		r.Kind, r.Seq, r.Nonce, r.Jobs = KindCounters, e.seq, e.nonce, uint64(e.jobs.live)
		r = ent.add()
		r.Kind, r.Hints = KindLoadHints, e.loadHints()
		for _, ns := range e.nss {
			r := ent.add()
			r.Kind, r.NS, r.NSConfig = KindNamespace, ns.name, ns.cfg
		}
		e.snapshotChannels(ent)
		for h, t := range e.tokens {
			r := ent.add()
			r.Kind, r.NS, r.TokenHash, r.TokenDesc = KindToken, t.ns, h, t.desc
		}
		for _, q := range e.queues {
			if q != nil {
				r := ent.add()
				r.Kind, r.NS, r.Queue, r.QConfig, r.QPaused, r.QCreated = KindQueue, q.ns.name, q.name, q.cfg, q.paused, q.created
				r.QPausedUntil = q.pausedUntil
			}
		}
		for k, v := range e.idem {
			parts := splitIdemKey(k)
			r := ent.add()
			r.Kind, r.NS, r.Queue, r.IdemKey = KindIdem, parts[0], parts[1], parts[2]
			r.IdemID, r.IdemExpire, r.IdemAt = v.id, v.expire, v.at
		}
		return ent
	}
	if it.limit < e.jobs.next {
		it.limit = e.jobs.next
	}
	ent.Records = make([]Record, 0, min(n, int(it.limit-it.slot)))
	for it.slot < it.limit && len(ent.Records) < n {
		slot := it.slot
		it.slot++
		j := e.jobs.get(slot)
		if j.state == StateNone {
			continue
		}
		r := ent.add()
		r.Kind, r.Job = KindJob, e.image(e.queues[e.jq(j)], slot)
	}
	if len(ent.Records) == 0 {
		it.Close()
		return nil
	}
	return ent
}

func splitIdemKey(k string) [3]string {
	var out [3]string
	for i := 0; i < 2; i++ {
		j := 0
		for j < len(k) && k[j] != 0 {
			j++
		}
		out[i] = k[:j]
		if j < len(k) {
			k = k[j+1:]
		} else {
			k = ""
		}
	}
	out[2] = k
	return out
}

// Jobs is the number of jobs the engine holds.
func (e *Engine) Jobs() int { return e.jobs.live }

// LiveBytes reports, per log segment, how many payload and result bytes of
// live jobs it holds, so storage can tell which segments may go.
func (e *Engine) LiveBytes() map[uint32]int64 { return e.live }

// LiveBlobs counts, per log segment, the payloads and results LiveBytes
// sums: re-logging them writes a record around each (broker/compact.go).
func (e *Engine) LiveBlobs() map[uint32]int64 { return e.liveN }

func (e *Engine) trackBlob(r BlobRef, sign int64) {
	if r.Len == 0 {
		return
	}
	e.live[r.Segment] += sign * int64(r.Len)
	e.liveN[r.Segment] += sign
	if e.live[r.Segment] == 0 {
		delete(e.live, r.Segment)
	}
	if e.liveN[r.Segment] == 0 {
		delete(e.liveN, r.Segment)
	}
}

// reserve sizes the slab for n jobs at once. The id table is left to
// grow: most jobs (those with server ids) never enter it (idtable.go), and
// the sequence index grows by pages (seqtable.go).
func (e *Engine) reserve(n int) {
	for len(e.jobs.chunks)*chunkSize < n {
		e.jobs.chunks = append(e.jobs.chunks, make([]job, chunkSize))
	}
}
