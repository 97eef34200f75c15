package broker

import (
	"context"
	"time"
)

// Kick moves up to n dead (else delayed) jobs of a queue to ready.
func (b *Broker) Kick(ctx context.Context, ns, q string, n int) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) {
		if err := b.far.bringForKick(now, ns, q, n); err != nil {
			return 0, err
		}
		return b.eng.Kick(now, ns, q, n)
	})
}

// KickBounded kicks up to n jobs, n cut to what the queue holds.
func (b *Broker) KickBounded(ctx context.Context, ns, q string, n int) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) {
		if err := b.far.bringForKick(now, ns, q, n); err != nil {
			return 0, err
		}
		return b.eng.KickBounded(now, ns, q, n)
	})
}

// KickJob moves one dead or delayed job to ready.
func (b *Broker) KickJob(ctx context.Context, ns, q, id string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) {
		if err := b.far.bring(now, ns, q, id); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.eng.KickJob(now, ns, q, id)
	})
	return err
}
