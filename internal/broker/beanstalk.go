package broker

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// Broker calls for the beanstalkd protocol (engine/beanstalk.go).

// JobBySeq finds a job of ns by its sequence number (beanstalkd id).
func (b *Broker) JobBySeq(ctx context.Context, ns string, seq uint64) (engine.Job, error) {
	j, err := call(b, ctx, func(now time.Time) (engine.Job, error) { return b.eng.JobBySeq(now, ns, seq) })
	if err != nil {
		return j, err
	}
	jobs := []engine.Job{j}
	err = b.fill(jobs)
	return jobs[0], err
}

// Kick moves up to n dead (else delayed) jobs of a queue to ready.
func (b *Broker) Kick(ctx context.Context, ns, q string, n int) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.Kick(now, ns, q, n) })
}

// KickJob moves one dead or delayed job to ready.
func (b *Broker) KickJob(ctx context.Context, ns, q, id string) error {
	_, err := call(b, ctx, func(now time.Time) (struct{}, error) { return struct{}{}, b.eng.KickJob(now, ns, q, id) })
	return err
}

// ReserveJob reserves one particular job.
func (b *Broker) ReserveJob(ctx context.Context, ns, q, id string, ttr *time.Duration) (engine.Job, error) {
	j, err := call(b, ctx, func(now time.Time) (engine.Job, error) { return b.eng.ReserveJob(now, ns, q, id, ttr) })
	if err != nil {
		return j, err
	}
	jobs := []engine.Job{j}
	err = b.fill(jobs)
	return jobs[0], err
}

// PauseFor pauses a queue for d (0 resumes).
func (b *Broker) PauseFor(ctx context.Context, ns, q string, d time.Duration) (engine.QueueInfo, error) {
	return call(b, ctx, func(now time.Time) (engine.QueueInfo, error) { return b.eng.PauseFor(now, ns, q, d) })
}

// UrgentReady counts ready jobs with priority below threshold.
func (b *Broker) UrgentReady(ctx context.Context, ns, q string, threshold uint32) (int, error) {
	return call(b, ctx, func(now time.Time) (int, error) { return b.eng.UrgentReady(now, ns, q, threshold) })
}

// EngineStats returns the process-wide engine counters.
func (b *Broker) EngineStats(ctx context.Context) (engine.Stats, error) { return b.Stats(ctx) }
