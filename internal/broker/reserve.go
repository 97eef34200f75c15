package broker

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Reserving and giving back the beanstalkd way; the native take is Take
// (api.go).

// TakeBest reserves the most urgent ready job across queues, without
// waiting.
func (b *Broker) TakeBest(ctx context.Context, ns string, queues []string) ([]engine.Job, error) {
	jobs, err := call(b, ctx, func(now time.Time) ([]engine.Job, error) { return b.eng.TakeBest(now, ns, queues) })
	if err != nil {
		return nil, err
	}
	return jobs, b.fill(jobs)
}

// ReserveJob reserves one particular job.
func (b *Broker) ReserveJob(ctx context.Context, ns, q, id string, ttr *time.Duration) (engine.Job, error) {
	return callJob(b, ctx, func(now time.Time) (engine.Job, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return engine.Job{}, err
		}
		return b.eng.ReserveJob(now, ns, q, id, ttr)
	})
}

// Release gives a reservation back in beanstalkd's ready order.
func (b *Broker) Release(ctx context.Context, ns, q, id string, req engine.ReleaseRequest) (engine.State, error) {
	return call(b, ctx, func(now time.Time) (engine.State, error) { return b.eng.Release(now, ns, q, id, req) })
}
