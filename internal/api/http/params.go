package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// This file reads the URL side of a request: path names and query
// parameters. Unknown query parameters are ignored (proxies and caches add
// their own); known ones are checked as strictly as body fields.

// target is what a route's path names: the parts its pattern has, each
// checked (in this order, so the first bad one is the one reported).
type target struct{ ns, q, id, ch string }

func pathTarget(r *http.Request, pattern string) (target, error) {
	var t target
	var err error
	// One call per part rather than a table of pointers into t, which
	// would put t on the heap for every request.
	part := func(wildcard, field string, check func(field, s string) error) string {
		if err != nil || !strings.Contains(pattern, "{"+wildcard+"}") {
			return ""
		}
		v := r.PathValue(wildcard)
		err = check(field, v)
		return v
	}
	t.ns = part("ns", "namespace", checkNamespace)
	t.q = part("q", "queue", checkQueue)
	t.id = part("id", "id", checkJobID)
	t.ch = part("ch", "channel", checkChannel)
	return t, err
}

var stateList = "delayed, ready, blocked, reserved, dead, completed"

// parseFilter reads state, key and tag.K=V. given reports whether any of
// them was there, which cancel-by-filter requires.
func parseFilter(v url.Values) (f engine.Filter, given bool, err error) {
	for _, val := range v["state"] {
		for name := range strings.SplitSeq(val, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			st, ok := engine.ParseState(name)
			if !ok {
				return f, false, badField("state", "unknown state %q (want one of %s)", name, stateList)
			}
			if !slices.Contains(f.States, st) {
				f.States = append(f.States, st)
			}
		}
	}
	// An empty key= is not a filter: taken literally it would match every
	// job without a key, which a cancel must not do by accident.
	if key := v.Get("key"); key != "" {
		if err := checkKey("key", key); err != nil {
			return f, false, err
		}
		f.Key, f.HasKey = key, true
	}
	names := make([]string, 0)
	for k := range v {
		if strings.HasPrefix(k, "tag.") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		tag := strings.TrimPrefix(k, "tag.")
		if tag == "" {
			return f, false, badField("tags", "tag filter %q has no tag name (want tag.NAME=VALUE)", k)
		}
		vals := v[k]
		for _, x := range vals[1:] {
			if x != vals[0] {
				return f, false, badField(k, "given twice with different values")
			}
		}
		if f.Tags == nil {
			f.Tags = map[string]string{}
		}
		f.Tags[tag] = vals[0]
	}
	if err := checkTags("tags", f.Tags); err != nil {
		return f, false, err
	}
	return f, len(f.States) > 0 || f.HasKey || len(f.Tags) > 0, nil
}

// queryLimit reads limit in [1, engine.MaxListLimit]; absent or empty gives def.
func queryLimit(v url.Values, def int) (int, error) {
	s := v.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > engine.MaxListLimit {
		return 0, badField("limit", "must be a whole number between 1 and %d, got %q", engine.MaxListLimit, s)
	}
	return n, nil
}

// queryWait reads a long-poll wait: a duration or seconds, at most max.
func queryWait(v url.Values, max time.Duration) (time.Duration, error) {
	s := v.Get("wait")
	if s == "" {
		return 0, nil
	}
	d, err := queryDuration(s)
	if err != nil {
		return 0, badField("wait", "%s", err.Error())
	}
	if d > max {
		return 0, badField("wait", "must be at most %s", max)
	}
	return d, nil
}
