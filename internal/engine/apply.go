package engine

import (
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
)

// Apply replays one logged entry: time advances to the entry's time (never
// backwards), then its records are applied. Applying an entry whose effects
// are already present changes nothing, so replay may start from a snapshot
// taken while writes continued.
func (e *Engine) Apply(ent *Entry) {
	e.advanceTo(ent.Time)
	e.applyRecords(ent)
}

func (e *Engine) applyRecords(ent *Entry) {
	for i := range ent.Records {
		e.applyRecord(&ent.Records[i])
	}
}

func (e *Engine) applyRecord(r *Record) {
	switch r.Kind {
	case KindNamespace:
		ns := e.ensureNS(r.NS)
		ns.cfg = r.NSConfig
		if !ns.cfg.Channels.Durable {
			for k := range e.chans {
				if k.ns == ns.name {
					delete(e.chans, k)
				}
			}
		}
	case KindToken:
		e.ensureNS(r.NS)
		e.tokens[r.TokenHash] = token{ns: r.NS, desc: r.TokenDesc}
	case KindTokenDelete:
		delete(e.tokens, r.TokenHash)
	case KindQueue:
		q := e.ensureQueue(r.NS, r.Queue, r.QCreated)
		e.configure(q, r.QConfig)
		if q.paused && !r.QPaused && q.ready.n > 0 {
			e.dirty[q.idx] = struct{}{}
		}
		q.paused, q.pausedUntil = r.QPaused, r.QPausedUntil
		if q.paused && q.pausedUntil != 0 {
			e.pauses = append(e.pauses, q.idx)
		}
	case KindQueueDelete:
		if q := e.lookupQueue(r.NS, r.Queue); q != nil {
			e.purge(q)
			delete(q.ns.queues, q.name)
			e.queues[q.idx] = nil
		}
	case KindQueuePurge:
		if q := e.lookupQueue(r.NS, r.Queue); q != nil {
			e.purge(q)
		}
	case KindJob, KindFarIn:
		e.applyJob(&r.Job)
	case KindJobDelete:
		if q := e.lookupQueue(r.NS, r.Queue); q != nil {
			k := makeIDKey(r.ID)
			if slot := e.idLookup(q.idx, &k); slot != noSlot {
				e.deleteJob(q, slot)
			}
		}
	case KindIdem:
		k := idemMapKey(r.NS, r.Queue, r.IdemKey)
		if r.IdemExpire > e.now {
			if old, ok := e.idem[k]; !ok || old.expire != r.IdemExpire {
				e.idemQ.push(idemExp{expire: r.IdemExpire, key: k})
			}
			e.idem[k] = idemEnt{id: r.IdemID, expire: r.IdemExpire, at: r.IdemAt}
		}
	case KindPublication:
		e.applyPublication(r)
	case KindCounters:
		e.seq = max(e.seq, r.Seq)
		e.nonce = max(e.nonce, r.Nonce)
		if r.Jobs > 0 && e.jobs.live == 0 && r.Jobs <= uint64(e.reserveLimit) {
			e.reserve(int(r.Jobs))
		}
	case KindLoadHints:
		e.applyLoadHints(r.Hints)
	}
}

func (e *Engine) ensureNS(name string) *namespace {
	ns := e.nss[name]
	if ns == nil {
		name = strings.Clone(name)
		ns = &namespace{name: name, cfg: NamespaceConfig{AutoCreateQueues: true}, queues: map[string]uint32{}}
		e.nss[name] = ns
	}
	return ns
}

func (e *Engine) lookupQueue(nsName, qName string) *queue {
	if ns := e.nss[nsName]; ns != nil {
		if qi, ok := ns.queues[qName]; ok {
			return e.queues[qi]
		}
	}
	return nil
}

// ensureQueue finds or creates a queue (with default config); replay relies
// on it to never fail.
func (e *Engine) ensureQueue(nsName, qName string, created int64) *queue {
	if q := e.lookupQueue(nsName, qName); q != nil {
		return q
	}
	ns := e.ensureNS(nsName)
	// a reply_to names its queue from the rare-field arena (ext.go): a
	// long-lived copy must not keep an arena chunk alive
	qName = strings.Clone(qName)
	q := &queue{
		idx:     uint32(len(e.queues)),
		ns:      ns,
		name:    qName,
		cfg:     DefaultQueueConfig(),
		created: created,
		ready:   newReadySet(),
		dead:    slotHeap{ord: bySeq},
	}
	e.queues = append(e.queues, q)
	ns.queues[qName] = q.idx
	return q
}

