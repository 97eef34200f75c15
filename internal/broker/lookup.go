package broker

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Looking at jobs without changing them, beyond Peek (api.go): by
// sequence number (beanstalkd's job ids), by the head of one state, by
// counting the urgent ones.

// JobBySeq finds a job of ns by its sequence number (beanstalkd id).
func (b *Broker) JobBySeq(ctx context.Context, ns string, seq uint64) (engine.Job, error) {
	return callJob(b, ctx, func(now time.Time) (engine.Job, error) {
		if err := b.far.bringSeq(now, ns, seq); err != nil {
			return engine.Job{}, err
		}
		return b.eng.JobBySeq(now, ns, seq)
	})
}

// PeekState returns the head job of one state of a queue.
func (b *Broker) PeekState(ctx context.Context, ns, q string, state engine.State) (engine.Job, error) {
	return callJob(b, ctx, func(now time.Time) (engine.Job, error) {
		j, err := b.eng.PeekState(now, ns, q, state)
		if state == engine.StateDelayed && engine.CodeOf(err) == engine.CodeJobNotFound {
			// every delayed job of the queue may be far: the earliest
			// bucket holding one of its jobs holds the soonest
			if n, ferr := b.far.bringEarliest(now, ns, q); ferr != nil {
				return j, ferr
			} else if n > 0 {
				j, err = b.eng.PeekState(now, ns, q, state)
			}
		}
		return j, err
	})
}

// UrgentReady counts ready jobs with priority below threshold.
func (b *Broker) UrgentReady(ctx context.Context, ns, q string, threshold uint32) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.UrgentReady(now, ns, q, threshold) })
}
