package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	httpapi "github.com/chronoq/chronoq/internal/api/http"
	"github.com/chronoq/chronoq/internal/engine"
)

// Channels are real-time pub/sub streams with a bounded history. They do
// not go through the loop: a publication is not a job and needs no
// durability here. History lives in memory, so a restart starts a new
// epoch — which is exactly what epochs tell subscribers (API.md: a client
// whose epoch differs gets recovered:false and reloads its state).
type channels struct {
	mu    sync.Mutex
	chans map[string]*channel
	epoch string // fresh per process
}

type channel struct {
	offset uint64
	ring   []httpapi.Publication // the last historySize publications
}

const historySize = 1000

func (c *channels) init() {
	c.chans = map[string]*channel{}
	var b [8]byte
	rand.Read(b[:])
	c.epoch = hex.EncodeToString(b[:])
}

// Publish appends a publication to a channel's history.
func (b *Broker) Publish(ctx context.Context, ns, ch string, data []byte) (uint64, string, error) {
	if !engine.ValidQueueName(ch) {
		return 0, "", &engine.Error{Code: engine.CodeBadRequest, Field: "channel", Message: "must match [A-Za-z0-9_.-]{1,200}"}
	}
	c := &b.chans
	c.mu.Lock()
	defer c.mu.Unlock()
	k := qkey(ns, ch)
	cur := c.chans[k]
	if cur == nil {
		cur = &channel{}
		c.chans[k] = cur
	}
	cur.offset++
	p := httpapi.Publication{Offset: cur.offset, Data: append([]byte(nil), data...), Time: b.now()}
	if len(cur.ring) >= historySize {
		copy(cur.ring, cur.ring[1:])
		cur.ring = cur.ring[:historySize-1]
	}
	cur.ring = append(cur.ring, p)
	b.opts.Observer.Publication()
	return cur.offset, c.epoch, nil
}

// History returns publications after since (exclusive), if the epoch
// matches and nothing after since fell out of history.
func (b *Broker) History(ctx context.Context, ns, ch string, since uint64, epoch string, limit int) (httpapi.HistoryResult, error) {
	c := &b.chans
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.chans[qkey(ns, ch)]
	res := httpapi.HistoryResult{Epoch: c.epoch}
	if cur == nil {
		res.Recovered = epoch == "" || epoch == c.epoch
		if since > 0 {
			res.Recovered = false
		}
		return res, nil
	}
	res.Offset = cur.offset
	if epoch != "" && epoch != c.epoch || since > cur.offset {
		return res, nil
	}
	first := cur.offset - uint64(len(cur.ring)) + 1 // oldest offset still held
	if since+1 < first {
		return res, nil
	}
	res.Recovered = true
	for _, p := range cur.ring {
		if p.Offset > since {
			if limit > 0 && len(res.Publications) >= limit {
				break
			}
			res.Publications = append(res.Publications, p)
		}
	}
	_ = time.Now
	return res, nil
}
