package engine

import (
	"slices"
	"strings"
	"time"
)

// CreateNamespace creates a namespace. Creating one that exists changes
// nothing and answers it with created=false.
func (e *Engine) CreateNamespace(now time.Time, name string, cfg NamespaceConfig) (NamespaceInfo, bool, error) {
	e.begin(now)
	if !ValidNamespaceName(name) {
		return NamespaceInfo{}, false, badf("name", "must match [A-Za-z0-9_.-]{1,%d}, got %q", MaxNSLen, name)
	}
	if ns, ok := e.nss[name]; ok {
		return NamespaceInfo{Name: name, Config: ns.cfg}, false, nil
	}
	if err := validateChannelHistory(cfg.Channels); err != nil {
		return NamespaceInfo{}, false, err
	}
	r := e.ent.add()
	r.Kind, r.NS, r.NSConfig = KindNamespace, name, cfg
	if err := e.commit(); err != nil {
		return NamespaceInfo{}, false, err
	}
	return NamespaceInfo{Name: name, Config: cfg}, true, nil
}

// ConfigureNamespace creates a namespace or replaces its configuration;
// created says which. Turning durable channel history off forgets the
// durable history of its channels (the live hub keeps them in memory).
func (e *Engine) ConfigureNamespace(now time.Time, name string, cfg NamespaceConfig) (NamespaceInfo, bool, error) {
	e.begin(now)
	if !ValidNamespaceName(name) {
		return NamespaceInfo{}, false, badf("name", "must match [A-Za-z0-9_.-]{1,%d}, got %q", MaxNSLen, name)
	}
	if err := validateChannelHistory(cfg.Channels); err != nil {
		return NamespaceInfo{}, false, err
	}
	ns, exists := e.nss[name]
	if exists && ns.cfg == cfg {
		return NamespaceInfo{Name: name, Config: cfg}, false, nil
	}
	r := e.ent.add()
	r.Kind, r.NS, r.NSConfig = KindNamespace, name, cfg
	if err := e.commit(); err != nil {
		return NamespaceInfo{}, false, err
	}
	return NamespaceInfo{Name: name, Config: cfg}, !exists, nil
}

// Namespace returns one namespace.
func (e *Engine) Namespace(name string) (NamespaceInfo, error) {
	ns, err := e.findNS(name)
	if err != nil {
		return NamespaceInfo{}, err
	}
	return NamespaceInfo{Name: name, Config: ns.cfg}, nil
}

