package stats

import (
	"time"

	"github.com/chronoq/chronoq/internal/broker"
)

// Tee passes every observation to next and records commits and snapshots
// in h too.
func Tee(next broker.Observer, h *History) broker.Observer { return tee{next, h} }

type tee struct {
	broker.Observer
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