// configure installs a new config; a key-mode change re-places every
// keyed job under the new rules.
func (e *Engine) configure(q *queue, cfg QueueConfig) {
	if cfg.KeyMode == q.cfg.KeyMode {
		q.cfg = cfg
		return
	}
	var keyed []uint32
	for _, c := range q.chains {
		for _, s := range c.live() {
			if e.jobs.get(s).state != StateReserved {
				keyed = append(keyed, s)
			}
		}
	}
	for _, s := range keyed {
		e.unplace(q, s)
	}
	for _, c := range q.chains {
		c.rep = noSlot
		c.sub.s = c.sub.s[:0]
	}
	q.cfg = cfg
	for _, s := range keyed {
		e.placePending(q, s)
	}
	for key := range q.chains {
		e.refresh(q, key)
	}
}

// purge deletes every job of a queue.
func (e *Engine) purge(q *queue) {
	var slots []uint32
	e.forEachJob(func(slot uint32, j *job) {
		if e.jq(j) == q.idx {
			slots = append(slots, slot)
		}
	})
	for _, s := range slots {
		e.deleteJob(q, s)
	}
}

// forEachJob visits every live job in slot order.
func (e *Engine) forEachJob(fn func(slot uint32, j *job)) {
	for slot := uint32(0); slot < e.jobs.next; slot++ {
		if j := e.jobs.get(slot); j.state != StateNone {
			fn(slot, j)
		}
	}
}

// applyJob installs a job image, creating the job or replacing its state.
func (e *Engine) applyJob(img *JobImage) {
	q := e.ensureQueue(img.NS, img.Queue, img.Created)
	k := makeIDKey(img.ID)
	slot := e.idLookup(q.idx, &k)
	isNew := slot == noSlot

	var oldKey uint32
	var oldTags []string
	keepChain := false
	if !isNew {
		j := e.jobs.get(slot)
		oldKey = j.key
		if x, ok := e.ext(slot); ok {
			oldTags = x.tags
		}
		oldPhase := e.phaseOf(slot)
		keepChain = j.key != 0 && inChain(oldPhase) && inChain(img.Phase) && e.keys.keys[j.key] == img.Key
		e.unplace(q, slot)
		if j.key != 0 && inChain(oldPhase) && !keepChain {
			e.chainRemove(q, slot)
		}
	} else {
		slot = e.jobs.alloc()
	}

	j := e.jobs.get(slot)
	// read before the flags below are replaced (they say whether it exists)
	x, _ := e.ext(slot)
	if !isNew {
		e.trackBlob(j.payload, -1)
		e.trackBlob(x.result, -1)
	}
	j.setSeq(img.Seq)
	j.setAt(img.At)
	e.setClass(j, q.idx, img.TTR, img.Prio, !isNew)
	j.tries = uint16(min(img.Tries, 0xffff))
	j.flags = img.Flags&^(fULID|fHasExt|fAttempt) | j.flags&fAttempt
	if img.Payload.has {
		j.payload = localRef(isNew, j.payload, img.Payload)
	}
	if k.isULID {
		j.flags |= fULID
		j.id = k.u
	}
	if !keepChain {
		if img.Key != "" {
			j.key = e.keys.ref(img.Key)
		} else {
			j.key = 0
		}
	}
	e.seq = max(e.seq, img.Seq)
	// img.Nonce is random (receiptNonces), not a count: e.nonce only counts
	// reservations, and counters records carry it.

	// ext: everything rare.
	oldExpire := x.expire
	if !k.isULID {
		x.clientID = img.ID
		x.created = img.Created
	} else if img.Created != int64(ulid.ULID(k.u).Time()) {
		x.created = img.Created
	} else {
		x.created = 0
	}
	x.expire = img.Expire
	if !slices.Equal(oldTags, img.Tags) {
		e.indexTags(slot, oldTags, false)
		x.tags = img.Tags
		e.indexTags(slot, x.tags, true)
	}
	x.replyTo, x.cron, x.lastError, x.notify = img.ReplyTo, img.Cron, img.LastError, img.Notify
	x.retainResult, x.retainUntil = img.RetainResult, img.RetainUntil
	x.timeouts, x.releases, x.buries, x.kicks = img.Timeouts, img.Releases, img.Buries, img.Kicks
	curResult := x.result
	x.result = BlobRef{}
	if img.Result.has && img.Flags&fHasResult != 0 { // a result no view shows is not kept
		x.result = localRef(isNew, curResult, img.Result)
	}
	e.trackBlob(j.payload, 1)
	e.trackBlob(x.result, 1)
	e.setExt(slot, &x)
	if isNew {
		e.idInsert(slot)
		e.seqs.insert(e, slot)
	}
	if x.expire != 0 && (isNew || x.expire != oldExpire) {
		e.ttl.push(ttlEnt{expire: x.expire, slot: slot, seq: j.seqNo()})
	}

	if j.key != 0 && inChain(img.Phase) && !keepChain {
		e.chainAdd(q, slot)
	}
	switch img.Phase {
	case phaseReserved:
		e.placeReserved(q, slot, resvInfo{nonce: img.Nonce, until: img.Until, ttr: img.ResvTTR, origAt: img.At, attempt: img.Attempt})
	case phaseDead:
		e.setState(q, slot, j, StateDead)
		e.hpush(&q.dead, slot)
	case phaseCompleted:
		e.setState(q, slot, j, StateCompleted)
		e.tpush(&e.completed, img.RetainUntil, slot)
	default:
		e.placePending(q, slot)
	}
	if img.Phase != phaseReserved {
		e.setAttempt(slot, img.Attempt)
	}
	if !isNew && !keepChain && oldKey != 0 {
		// the new key reference was taken above, so a same-key re-place
		// never drops the interned string
		if oldKey != j.key {
			e.refresh(q, oldKey)
		}
		e.keys.unref(oldKey)
	}
	if j.key != 0 {
		e.refresh(q, j.key)
	}
}

