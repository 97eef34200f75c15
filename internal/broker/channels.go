package broker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Channels are real-time pub/sub streams with a bounded history, held by a
// pubsub.Hub. In a namespace with memory-only history a publication goes
// straight to the hub: it is not a job, and a restart starts new epochs,
// which is exactly what epochs tell subscribers (a client whose epoch
// differs gets recovered:false and reloads its state).
//
// In a namespace with durable history a publication is a command like any
// other: the loop logs it (the engine numbers it), and it reaches the hub
// — and so any subscriber — only after the fdatasync that covers it, in
// log order. Job events (puts with notify) take the same road, so a
// browser never hears "completed" for an ack a crash could undo.
type channels struct {
	hub *pubsub.Hub
	out []outPub // decided during this loop turn, delivered once durable
	// member is a cluster member's side (cluster_channels.go).
	member memberChannels
}

// outPub is a publication waiting for its batch to be durable.
type outPub struct {
	ns, ch  string
	data    []byte
	durable bool // numbered by the log: epoch, offset and time are set
	epoch   string
	offset  uint64
	at      time.Time
}

// Channels returns the hub behind Publish and History. The real-time
// transports subscribe through it.
func (b *Broker) Channels() *pubsub.Hub { return b.chans.hub }

// hubConfig is a namespace's history policy as the hub takes it.
func hubConfig(c engine.ChannelHistory) pubsub.Config {
	return pubsub.Config{HistorySize: c.Size, HistoryTTL: c.TTL, Durable: c.Durable}
}

// startChannels makes the hub after recovery: every namespace's policy,
// and the durable history the log kept. It runs before the loop starts.
func (b *Broker) startChannels() error {
	b.chans.hub = pubsub.New(pubsub.Options{Clock: b.now})
	for _, ns := range b.eng.Namespaces() {
		b.chans.hub.Configure(ns.Name, hubConfig(ns.Config.Channels))
	}
	var err error
	b.eng.DurableChannels(func(ns, ch string, pos engine.ChannelPosition, pubs []engine.Publication) {
		held := make([]*pubsub.Publication, len(pubs))
		for i, p := range pubs {
			held[i] = &pubsub.Publication{Namespace: ns, Channel: ch, Offset: p.Offset, Epoch: p.Epoch, Data: p.Data, Time: time.UnixMilli(p.Time).UTC()}
		}
		if e := b.chans.hub.Restore(ns, ch, pubsub.Position{Epoch: pos.Epoch, Offset: pos.Offset}, held); e != nil && err == nil {
			err = e
		}
	})
	b.eng.SetEvents(true)
	return err
}

func channelError(err error) error {
	if errors.Is(err, pubsub.ErrBadName) {
		return &engine.Error{Code: engine.CodeBadRequest, Field: "channel", Message: err.Error()}
	}
	return err
}

var errBadChannel = &engine.Error{Code: engine.CodeBadRequest, Field: "channel", Message: "must match [A-Za-z0-9_.-]{1,200}, optionally followed by #user[,user...]"}

// Publish appends a publication to a channel's history and fans it out to
// the channel's subscribers.
func (b *Broker) Publish(ctx context.Context, ns, ch string, data []byte) (uint64, string, error) {
	if !pubsub.ValidChannel(ch) {
		return 0, "", errBadChannel
	}
	// The caller's buffer may be reused; the hub keeps what it is given.
	data = append([]byte(nil), data...)
	if b.chans.hub.Durable(ns) {
		p, err := call(b, ctx, func(now time.Time) (engine.Publication, error) {
			return b.publishDurable(now, ns, ch, data)
		})
		if err == nil {
			return p.Offset, p.Epoch, nil
		}
		if !errors.Is(err, engine.ErrNotDurable) {
			return 0, "", channelError(err)
		}
		// durability was turned off meanwhile: publish in memory
	}
	p, err := b.chans.hub.Publish(ns, ch, data)
	if err != nil {
		return 0, "", channelError(err)
	}
	b.opts.Observer.Publication()
	return p.Offset, p.Epoch, nil
}

// publishDurable logs a publication (on the loop) and queues it for the
// hub, which gets it once it is durable.
func (b *Broker) publishDurable(now time.Time, ns, ch string, data []byte) (engine.Publication, error) {
	pos, err := b.chans.hub.Position(ns, ch)
	if err != nil {
		return engine.Publication{}, channelError(err)
	}
	p, err := b.eng.Publish(now, ns, ch, engine.ChannelPosition{Epoch: pos.Epoch, Offset: pos.Offset}, data)
	if err != nil {
		return engine.Publication{}, err
	}
	b.chans.out = append(b.chans.out, outPub{ns: ns, ch: ch, data: data, durable: true, epoch: p.Epoch, offset: p.Offset, at: time.UnixMilli(p.Time).UTC()})
	return p, nil
}

