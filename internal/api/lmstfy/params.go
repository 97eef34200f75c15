package lmstfy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// lmstfy's defaults for the query parameters, in seconds (its shipped
// configuration).
const (
	defaultDelay   = "0"
	defaultTTL     = "86400"
	defaultTries   = "1"
	defaultTTR     = "120"
	defaultTimeout = "0"

	maxConsumeCount = 100
	maxBulkJobs     = 64
)

// lmstfy's name rule is ^[-_[:alnum:]]+$ with ASCII alnum: the engine's
// character set (engine.ValidNameChars) without the dot. So every name
// lmstfy accepts is a chronoq name, and lmstfy refuses some that the other
// protocols accept (those with a dot). The lengths are the engine's, checked
// by the callers in lmstfy's order.
func validName(s string) bool {
	return s != "" && strings.IndexByte(s, '.') < 0 && engine.ValidNameChars(s, false)
}

// validNameList is lmstfy's rule for a consume's comma-separated queues:
// empty entries are allowed (queueList drops them), the list is not.
func validNameList(qs string) bool {
	if qs == "" {
		return false
	}
	for _, q := range strings.Split(qs, ",") {
		if q != "" && !validName(q) {
			return false
		}
	}
	return true
}

// checkNames is lmstfy's ValidateParams, in its order. lmstfy allows 255
// bytes for both names; chronoq allows 64 for a namespace and 200 for a
// queue, and says so with lmstfy's message for names too long.
func checkNames(ns, q string) string {
	if len(ns) > engine.MaxNSLen || len(q) > engine.MaxQueueNameLen {
		return "namespace or queue name too long"
	}
	if !validName(ns) {
		return "namespace name contains forbidden characters"
	}
	if strings.HasPrefix(q, "_") || !validName(q) {
		return "queue name contains forbidden characters"
	}
	return ""
}

// checkConsumeNames is lmstfy's ValidateMultiConsume: a namespace and a
// comma-separated list of queues. lmstfy checks no length there; chronoq's
// limits are checked after its character rules.
func checkConsumeNames(ns, qs string) string {
	if !validName(ns) {
		return "namespace name contains forbidden characters"
	}
	if !validNameList(qs) {
		return "queue name contains forbidden characters"
	}
	if len(ns) > engine.MaxNSLen {
		return "namespace or queue name too long"
	}
	for _, q := range strings.Split(qs, ",") {
		if len(q) > engine.MaxQueueNameLen {
			return "namespace or queue name too long"
		}
	}
	return ""
}

// queueList splits a consume's queue list, dropping empty names as lmstfy
// does; the order is the priority order.
func queueList(qs string) []string {
	var out []string
	for _, q := range strings.Split(qs, ",") {
		if q != "" {
			out = append(out, q)
		}
	}
	return out
}

// query is gin's DefaultQuery: the first value when the key is present at
// all (even empty, which then fails to parse), else the default.
func query(v url.Values, key, def string) string {
	if vs, ok := v[key]; ok && len(vs) > 0 {
		return vs[0]
	}
	return def
}

// publishParams are delay, ttl and tries of a publish.
type publishParams struct {
	delay, ttl time.Duration
	tries      uint32
}

// parsePublish reads a publish's query in lmstfy's order and answers its
// error message on failure. Values lmstfy accepts but chronoq cannot hold
// (delay or ttl beyond ten years) are refused with lmstfy's message for a
// bad value.
func parsePublish(v url.Values) (publishParams, string) {
	var p publishParams
	delay, err := strconv.ParseUint(query(v, "delay", defaultDelay), 10, 32)
	if err != nil || seconds(delay) > engine.MaxDelay {
		return p, "invalid delay"
	}
	ttl, err := strconv.ParseUint(query(v, "ttl", defaultTTL), 10, 32)
	if err != nil || seconds(ttl) > engine.MaxDelay {
		return p, "invalid ttl"
	}
	// ttl 0 means forever, so it is never shorter than a delay.
	if ttl > 0 && ttl < delay {
		return p, "ttl is shorter than delay"
	}
	tries, err := strconv.ParseUint(query(v, "tries", defaultTries), 10, 16)
	if err != nil {
		return p, "invalid tries"
	}
	if tries == 0 {
		return p, "tries shouldn't be zero"
	}
	p.delay, p.ttl, p.tries = seconds(delay), seconds(ttl), uint32(tries)
	if ttl > 0 && ttl == delay {
		// lmstfy takes the job and lets it expire as it becomes ready;
		// chronoq's engine wants the expiry after the activation, so the
		// job lives one millisecond past it.
		p.ttl += time.Millisecond
	}
	return p, ""
}

