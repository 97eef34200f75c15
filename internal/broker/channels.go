package broker

import (
	"context"
	"errors"
	"sync"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// Channels are real-time pub/sub streams with a bounded history, held by a
// pubsub.Hub. They do not go through the loop: a publication is not a job
// and needs no durability here. History lives in memory, so a restart
// starts new epochs — which is exactly what epochs tell subscribers
// (API.md: a client whose epoch differs gets recovered:false and reloads
// its state).
type channels struct {
	once sync.Once
	hub  *pubsub.Hub
}

// init exists for Open; the hub is made on first use because it needs the
// broker's clock, which init cannot see.
func (c *channels) init() {}

// Channels returns the hub behind Publish and History. The real-time
// transports subscribe through it; the server may configure history per
// namespace on it.
func (b *Broker) Channels() *pubsub.Hub {
	b.chans.once.Do(func() {
		b.chans.hub = pubsub.New(pubsub.Options{Clock: b.now})
	})
	return b.chans.hub
}

func channelError(err error) error {
	if errors.Is(err, pubsub.ErrBadName) {
		return &engine.Error{Code: engine.CodeBadRequest, Field: "channel", Message: err.Error()}
	}
	return err
}

// Publish appends a publication to a channel's history and fans it out to
// the channel's subscribers.
func (b *Broker) Publish(ctx context.Context, ns, ch string, data []byte) (uint64, string, error) {
	if !pubsub.ValidChannel(ch) {
		return 0, "", &engine.Error{Code: engine.CodeBadRequest, Field: "channel", Message: "must match [A-Za-z0-9_.-]{1,200}, optionally followed by #user[,user...]"}
	}
	// The caller's buffer may be reused; the hub keeps what it is given.
	p, err := b.Channels().Publish(ns, ch, append([]byte(nil), data...))
	if err != nil {
		return 0, "", channelError(err)
	}
	b.opts.Observer.Publication()
	return p.Offset, p.Epoch, nil
}

// History returns publications after since (exclusive), if the epoch
// matches and nothing after since fell out of history.
func (b *Broker) History(ctx context.Context, ns, ch string, since uint64, epoch string, limit int) (httpapi.HistoryResult, error) {
	h, err := b.Channels().History(ns, ch, since, epoch, limit)
	if err != nil {
		return httpapi.HistoryResult{}, channelError(err)
	}
	res := httpapi.HistoryResult{Offset: h.Offset, Epoch: h.Epoch, Recovered: h.Recovered}
	if len(h.Publications) > 0 {
		res.Publications = make([]httpapi.Publication, len(h.Publications))
		for i, p := range h.Publications {
			res.Publications[i] = httpapi.Publication{Offset: p.Offset, Data: p.Data, Time: p.Time}
		}
	}
	return res, nil
}
