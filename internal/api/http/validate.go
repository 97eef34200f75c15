package httpapi

import (
	"slices"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Limits of docs/api.md (Conventions). They are checked here, before the broker, because they
// bound what a request may make the server hold in memory; values over a
// limit are rejected, never clamped, so a client never silently gets less
// than it asked for.
const (
	maxBatch         = 1000
	maxTake          = 1000
	maxListLimit     = 1000
	defaultListLimit = 100
	maxTags          = 16
	maxTagBytes      = 256
	maxKeyBytes      = 256
	maxDelay         = 87600 * time.Hour // ten years
	maxNamespaceLen  = engine.MaxNSLen
	maxQueueLen      = engine.MaxQueueNameLen
	maxJobIDLen      = engine.MaxIDLen
	maxTakeQueues    = engine.MaxTakeQueues

	// hardMaxPayload is the largest max_payload a queue may be given
	// whatever the server's own setting (the --max-payload ceiling, internal/server).
	hardMaxPayload = 64 << 20
)

func checkNamespace(field, s string) error {
	if !engine.ValidNamespaceName(s) {
		return badField(field, "invalid namespace name %q: want 1 to %d of A-Z a-z 0-9 _ . -", s, maxNamespaceLen)
	}
	return nil
}

// checkChannel checks a channel name: a queue-like base name, optionally
// limited to users with "#id[,id...]".
func checkChannel(field, s string) error {
	if !pubsub.ValidChannel(s) {
		return badField(field, "invalid channel name %q: want 1 to 200 of A-Z a-z 0-9 _ . -, optionally followed by #user[,user...]", s)
	}
	return nil
}

// checkQueue also serves reply_to, which names a queue.
func checkQueue(field, s string) error {
	if !engine.ValidQueueName(s) {
		return badField(field, "invalid name %q: want 1 to %d of A-Z a-z 0-9 _ . -", s, maxQueueLen)
	}
	return nil
}

func checkJobID(field, s string) error {
	if !engine.ValidJobID(s) {
		return badField(field, "invalid job id %q: want 1 to %d of A-Z a-z 0-9 _ . : -", s, maxJobIDLen)
	}
	return nil
}

func checkTags(field string, tags map[string]string) error {
	if len(tags) > maxTags {
		return badField(field, "at most %d tags allowed, got %d", maxTags, len(tags))
	}
	// Sorted so that a body with several bad tags always names the same one.
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := tags[k]
		if len(k) > maxTagBytes {
			return badField(field, "tag key %.32q... is longer than %d bytes", k, maxTagBytes)
		}
		if len(v) > maxTagBytes {
			return badField(field, "value of tag %q is longer than %d bytes", k, maxTagBytes)
		}
	}
	return nil
}

func checkKey(field, key string) error {
	if len(key) > maxKeyBytes {
		return badField(field, "key is longer than %d bytes", maxKeyBytes)
	}
	return nil
}

func checkDelay(field string, d *time.Duration) error {
	if d != nil && *d > maxDelay {
		return badField(field, "must be at most %s (10 years)", maxDelay)
	}
	return nil
}
