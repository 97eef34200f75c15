package engine

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Peek returns a job without changing it.
func (e *Engine) Peek(now time.Time, ns, qn, id string) (Job, error) {
	e.Advance(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	v := e.view(q, slot)
	v.Receipt = "" // receipts only travel in take answers
	return v, nil
}

// Result looks up a job's result state.
func (e *Engine) Result(now time.Time, ns, qn, id string) (ResultInfo, error) {
	e.Advance(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return ResultInfo{}, err
	}
	v := e.view(q, slot)
	return ResultInfo{ID: v.ID, State: v.State, HasResult: v.HasResult, Result: v.Result, ResultJSON: v.ResultJSON}, nil
}

// Update patches a job in place (docs/api.md, PATCH of a job).
func (e *Engine) Update(now time.Time, ns, qn, id string, req UpdateRequest) (Job, error) {
	e.begin(now)
	q, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return Job{}, err
	}
	switch e.jobs.get(slot).state {
	case StateCompleted:
		return Job{}, errf(CodeConflict, "job %q is completed and can no longer change", id)
	case StateReserved:
		if req.Receipt == "" {
			return Job{}, errf(CodeConflict, "job %q is reserved: pass its receipt to change it", id)
		}
		if err := e.checkReceipt(slot, id, req.Receipt, false); err != nil {
			return Job{}, err
		}
	}
	img := e.image(q, slot)
	if req.HasPayload {
		if err := checkPayloadSize("payload", len(req.Payload), q.cfg.MaxPayload); err != nil {
			return Job{}, err
		}
		img.Payload = inlineBlob(nonNil(req.Payload))
		img.Flags &^= fPayloadJSON
		if req.PayloadJSON {
			img.Flags |= fPayloadJSON
		}
	}
	if req.Delay != nil && req.At != nil {
		return Job{}, badf("at", "delay and at are exclusive")
	}
	if req.Delay != nil {
		if err := checkDuration("delay", *req.Delay, MaxDelay); err != nil {
			return Job{}, err
		}
		img.At = e.now + req.Delay.Milliseconds()
	}
	if req.At != nil {
		if ms(*req.At)-e.now > MaxDelay.Milliseconds() {
			return Job{}, badf("at", "must be at most %s from now", MaxDelay)
		}
		img.At = max(ms(*req.At), 0)
	}
	if req.Priority != nil {
		img.Prio = *req.Priority
	}
	if req.HasTags {
		if err := checkTags(req.Tags); err != nil {
			return Job{}, err
		}
		img.Tags = sortTags(req.Tags)
	}
	r := e.ent.add()
	r.Kind, r.Job = KindJob, img
	if err := e.commit(); err != nil {
		return Job{}, err
	}
	return e.view(q, slot), nil
}

// Cancel deletes one job. A reserved job needs its receipt.
func (e *Engine) Cancel(now time.Time, ns, qn, id, receipt string) error {
	e.begin(now)
	_, slot, err := e.findJob(ns, qn, id)
	if err != nil {
		return err
	}
	if e.jobs.get(slot).state == StateReserved {
		if receipt == "" {
			return errf(CodeConflict, "job %q is reserved: pass its receipt to cancel it", id)
		}
		if err := e.checkReceipt(slot, id, receipt, false); err != nil {
			return err
		}
	}
	r := e.ent.add()
	r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, id
	e.events.hint = EventCancelled
	if err := e.commit(); err != nil {
		return err
	}
	e.stats.Cancelled++
	if q := e.lookupQueue(ns, qn); q != nil {
		q.stats.Cancelled++
	}
	return nil
}

func stateMask(states []State, def uint8) uint8 {
	if len(states) == 0 {
		return def
	}
	var m uint8
	for _, s := range states {
		m |= 1 << s
	}
	return m
}

const allStates = 1<<StateDelayed | 1<<StateReady | 1<<StateBlocked | 1<<StateReserved | 1<<StateDead | 1<<StateCompleted