// consumeParams are ttr, timeout and count of a consume.
type consumeParams struct {
	ttr, timeout time.Duration
	count        int
}

// parseConsume reads a consume's query in lmstfy's order. ttr=0, which
// lmstfy's own client refuses, gets one second: lmstfy's timer would hand
// the job out again on its next one-second tick. A ttr beyond chronoq's
// 30-day maximum is refused.
func parseConsume(v url.Values) (consumeParams, string) {
	var p consumeParams
	ttr, err := strconv.ParseUint(query(v, "ttr", defaultTTR), 10, 32)
	if err != nil || seconds(ttr) > engine.MaxTTR {
		return p, "invalid ttr"
	}
	timeout, err := strconv.ParseUint(query(v, "timeout", defaultTimeout), 10, 32)
	if err != nil {
		return p, "invalid timeout"
	}
	count, err := strconv.ParseUint(query(v, "count", "1"), 10, 32)
	if err != nil || count == 0 || count > maxConsumeCount {
		return p, "invalid count"
	}
	p.ttr, p.timeout, p.count = max(seconds(ttr), time.Second), seconds(timeout), int(count)
	return p, ""
}

// parseLimit is the dead-letter routes' limit (default 1, at least 1).
func parseLimit(v url.Values) (int64, string) {
	limit, err := strconv.ParseInt(query(v, "limit", "1"), 10, 64)
	if err != nil || limit <= 0 {
		return 0, "invalid limit"
	}
	return limit, ""
}

// parseRespawnTTL is the respawn's ttl (default lmstfy's TTL, not negative).
func parseRespawnTTL(v url.Values) string {
	ttl, err := strconv.ParseInt(query(v, "ttl", defaultTTL), 10, 64)
	if err != nil || ttl < 0 {
		return "invalid ttl"
	}
	return ""
}

func seconds(n uint64) time.Duration { return time.Duration(n) * time.Second }

// Job attributes travel in headers: with "Enable-Job-Version: YES", every
// non-empty "Job-Attr-<Key>" header becomes an attribute named by the rest
// of its canonical header name, key and value cut at 256 bytes, at most 16.
const (
	attrPrefix    = "Job-Attr-"
	maxAttrs      = engine.MaxTags // attributes become tags
	maxAttrKeyVal = engine.MaxTagLen
)

// collectAttributes answers the attributes of a publish (nil when none or
// not enabled) or lmstfy's error message.
func collectAttributes(h http.Header) (map[string]string, string) {
	if !strings.EqualFold(h.Get("Enable-Job-Version"), "YES") {
		return nil, ""
	}
	var attrs map[string]string
	for k, v := range h {
		if !strings.HasPrefix(k, attrPrefix) || len(v) == 0 || v[0] == "" {
			continue
		}
		k = strings.TrimPrefix(k, attrPrefix)
		if k == "" {
			continue // chronoq tags need a name
		}
		val := v[0]
		if len(k) > maxAttrKeyVal {
			k = k[:maxAttrKeyVal]
		}
		if len(val) > maxAttrKeyVal {
			val = val[:maxAttrKeyVal]
		}
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[k] = val
	}
	if len(attrs) > maxAttrs {
		return nil, "too many attributes, cannot exceed 16"
	}
	return attrs, ""
}
