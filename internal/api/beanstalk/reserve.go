package beanstalk

import (
	"context"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// safetyMargin is beanstalkd's SAFETY_MARGIN: a reserve of a connection
// whose reservation ends within it answers DEADLINE_SOON rather than wait
// (and a waiting one is interrupted when a reservation enters it), so the
// worker can finish or touch that job in time.
const safetyMargin = time.Second

// waitChunk bounds one broker wait of a reserve that waits forever.
const waitChunk = 10 * time.Minute

// reserve serves reserve (forever) and reserve-with-timeout.
func (c *conn) reserve(timeout time.Duration, forever bool) {
	c.worker.Store(true)
	ns := c.s.opts.Namespace
	queues := make([]string, len(c.watch))
	for i, t := range c.watch {
		queues[i] = t.queue
	}
	now := time.Now()
	end := now.Add(timeout)
	c.prune(now)
	// Ready jobs first, the most urgent across all watched tubes; only an
	// empty answer may wait.
	jobs, err := c.s.b.TakeBest(c.ctx, ns, queues)
	if err != nil {
		c.fail(err)
		return
	}
	if len(jobs) > 0 {
		c.reserved(jobs[0])
		return
	}
	if c.deadlineSoon(now) {
		c.send(msgDeadlineSoon)
		return
	}
	if !forever && timeout <= 0 {
		c.send(msgTimedOut)
		return
	}

	if err := c.w.Flush(); err != nil {
		return
	}
	c.settle(time.Now())
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := c.watchHangup(cancel)
	c.setWaiting(true)
	defer func() {
		stop()
		c.setWaiting(false)
	}()
	for {
		now = time.Now()
		wait := waitChunk
		if !forever {
			wait = min(wait, end.Sub(now))
		}
		if soon, ok := c.soonest(); ok {
			wait = min(wait, soon.Add(-safetyMargin).Sub(now))
		}
		if wait <= 0 {
			break
		}
		jobs, err := c.s.b.Take(ctx, ns, engine.TakeRequest{Queues: queues, Max: 1}, wait)
		if len(jobs) > 0 {
			// Served even if the client just left: the job is ours, and
			// closing the connection releases it.
			c.reserved(jobs[0])
			return
		}
		if ctx.Err() != nil {
			if c.s.ctx.Err() == nil {
				// The client hung up (or half-closed): beanstalkd ends
				// the wait with TIMED_OUT.
				c.send(msgTimedOut)
			}
			return
		}
		if err != nil {
			c.fail(err)
			return
		}
		if time.Until(now.Add(wait)) > 5*time.Millisecond {
			// Answered before its deadline without a job: the broker is
			// draining waits for shutdown. Do not spin.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	if c.deadlineSoon(time.Now()) {
		c.send(msgDeadlineSoon)
		return
	}
	c.send(msgTimedOut)
}

// reserved records and answers a job this connection now holds.
func (c *conn) reserved(j engine.Job) {
	r := &reservation{queue: j.Queue, id: j.ID, receipt: j.Receipt, ttr: j.TTR}
	r.extend(j.ReservedUntil, time.Now())
	c.mu.Lock()
	c.resv[j.Seq] = r
	c.unsent = append(c.unsent, r)
	c.mu.Unlock()
	c.sendJob("RESERVED", j.Seq, j.Data)
}

// prune forgets reservations whose time ran out (the engine has put those
// jobs back), counting them as timeouts.
func (c *conn) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for seq, r := range c.resv {
		if !r.until.After(now) {
			delete(c.resv, seq)
			c.s.timeouts.Add(1)
		}
	}
}

// soonest returns the earliest deadline, as its client counts it, among
// this connection's reservations.
func (c *conn) soonest() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t time.Time
	for _, r := range c.resv {
		if t.IsZero() || r.end.Before(t) {
			t = r.end
		}
	}
	return t, !t.IsZero()
}

func (c *conn) deadlineSoon(now time.Time) bool {
	t, ok := c.soonest()
	return ok && !now.Before(t.Add(-safetyMargin))
}