// candidates visits the jobs that may match f in the given queues (nil: the
// queues of ns): through the tag index when f names a tag, else by scan.
func (e *Engine) candidates(f *Filter, inQueue func(qi uint32) bool, fn func(slot uint32)) {
	if len(f.Tags) > 0 {
		var best map[uint32]struct{}
		first := true
		for k, v := range f.Tags {
			set := e.tagIndex[tagKey(k, v)]
			if first || len(set) < len(best) {
				best, first = set, false
			}
		}
		slots := make([]uint32, 0, len(best))
		for s := range best {
			slots = append(slots, s)
		}
		slices.Sort(slots)
		for _, s := range slots {
			if inQueue(e.jobs.get(s).queue) {
				fn(s)
			}
		}
		return
	}
	e.forEachJob(func(slot uint32, j *job) {
		if inQueue(j.queue) {
			fn(slot)
		}
	})
}

func (e *Engine) matches(slot uint32, f *Filter, mask uint8) bool {
	j := e.jobs.get(slot)
	if mask&(1<<j.state) == 0 {
		return false
	}
	if f.HasKey && e.keys.names[j.key] != f.Key {
		return false
	}
	if len(f.Tags) > 0 {
		x := e.ext[slot]
		if x == nil {
			return false
		}
		for k, v := range f.Tags {
			found := false
			for i := 0; i+1 < len(x.tags); i += 2 {
				if x.tags[i] == k && x.tags[i+1] == v {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func checkFilter(f *Filter) error {
	if len(f.States) > MaxFilterStates {
		return badf("state", "at most %d states, got %d", MaxFilterStates, len(f.States))
	}
	if err := checkKey(f.Key); err != nil {
		return err
	}
	for _, s := range f.States {
		if s == StateNone || s >= StateGone {
			return badf("state", "unknown state")
		}
	}
	if err := checkTags(f.Tags); err != nil {
		return err
	}
	return nil
}

// CancelByFilter deletes the matching jobs of one queue, or of every queue
// of the namespace when qn is "". At least one filter is required; without
// states it spares reserved jobs.
func (e *Engine) CancelByFilter(now time.Time, ns, qn string, f Filter) (int, error) {
	e.begin(now)
	if len(f.States) == 0 && !f.HasKey && len(f.Tags) == 0 {
		return 0, badf("filter", "give at least one of state, key or tag.K=V")
	}
	if err := checkFilter(&f); err != nil {
		return 0, err
	}
	nsObj, err := e.findNS(ns)
	if err != nil {
		return 0, err
	}
	inQueue := func(qi uint32) bool { return e.queues[qi] != nil && e.queues[qi].ns == nsObj }
	if qn != "" {
		q, err := e.findQueue(ns, qn)
		if err != nil {
			return 0, err
		}
		inQueue = func(qi uint32) bool { return qi == q.idx }
	}
	mask := stateMask(f.States, allStates&^(1<<StateReserved))
	e.candidates(&f, inQueue, func(slot uint32) {
		if e.matches(slot, &f, mask) {
			q := e.queues[e.jobs.get(slot).queue]
			r := e.ent.add()
			r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, q.name, e.jobID(slot)
		}
	})
	n := len(e.ent.Records)
	e.events.hint = EventCancelled
	if err := e.commit(); err != nil {
		return 0, err
	}
	e.stats.Cancelled += uint64(n)
	return n, nil
}

// Listing orders (docs/api.md, list): ready by serving order, delayed by activation
// time, any other single state by id, mixed states by enqueue order.
type listOrder uint8

const (
	listBySeq listOrder = iota
	listByServing
	listByActivation
	listByID
)

type listKey struct {
	prio uint32
	at   int64
	seq  uint64
	id   string
}

func (k listKey) less(o listKey, ord listOrder) bool {
	switch ord {
	case listByServing:
		if k.prio != o.prio {
			return k.prio < o.prio
		}
		fallthrough
	case listByActivation:
		if k.at != o.at {
			return k.at < o.at
		}
	case listByID:
		if k.id != o.id {
			return k.id < o.id
		}
	}
	return k.seq < o.seq
}

func (k listKey) cursor(ord listOrder) string {
	s := fmt.Sprintf("%d|%d|%d|%d|%s", ord, k.prio, k.at, k.seq, k.id)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseCursor(c string, ord listOrder) (listKey, error) {
	bad := badf("cursor", "not a cursor from a previous page of this listing")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return listKey{}, bad
	}
	parts := strings.SplitN(string(b), "|", 5)
	if len(parts) != 5 || parts[0] != strconv.Itoa(int(ord)) {
		return listKey{}, bad
	}
	prio, err1 := strconv.ParseUint(parts[1], 10, 32)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	seq, err3 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return listKey{}, bad
	}
	return listKey{prio: uint32(prio), at: at, seq: seq, id: parts[4]}, nil
}

// List pages through a queue's jobs matching a filter.
func (e *Engine) List(now time.Time, ns, qn string, req ListRequest) (ListResult, error) {
	e.Advance(now)
	limit := req.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 0 || limit > MaxListLimit {
		return ListResult{}, badf("limit", "must be between 1 and %d, got %d", MaxListLimit, req.Limit)
	}
	f := req.Filter
	if err := checkFilter(&f); err != nil {
		return ListResult{}, err
	}
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return ListResult{}, err
	}
	ord := listBySeq
	if len(f.States) == 1 {
		switch f.States[0] {
		case StateReady:
			ord = listByServing
		case StateDelayed:
			ord = listByActivation
		default:
			ord = listByID
		}
	}
	var after *listKey
	if req.Cursor != "" {
		k, err := parseCursor(req.Cursor, ord)
		if err != nil {
			return ListResult{}, err
		}
		after = &k
	}
	mask := stateMask(f.States, allStates)
	type item struct {
		k    listKey
		slot uint32
	}
	var items []item
	e.candidates(&f, func(qi uint32) bool { return qi == q.idx }, func(slot uint32) {
		if !e.matches(slot, &f, mask) {
			return
		}
		j := e.jobs.get(slot)
		k := listKey{prio: j.prio, at: e.activateAt(slot), seq: j.seq}
		if ord == listByID {
			k.id = e.jobID(slot)
		}
		if after != nil && !after.less(k, ord) {
			return
		}
		items = append(items, item{k, slot})
	})
	slices.SortFunc(items, func(a, b item) int {
		if a.k.less(b.k, ord) {
			return -1
		}
		if b.k.less(a.k, ord) {
			return 1
		}
		return 0
	})
	var res ListResult
	if len(items) > limit {
		items = items[:limit]
		res.NextCursor = items[limit-1].k.cursor(ord)
	}
	res.Jobs = make([]Job, len(items))
	for i, it := range items {
		res.Jobs[i] = e.view(q, it.slot)
		res.Jobs[i].Receipt = ""
	}
	return res, nil
}

// Respawn brings dead jobs back as ready with attempt 0: the oldest Limit
// of them (all when Limit is 0), or exactly the listed ids that are dead.
// A respawned job loses its TTL: it was brought back on purpose.
func (e *Engine) Respawn(now time.Time, ns, qn string, req RespawnRequest) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	if req.Limit < 0 {
		return 0, badf("limit", "must not be negative, got %d", req.Limit)
	}
	if req.Limit > 0 && len(req.IDs) > 0 {
		return 0, badf("ids", "give either limit or ids, not both")
	}
	var slots []uint32
	if len(req.IDs) > 0 {
		if len(req.IDs) > MaxBatch {
			return 0, badf("ids", "at most %d ids, got %d", MaxBatch, len(req.IDs))
		}
		seen := make(map[uint32]struct{}, len(req.IDs))
		for _, id := range req.IDs {
			k := makeIDKey(id)
			s := e.idLookup(q.idx, &k)
			if s == noSlot || e.jobs.get(s).state != StateDead {
				continue
			}
			if _, dup := seen[s]; !dup {
				seen[s] = struct{}{}
				slots = append(slots, s)
			}
		}
	} else {
		n := req.Limit
		if n == 0 {
			n = len(q.dead.s)
		}
		slots = e.hbest(&q.dead, n, nil)
	}
	for _, s := range slots {
		img := e.image(q, s)
		img.Phase, img.Attempt, img.Expire = phasePending, 0, 0
		img.Flags &^= fBuried
		img.At = max(img.At, e.now)
		r := e.ent.add()
		r.Kind, r.Job = KindJob, img
	}
	if err := e.commit(); err != nil {
		return 0, err
	}
	return len(slots), nil
}

// PurgeDead deletes every dead job of a queue.
func (e *Engine) PurgeDead(now time.Time, ns, qn string) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	for _, s := range q.dead.s {
		r := e.ent.add()
		r.Kind, r.NS, r.Queue, r.ID = KindJobDelete, ns, qn, e.jobID(s)
	}
	n := len(e.ent.Records)
	if err := e.commit(); err != nil {
		return 0, err
	}
	return n, nil
}