// image captures the job in slot as a record image.
func (e *Engine) image(q *queue, slot uint32) JobImage {
	j := e.jobs.get(slot)
	img := JobImage{
		NS:      q.ns.name,
		Queue:   q.name,
		ID:      e.jobID(slot),
		Seq:     j.seqNo(),
		Phase:   e.phaseOf(slot),
		At:      j.atMS(),
		Created: e.created(slot),
		Prio:    e.jprio(j),
		TTR:     e.jttr(j),
		Tries:   uint32(j.tries),
		Attempt: e.attempt(slot),
		Flags:   j.flags &^ (fULID | fHasExt | fAttempt),
		Key:     e.keys.keys[j.key],
		Payload: refBlob(j.payload),
	}
	if x, ok := e.ext(slot); ok {
		img.Expire = x.expire
		img.Tags = x.tags
		img.ReplyTo, img.Cron, img.LastError, img.Notify = x.replyTo, x.cron, x.lastError, x.notify
		img.RetainResult, img.RetainUntil = x.retainResult, x.retainUntil
		img.Timeouts, img.Releases, img.Buries, img.Kicks = x.timeouts, x.releases, x.buries, x.kicks
		if j.flags&fHasResult != 0 {
			img.Result = refBlob(x.result)
		}
	}
	if r, ok := e.resv[slot]; ok {
		img.At = r.origAt
		img.Nonce, img.Until, img.ResvTTR = r.nonce, r.until, r.ttr
	}
	return img
}

// localRef is the reference a job keeps for a blob of a record it applies.
// A record that restates a job (a take, an ack, a release) carries the
// blob as a reference into the log of the node that decided it. On a
// replica the same bytes sit elsewhere in the replica's own log, and the
// job already holds them there (the record that brought the bytes inline
// was applied first), so the local reference stands. A reference of length
// zero drops the blob (engine/damage.go), and bytes that arrive inline
// (a put, a result, a relocation) always take their new place.
func localRef(isNew bool, cur BlobRef, b Blob) BlobRef {
	if !isNew && b.Data == nil && b.Ref.Len > 0 && cur.Len == b.Ref.Len {
		return cur
	}
	return b.Ref
}
