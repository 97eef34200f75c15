package broker

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Broker calls for the beanstalkd protocol (engine/beanstalk2.go).

// TakeBest reserves the most urgent ready job across queues, without
// waiting.
func (b *Broker) TakeBest(ctx context.Context, ns string, queues []string) ([]engine.Job, error) {
	jobs, err := call(b, ctx, func(now time.Time) ([]engine.Job, error) { return b.eng.TakeBest(now, ns, queues) })
	if err != nil {
		return nil, err
	}
	return jobs, b.fill(jobs)
}

// Release gives a reservation back in beanstalkd's ready order.
func (b *Broker) Release(ctx context.Context, ns, q, id string, req engine.ReleaseRequest) (engine.State, error) {
	return call(b, ctx, func(now time.Time) (engine.State, error) { return b.eng.Release(now, ns, q, id, req) })
}

// PeekState returns the head job of one state of a queue.
func (b *Broker) PeekState(ctx context.Context, ns, q string, state engine.State) (engine.Job, error) {
	j, err := call(b, ctx, func(now time.Time) (engine.Job, error) { return b.eng.PeekState(now, ns, q, state) })
	if err != nil {
		return j, err
	}
	jobs := []engine.Job{j}
	err = b.fill(jobs)
	return jobs[0], err
}

// KickBounded kicks up to n jobs, n cut to what the queue holds.
func (b *Broker) KickBounded(ctx context.Context, ns, q string, n int) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.KickBounded(now, ns, q, n) })
}
