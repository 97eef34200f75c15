package stats

import (
	"time"
)

// Observer is the broker's observer (internal/broker's Observer).
type Observer interface {
	Commit(entries, bytes int, d time.Duration)
	Snapshot(d time.Duration)
	FirstTake(ns, queue string, waited time.Duration)
	Lateness(d time.Duration)
	Publication()
}

// Tee passes every observation to next and records commits and snapshots
// in h too.
func Tee(next Observer, h *History) Observer { return tee{next, h} }

type tee struct {
	Observer
	h *History
}

func (t tee) Commit(entries, bytes int, d time.Duration) {
	t.Observer.Commit(entries, bytes, d)
	t.h.Commit(entries, bytes, d)
}

func (t tee) Snapshot(d time.Duration) {
	t.Observer.Snapshot(d)
	t.h.Snapshot(time.Now(), d)
}
