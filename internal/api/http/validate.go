package httpapi

import (
	"slices"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// The limits of docs/api.md (Conventions) are the engine's (engine.Max*):
// they are checked here too, before the broker, because they bound what a
// request may make the server hold in memory; values over a limit are
// rejected, never clamped, so a client never silently gets less than it
// asked for.

func checkNamespace(field, s string) error {
	if !engine.ValidNamespaceName(s) {
		return badField(field, "invalid namespace name %q: want 1 to %d of A-Z a-z 0-9 _ . -", s, engine.MaxNSLen)
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
		return badField(field, "invalid name %q: want 1 to %d of A-Z a-z 0-9 _ . -", s, engine.MaxQueueNameLen)
	}
	return nil
}

func checkJobID(field, s string) error {
	if !engine.ValidJobID(s) {
		return badField(field, "invalid job id %q: want 1 to %d of A-Z a-z 0-9 _ . : -", s, engine.MaxIDLen)
	}
	return nil
}

func checkTags(field string, tags map[string]string) error {
	if len(tags) > engine.MaxTags {
		return badField(field, "at most %d tags allowed, got %d", engine.MaxTags, len(tags))
	}
	// Sorted so that a body with several bad tags always names the same one.
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := tags[k]
		if len(k) > engine.MaxTagLen {
			return badField(field, "tag key %.32q... is longer than %d bytes", k, engine.MaxTagLen)
		}
		if len(v) > engine.MaxTagLen {
			return badField(field, "value of tag %q is longer than %d bytes", k, engine.MaxTagLen)
		}
	}
	return nil
}

func checkKey(field, key string) error {
	if len(key) > engine.MaxKeyLen {
		return badField(field, "key is longer than %d bytes", engine.MaxKeyLen)
	}
	return nil
}

func checkDelay(field string, d *time.Duration) error {
	if d != nil && *d > engine.MaxDelay {
		return badField(field, "must be at most %s (10 years)", engine.MaxDelay)
	}
	return nil
}