// historyWaiter is a long-polling history read's subscription: it only
// needs to hear that something was published.
type historyWaiter struct {
	once  sync.Once
	ready chan struct{}
}

func (w *historyWaiter) Deliver(*pubsub.Publication) bool {
	w.once.Do(func() { close(w.ready) })
	return true
}

// jobEventJSON is the data of a job event publication (docs/realtime.md).
type jobEventJSON struct {
	Event        string          `json:"event"`
	ID           string          `json:"id"`
	Queue        string          `json:"queue"`
	Namespace    string          `json:"namespace"`
	State        string          `json:"state"`
	Attempt      uint32          `json:"attempt"`
	Error        string          `json:"error,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 []byte          `json:"result_base64,omitempty"`
	Time         time.Time       `json:"time"`
}

// queueEvents turns the job events the engine noted this turn into
// publications (on the loop). Publishing into a durable namespace is
// itself a command, which may note events of its own as time advances,
// hence the loop until none are left.
func (b *Broker) queueEvents(now time.Time) {
	for {
		evs := b.eng.TakeEvents()
		if len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			j := jobEventJSON{Event: ev.Event, ID: ev.ID, Queue: ev.Queue, Namespace: ev.NS, State: ev.State.String(),
				Attempt: ev.Attempt, Error: ev.Error, Time: ev.Time}
			if ev.HasResult {
				if ev.ResultJSON {
					j.Result = ev.Result
				} else {
					j.ResultBase64 = ev.Result
				}
			}
			data, err := json.Marshal(j)
			if err != nil {
				b.lg.Warn("job event not published: encoding failed", "job", ev.ID, "err", err)
				continue
			}
			if b.chans.hub.Durable(ev.NS) {
				_, err := b.publishDurable(now, ev.NS, ev.Channel, data)
				if err == nil {
					continue
				}
				if !errors.Is(err, engine.ErrNotDurable) {
					b.lg.Warn("job event not published", "job", ev.ID, "channel", ev.NS+"/"+ev.Channel, "err", err)
					continue
				}
			}
			b.chans.out = append(b.chans.out, outPub{ns: ev.NS, ch: ev.Channel, data: data})
		}
	}
}

// takeOut hands the turn's publications to whoever delivers them.
func (b *Broker) takeOut() []outPub {
	out := b.chans.out
	b.chans.out = nil
	return out
}

// deliver hands durable publications to the hub, in log order.
func (b *Broker) deliver(out []outPub) {
	for _, p := range out {
		var err error
		if p.durable {
			_, err = b.chans.hub.PublishAt(p.ns, p.ch, p.epoch, p.offset, p.at, p.data)
		} else {
			_, err = b.chans.hub.Publish(p.ns, p.ch, p.data)
		}
		if err != nil {
			b.lg.Warn("publication not delivered", "channel", p.ns+"/"+p.ch, "err", err)
			continue
		}
		b.opts.Observer.Publication()
	}
}

// History returns publications after since (exclusive), if the epoch
// matches and nothing after since fell out of history. With wait it is
// the long-poll of last resort for clients that have neither WebSocket
// nor SSE: when the position is valid and nothing follows it yet, it
// waits up to wait for the next publication.
func (b *Broker) History(ctx context.Context, ns, ch string, since uint64, epoch string, limit int, wait time.Duration) (pubsub.HistoryResult, error) {
	if !pubsub.ValidChannel(ch) {
		return pubsub.HistoryResult{}, errBadChannel
	}
	h, err := b.chans.hub.History(ns, ch, since, epoch, limit)
	if err != nil {
		return pubsub.HistoryResult{}, channelError(err)
	}
	if wait > 0 && h.Recovered && len(h.Publications) == 0 {
		// Subscribe before reading again, so a publication between the
		// read and the wait cannot slip by.
		w := &historyWaiter{ready: make(chan struct{})}
		sub, err := b.chans.hub.Subscribe(ns, ch, w, pubsub.SubscribeOptions{}, nil)
		if err != nil {
			return pubsub.HistoryResult{}, channelError(err)
		}
		if h, err = b.chans.hub.History(ns, ch, since, epoch, limit); err == nil && h.Recovered && len(h.Publications) == 0 {
			t := time.NewTimer(wait)
			select {
			case <-w.ready:
			case <-t.C:
			case <-ctx.Done():
			case <-b.stop:
			case <-b.drained:
			}
			t.Stop()
			h, err = b.chans.hub.History(ns, ch, since, epoch, limit)
		}
		sub.Unsubscribe()
		if err != nil {
			return pubsub.HistoryResult{}, channelError(err)
		}
	}
	return h, nil
}
