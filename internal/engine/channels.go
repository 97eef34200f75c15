package engine

import (
	"errors"
	"time"
)

// Durable channel history. Channels themselves live in the broker's pubsub
// hub; the engine keeps the history of the channels of namespaces whose
// history is durable, so that it is logged, snapshotted and replayed like
// everything else and comes back after a restart with the same epoch and
// offsets (the hub is refilled from here at start).
//
// The hub makes epochs; the engine adopts the hub's position the first time
// it sees a channel, or whenever the hub is ahead of it or on another epoch
// (a namespace that turned durable, a channel whose history was lost), so
// the two never hand out the same offset twice. Publication bytes are kept
// here, not referenced in the log: history is bounded per channel, and
// keeping it out of the log's live bytes means a year-old channel never
// pins a segment.

type chanKey struct{ ns, ch string }

type durableChan struct {
	epoch  string
	offset uint64        // newest offset handed out
	pubs   []Publication // held history, oldest first, consecutive offsets
}

// ErrNotDurable is returned by Publish for a namespace whose channel
// history is memory-only (the caller then publishes in memory).
var ErrNotDurable = errors.New("channel history of the namespace is not durable")

// ChannelPosition is where a channel stands: its epoch and newest offset.
type ChannelPosition struct {
	Epoch  string
	Offset uint64
}

// Publish appends data to a channel of a namespace with durable history.
// hub is the channel's position in the live hub. The answer carries the
// offset and epoch the publication got.
func (e *Engine) Publish(now time.Time, ns, ch string, hub ChannelPosition, data []byte) (Publication, error) {
	e.begin(now)
	n, err := e.findNS(ns)
	if err != nil {
		return Publication{}, err
	}
	if !n.cfg.Channels.Durable {
		return Publication{}, ErrNotDurable
	}
	if !ValidChannel(ch) {
		return Publication{}, badf("channel", "must match [A-Za-z0-9_.-]{1,200}, optionally followed by #user[,user...]; got %q", ch)
	}
	if hub.Epoch == "" {
		return Publication{}, badf("epoch", "a publication needs the channel's epoch")
	}
	epoch, base := hub.Epoch, hub.Offset
	if c := e.chans[chanKey{ns, ch}]; c != nil && c.epoch == hub.Epoch && c.offset >= hub.Offset {
		base = c.offset
	}
	p := Publication{Channel: ch, Epoch: epoch, Offset: base + 1, Time: e.now, Data: data, HasData: true}
	r := e.ent.add()
	r.Kind, r.NS, r.Pub = KindPublication, ns, p
	if err := e.commit(); err != nil {
		return Publication{}, err
	}
	return p, nil
}

// historyPolicy is a namespace's size and TTL (ms, 0: none) with the
// hub's defaults filled in.
func historyPolicy(c ChannelHistory) (size int, ttl int64) {
	size = c.Size
	switch {
	case size == 0:
		size = DefaultHistorySize
	case size < 0:
		size = 0
	}
	switch {
	case c.TTL == 0:
		ttl = DefaultHistoryTTL.Milliseconds()
	case c.TTL > 0:
		ttl = c.TTL.Milliseconds()
	}
	return size, ttl
}

func (e *Engine) applyPublication(r *Record) {
	p := &r.Pub
	k := chanKey{r.NS, p.Channel}
	c := e.chans[k]
	if c == nil {
		c = &durableChan{epoch: p.Epoch}
		e.chans[k] = c
	}
	if c.epoch != p.Epoch {
		// a new epoch: whatever was held belongs to the old one
		c.epoch, c.offset, c.pubs = p.Epoch, 0, nil
	}
	if p.Offset <= c.offset {
		return // applied already (replay over a snapshot)
	}
	if !p.HasData || p.Offset != c.offset+1 {
		// a bare position, or a gap: earlier history is not continuous
		// with what follows, so none of it can be handed out
		c.pubs = nil
	}
	c.offset = p.Offset
	if p.HasData {
		c.pubs = append(c.pubs, *p)
	}
	size, ttl := 0, int64(0)
	if n := e.nss[r.NS]; n != nil {
		size, ttl = historyPolicy(n.cfg.Channels)
	}
	c.prune(e.now, size, ttl)
}

// prune drops what the policy no longer keeps. Dropping from the front
// reslices; append copies only what is held when it next grows, so the
// backing array stays within about twice the size.
func (c *durableChan) prune(now int64, size int, ttl int64) {
	drop := max(0, len(c.pubs)-size)
	for ttl > 0 && drop < len(c.pubs) && now-c.pubs[drop].Time >= ttl {
		drop++
	}
	if drop == len(c.pubs) {
		c.pubs = nil
		return
	}
	clear(c.pubs[:drop])
	c.pubs = c.pubs[drop:]
}

// DurableChannels calls fn for every channel of a namespace whose history
// is durable now, with the history it holds (oldest first; the slice is
// the engine's, read-only). The broker refills the hub from it at start.
func (e *Engine) DurableChannels(fn func(ns, ch string, pos ChannelPosition, pubs []Publication)) {
	for k, c := range e.chans {
		n := e.nss[k.ns]
		if n == nil || !n.cfg.Channels.Durable {
			continue
		}
		size, ttl := historyPolicy(n.cfg.Channels)
		c.prune(e.now, size, ttl)
		fn(k.ns, k.ch, ChannelPosition{Epoch: c.epoch, Offset: c.offset}, c.pubs)
	}
}

// snapshotChannels adds the durable channels to a snapshot: the held
// publications, or a bare position for a channel whose history is empty.
// Channels of namespaces no longer durable are left out, and so forgotten.
func (e *Engine) snapshotChannels(ent *Entry) {
	e.DurableChannels(func(ns, ch string, pos ChannelPosition, pubs []Publication) {
		if len(pubs) == 0 {
			r := ent.add()
			r.Kind, r.NS = KindPublication, ns
			r.Pub = Publication{Channel: ch, Epoch: pos.Epoch, Offset: pos.Offset, Time: e.now}
			return
		}
		for _, p := range pubs {
			r := ent.add()
			r.Kind, r.NS, r.Pub = KindPublication, ns, p
		}
	})
}

// validateChannelHistory checks a namespace's channel policy.
func validateChannelHistory(c ChannelHistory) error {
	if c.Size < -1 || c.Size > MaxChannelHistory {
		return badf("channel_history.size", "must be between -1 (keep none) and %d, got %d", MaxChannelHistory, c.Size)
	}
	if c.TTL < -1 || c.TTL > 0 && c.TTL < time.Millisecond || c.TTL > MaxDelay {
		return badf("channel_history.ttl", "must be between 1ms and %s, or -1 (no expiry), got %s", MaxDelay, c.TTL)
	}
	return nil
}