// Namespaces lists every namespace by name.
func (e *Engine) Namespaces() []NamespaceInfo {
	out := make([]NamespaceInfo, 0, len(e.nss))
	for _, ns := range e.nss {
		out = append(out, NamespaceInfo{Name: ns.name, Config: ns.cfg})
	}
	slices.SortFunc(out, func(a, b NamespaceInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AddToken stores a namespace token by its hash (the engine never sees the
// token itself).
func (e *Engine) AddToken(now time.Time, ns, hash, desc string) error {
	e.begin(now)
	if _, err := e.findNS(ns); err != nil {
		return err
	}
	if len(desc) > 1024 {
		return badf("description", "must be at most 1024 bytes, got %d", len(desc))
	}
	r := e.ent.add()
	r.Kind, r.NS, r.TokenHash, r.TokenDesc = KindToken, ns, hash, desc
	return e.commit()
}

// RevokeToken forgets a token of ns; revoking an unknown token is a no-op.
func (e *Engine) RevokeToken(now time.Time, ns, hash string) error {
	e.begin(now)
	if _, err := e.findNS(ns); err != nil {
		return err
	}
	if t, ok := e.tokens[hash]; !ok || t.ns != ns {
		return nil
	}
	r := e.ent.add()
	r.Kind, r.TokenHash = KindTokenDelete, hash
	return e.commit()
}

// TokenNamespace returns the namespace of a token hash.
func (e *Engine) TokenNamespace(hash string) (string, bool) {
	t, ok := e.tokens[hash]
	return t.ns, ok
}

// HasTokens reports whether any namespace token exists.
func (e *Engine) HasTokens() bool { return len(e.tokens) > 0 }

// PutQueue creates a queue or merges a config patch into it.
func (e *Engine) PutQueue(now time.Time, ns, qn string, p QueuePatch) (QueueInfo, bool, error) {
	e.begin(now)
	if err := checkNames(ns, qn); err != nil {
		return QueueInfo{}, false, err
	}
	if _, err := e.findNS(ns); err != nil {
		return QueueInfo{}, false, err
	}
	q := e.lookupQueue(ns, qn)
	cur, paused, created, until := DefaultQueueConfig(), false, e.now, int64(0)
	if q != nil {
		cur, paused, created, until = q.cfg, q.paused, q.created, q.pausedUntil
	}
	cfg, err := validatePatch(cur, p)
	if err != nil {
		return QueueInfo{}, false, err
	}
	r := e.ent.add()
	r.Kind, r.NS, r.Queue, r.QConfig, r.QPaused, r.QCreated = KindQueue, ns, qn, cfg, paused, created
	r.QPausedUntil = until
	if err := e.commit(); err != nil {
		return QueueInfo{}, false, err
	}
	return e.info(e.lookupQueue(ns, qn)), q == nil, nil
}

// Queue describes one queue.
func (e *Engine) Queue(now time.Time, ns, qn string) (QueueInfo, error) {
	e.Advance(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return QueueInfo{}, err
	}
	return e.info(q), nil
}

// Queues describes every queue of a namespace, by name.
func (e *Engine) Queues(now time.Time, ns string) ([]QueueInfo, error) {
	e.Advance(now)
	nsObj, err := e.findNS(ns)
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, 0, len(nsObj.queues))
	for _, qi := range nsObj.queues {
		out = append(out, e.info(e.queues[qi]))
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// QueueListRequest pages through the queues of a namespace in name order.
type QueueListRequest struct {
	Limit  int    // 1..MaxListLimit; 0 means DefaultQueueListLimit
	Cursor string // from the previous page's NextCursor
}

// QueueList is one page of queues.
type QueueList struct {
	Queues     []QueueInfo
	NextCursor string // empty on the last page
}

// DefaultQueueListLimit is a page's size when the client gives none; large
// enough that a small deployment sees all its queues in one page.
const DefaultQueueListLimit = 1000

// QueuePage answers one page of a namespace's queues, sorted by name. The
// cursor is the last name of the previous page, so a queue created or
// deleted between pages moves no other queue across the boundary.
func (e *Engine) QueuePage(now time.Time, ns string, req QueueListRequest) (QueueList, error) {
	e.Advance(now)
	limit := req.Limit
	if limit == 0 {
		limit = DefaultQueueListLimit
	}
	if limit < 0 || limit > MaxListLimit {
		return QueueList{}, badf("limit", "must be between 1 and %d, got %d", MaxListLimit, req.Limit)
	}
	if req.Cursor != "" && !ValidQueueName(req.Cursor) {
		return QueueList{}, badf("cursor", "invalid cursor %q: pass the next_cursor of the previous page", req.Cursor)
	}
	nsObj, err := e.findNS(ns)
	if err != nil {
		return QueueList{}, err
	}
	names := make([]string, 0, min(len(nsObj.queues), limit+1))
	for name := range nsObj.queues {
		if name > req.Cursor {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out QueueList
	if len(names) > limit {
		names = names[:limit]
		out.NextCursor = names[limit-1]
	}
	out.Queues = make([]QueueInfo, len(names))
	for i, name := range names {
		out.Queues[i] = e.info(e.queues[nsObj.queues[name]])
	}
	return out, nil
}

// AllQueues describes every queue of every namespace (for metrics).
func (e *Engine) AllQueues(now time.Time) []QueueInfo {
	e.Advance(now)
	var out []QueueInfo
	for _, q := range e.queues {
		if q != nil {
			out = append(out, e.info(q))
		}
	}
	return out
}

func (e *Engine) info(q *queue) QueueInfo {
	qi := QueueInfo{Namespace: q.ns.name, Name: q.name, Config: q.cfg, Paused: q.paused, Counts: q.counts, CreatedAt: fromMS(q.created), Stats: q.stats}
	e.farCounts(q, &qi.Counts)
	if q.pausedUntil != 0 {
		qi.PausedUntil = fromMS(q.pausedUntil)
	}
	if q.ready.n > 0 {
		// The oldest of the per-priority roots (ready.go): O(priorities),
		// which is what a dashboard refreshing every queue every second
		// needs at any queue size.
		if age := e.now - e.oldestAt(&q.ready); age > 0 {
			qi.OldestReadyAge = time.Duration(age) * time.Millisecond
		}
	}
	return qi
}

// SetPaused pauses (hands out nothing, still accepts puts) or resumes a queue.
func (e *Engine) SetPaused(now time.Time, ns, qn string, paused bool) (QueueInfo, error) {
	return e.pause(now, ns, qn, paused, 0)
}

// PauseFor pauses a queue for d; the pause ends by itself (beanstalkd
// pause-tube). d = 0 resumes at once.
func (e *Engine) PauseFor(now time.Time, ns, qn string, d time.Duration) (QueueInfo, error) {
	if d < 0 || d > MaxDelay {
		return QueueInfo{}, badf("delay", "must be between 0 and %s, got %s", MaxDelay, d)
	}
	if d == 0 {
		return e.pause(now, ns, qn, false, 0)
	}
	return e.pause(now, ns, qn, true, ms(now)+d.Milliseconds())
}

func (e *Engine) pause(now time.Time, ns, qn string, paused bool, until int64) (QueueInfo, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return QueueInfo{}, err
	}
	if q.paused != paused || q.pausedUntil != until {
		r := e.ent.add()
		r.Kind, r.NS, r.Queue, r.QConfig, r.QPaused, r.QCreated = KindQueue, ns, qn, q.cfg, paused, q.created
		r.QPausedUntil = until
		if err := e.commit(); err != nil {
			return QueueInfo{}, err
		}
	}
	return e.info(q), nil
}

// PurgeQueue deletes every job of a queue, reserved ones included.
func (e *Engine) PurgeQueue(now time.Time, ns, qn string) (int, error) {
	e.begin(now)
	q, err := e.findQueue(ns, qn)
	if err != nil {
		return 0, err
	}
	n := int(q.counts.Total())
	r := e.ent.add()
	r.Kind, r.NS, r.Queue = KindQueuePurge, ns, qn
	if err := e.commit(); err != nil {
		return 0, err
	}
	return n, nil
}

// DeleteQueue deletes a queue and its jobs.
func (e *Engine) DeleteQueue(now time.Time, ns, qn string) error {
	e.begin(now)
	if _, err := e.findQueue(ns, qn); err != nil {
		return err
	}
	r := e.ent.add()
	r.Kind, r.NS, r.Queue = KindQueueDelete, ns, qn
	return e.commit()
}

// Tokens returns every namespace token hash with its namespace.
func (e *Engine) Tokens() map[string]string {
	out := make(map[string]string, len(e.tokens))
	for h, t := range e.tokens {
		out[h] = t.ns
	}
	return out
}
