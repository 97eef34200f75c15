package engine

import (
	"fmt"
	"strings"
	"time"
)

// Limits from docs/api.md (Conventions). Over-limit values are rejected, never clamped.
const (
	MaxDelay     = 87600 * time.Hour // ten years
	MaxTTR       = 720 * time.Hour
	MaxBatch     = 1000
	MaxTake      = 1000
	MaxListLimit = 1000
	// DefaultListLimit is a listing's page size when the client names none.
	DefaultListLimit = 100
	MaxTags          = 16
	MaxTagLen        = 256
	MaxKeyLen        = 256
	MaxIdemKeyLen    = 256
	MaxErrorLen      = 4096
	MaxPayloadHard   = 64 << 20
	MaxIDLen         = 128
	MaxNSLen         = 64
	MaxQueueNameLen  = 200
	MaxTries         = 0xffff
	// MaxTakeQueues caps the queues one take (or consume) may name: the
	// broker loop walks them for every take and every wake-up, so their
	// number must not be the client's to choose.
	MaxTakeQueues = 100
	// MaxFilterStates caps the states of a filter: there are seven states,
	// so a longer list only repeats them.
	MaxFilterStates = 7
)

// ValidName is the one name rule of every protocol: 1 to maxLen of
// A-Z a-z 0-9 _ . - (and ':' when colon is set, for job ids), but never
// "." or "..": the charset allows them, yet an HTTP path holding them is
// cleaned away, so such a queue or job could never be addressed there.
// Protocols with a narrower rule of their own (lmstfy's) apply it on top.
func ValidName(s string, maxLen int, colon bool) bool {
	if len(s) == 0 || len(s) > maxLen || s == "." || s == ".." {
		return false
	}
	return ValidNameChars(s, colon)
}

// ValidNameChars is ValidName's character set alone: A-Z a-z 0-9 _ . -
// (and ':' when colon is set).
func ValidNameChars(s string, colon bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || colon && c == ':') {
			return false
		}
	}
	return true
}

// ValidChannel reports whether s is a channel name: a queue-like base name
// (ValidQueueName), optionally followed by "#" and a comma-separated list
// of user ids, which limits the channel to those users ("user#42"). User
// ids are printable ASCII without space, ',', '#' or '/'; the whole name
// is at most MaxChannelNameLen bytes.
func ValidChannel(s string) bool {
	if len(s) == 0 || len(s) > MaxChannelNameLen {
		return false
	}
	base, users, hasUsers := strings.Cut(s, "#")
	if !ValidQueueName(base) {
		return false
	}
	if !hasUsers {
		return true
	}
	for _, u := range strings.Split(users, ",") {
		if u == "" {
			return false
		}
		for i := 0; i < len(u); i++ {
			if c := u[i]; c <= ' ' || c > '~' || c == '#' || c == '/' {
				return false
			}
		}
	}
	return true
}

// ValidNamespaceName reports whether s is a valid namespace name.
func ValidNamespaceName(s string) bool { return ValidName(s, MaxNSLen, false) }

// ValidQueueName reports whether s is a valid queue (or channel) name.
func ValidQueueName(s string) bool { return ValidName(s, MaxQueueNameLen, false) }

// ValidJobID reports whether s is a valid client-chosen job id.
func ValidJobID(s string) bool { return ValidName(s, MaxIDLen, true) }

func checkNames(ns, q string) error {
	if !ValidNamespaceName(ns) {
		return badf("namespace", "must match [A-Za-z0-9_.-]{1,%d}, got %q", MaxNSLen, ns)
	}
	if !ValidQueueName(q) {
		return badf("queue", "must match [A-Za-z0-9_.-]{1,%d}, got %q", MaxQueueNameLen, q)
	}
	return nil
}

func checkDuration(field string, d time.Duration, maxD time.Duration) error {
	if d < 0 {
		return badf(field, "must not be negative, got %s", d)
	}
	if maxD > 0 && d > maxD {
		return badf(field, "must be at most %s, got %s", maxD, d)
	}
	return nil
}

func checkTags(tags map[string]string) error {
	if len(tags) > MaxTags {
		return badf("tags", "at most %d tags, got %d", MaxTags, len(tags))
	}
	for k, v := range tags {
		if k == "" {
			return badf("tags", "tag keys must not be empty")
		}
		if len(k) > MaxTagLen {
			return badf("tags", "tag key %.32q... is %d bytes, at most %d", k, len(k), MaxTagLen)
		}
		if len(v) > MaxTagLen {
			return badf("tags", "value of tag %q is %d bytes, at most %d", k, len(v), MaxTagLen)
		}
	}
	return nil
}

