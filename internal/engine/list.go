package engine

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
		k := listKey{prio: e.jprio(j), at: e.activateAt(slot), seq: j.seqNo()}
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
