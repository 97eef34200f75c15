package broker

import "time"

// chore is one piece of work handed to a goroutine, which its owner polls
// without blocking or waits for: reading a segment ahead for compaction
// and removing old segments (owned by the loop; Close waits for them once
// the loop has ended), reading the far store's side files during recovery.
type chore struct{ done chan struct{} }

// start runs fn in a goroutine. The previous chore must be over.
func (c *chore) start(fn func()) {
	done := make(chan struct{})
	c.done = done
	go func() {
		defer close(done)
		fn()
	}()
}

// running reports whether the chore has not ended (false if none began).
func (c *chore) running() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		c.done = nil
		return false
	default:
		return true
	}
}

// wait returns once the chore has ended.
func (c *chore) wait() {
	if c.done != nil {
		<-c.done
		c.done = nil
	}
}

// pause waits d, or less if stop closes first, and reports whether the
// whole wait passed: background work off the loop (the scrub, removals)
// sleeps off its pace this way and ends promptly when the broker stops.
func pause(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