func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return badf("key", "must be at most %d bytes, got %d", MaxKeyLen, len(key))
	}
	return nil
}

// checkPayloadSize applies the queue's and the hard payload limit.
func checkPayloadSize(field string, n int, max uint32) error {
	limit := int(max)
	if limit == 0 || limit > MaxPayloadHard {
		limit = MaxPayloadHard
	}
	if n > limit {
		return &Error{Code: CodePayloadTooLarge, Field: field, Message: fmt.Sprintf("%d bytes is over the queue's limit of %d bytes", n, limit)}
	}
	return nil
}

// validatePatch checks a queue config patch and returns the merged config.
func validatePatch(cur QueueConfig, p QueuePatch) (QueueConfig, error) {
	c := cur
	if p.DefaultTTR != nil {
		if *p.DefaultTTR <= 0 || *p.DefaultTTR > MaxTTR {
			return c, badf("default_ttr", "must be between 1ms and %s, got %s", MaxTTR, *p.DefaultTTR)
		}
		if *p.DefaultTTR < time.Millisecond {
			return c, badf("default_ttr", "must be at least 1ms, got %s", *p.DefaultTTR)
		}
		c.DefaultTTR = *p.DefaultTTR
	}
	if p.DefaultTries != nil {
		if *p.DefaultTries > MaxTries {
			return c, badf("default_tries", "must be at most %d, got %d", MaxTries, *p.DefaultTries)
		}
		c.DefaultTries = *p.DefaultTries
	}
	if p.DefaultTTL != nil {
		if err := checkDuration("default_ttl", *p.DefaultTTL, MaxDelay); err != nil {
			return c, err
		}
		c.DefaultTTL = *p.DefaultTTL
	}
	if p.DefaultPriority != nil {
		c.DefaultPriority = *p.DefaultPriority
	}
	if p.MaxJobs != nil {
		c.MaxJobs = *p.MaxJobs
	}
	if p.MaxPayload != nil {
		if *p.MaxPayload == 0 || *p.MaxPayload > MaxPayloadHard {
			return c, badf("max_payload", "must be between 1 and %d bytes, got %d", MaxPayloadHard, *p.MaxPayload)
		}
		c.MaxPayload = *p.MaxPayload
	}
	if p.DedupWindow != nil {
		if err := checkDuration("dedup_window", *p.DedupWindow, MaxDelay); err != nil {
			return c, err
		}
		c.DedupWindow = *p.DedupWindow
	}
	if p.RetainResults != nil {
		if err := checkDuration("retain_results", *p.RetainResults, MaxDelay); err != nil {
			return c, err
		}
		c.RetainResults = *p.RetainResults
	}
	if p.BackoffInitial != nil {
		if *p.BackoffInitial <= 0 || *p.BackoffInitial > MaxDelay {
			return c, badf("backoff.initial", "must be between 1ms and %s, got %s", MaxDelay, *p.BackoffInitial)
		}
		c.Backoff.Initial = *p.BackoffInitial
	}
	if p.BackoffMax != nil {
		if *p.BackoffMax <= 0 || *p.BackoffMax > MaxDelay {
			return c, badf("backoff.max", "must be between 1ms and %s, got %s", MaxDelay, *p.BackoffMax)
		}
		c.Backoff.Max = *p.BackoffMax
	}
	if p.BackoffMult != nil {
		if !(*p.BackoffMult >= 1 && *p.BackoffMult <= 100) {
			return c, badf("backoff.multiplier", "must be between 1 and 100, got %v", *p.BackoffMult)
		}
		c.Backoff.Multiplier = *p.BackoffMult
	}
	if p.BackoffJitter != nil {
		if !(*p.BackoffJitter >= 0 && *p.BackoffJitter <= 1) {
			return c, badf("backoff.jitter", "must be between 0 and 1, got %v", *p.BackoffJitter)
		}
		c.Backoff.Jitter = *p.BackoffJitter
	}
	if c.Backoff.Max < c.Backoff.Initial {
		return c, badf("backoff.max", "must not be below backoff.initial (%s), got %s", c.Backoff.Initial, c.Backoff.Max)
	}
	if p.KeyMode != nil {
		if *p.KeyMode != KeyStrict && *p.KeyMode != KeyExclusive {
			return c, badf("key_mode", "must be \"strict\" or \"exclusive\"")
		}
		c.KeyMode = *p.KeyMode
	}
	return c, nil
}
