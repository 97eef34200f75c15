// Package stats keeps the short history the dashboard draws: one sample a
// second of the put/take/ack/nack rates and the log's commit latency, for
// the last 15 minutes, in memory only (a restart starts it empty; the
// Prometheus metrics on /metrics are the long-term record).
package stats

import (
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// DefaultSize is 15 minutes of one-second samples.
const DefaultSize = 15 * 60

// Sample is one interval of the history. Rates are per second over the
// interval since the previous sample.
type Sample struct {
	Time time.Time `json:"t"`
	Put  float64   `json:"put"`
	Take float64   `json:"take"`
	Ack  float64   `json:"ack"`
	Nack float64   `json:"nack"`
	// Commits made durable in the interval, and their mean and longest
	// duration in milliseconds (0 when none happened).
	Commits      int     `json:"commits"`
	CommitMeanMs float64 `json:"commit_mean_ms"`
	CommitMaxMs  float64 `json:"commit_max_ms"`
	WALBytesPerS float64 `json:"wal_bytes_per_s"`
}

// History is a ring of samples. Commit is called by the broker's loop for
// every commit; Record by one sampler once a second. Both are cheap: a
// mutex and a few additions.
type History struct {
	mu   sync.Mutex
	ring []Sample
	head int // next slot to write
	n    int // samples held

	have     bool
	last     engine.Stats
	lastTime time.Time

	// the commits of the running interval
	commits  int
	entries  int
	bytes    int64
	sum, top time.Duration

	walBytes     int64     // appended since start
	lastSnapshot time.Time // when the last snapshot finished; zero: none yet
	snapshotDur  time.Duration
}

// New makes a history of size samples (DefaultSize when size <= 0).
func New(size int) *History {
	if size <= 0 {
		size = DefaultSize
	}
	return &History{ring: make([]Sample, size)}
}

// Commit records one durable log commit (broker.Observer).
func (h *History) Commit(entries, bytes int, d time.Duration) {
	h.mu.Lock()
	h.commits++
	h.entries += entries
	h.bytes += int64(bytes)
	h.walBytes += int64(bytes)
	h.sum += d
	h.top = max(h.top, d)
	h.mu.Unlock()
}

// Snapshot records a finished snapshot at time at that took d.
func (h *History) Snapshot(at time.Time, d time.Duration) {
	h.mu.Lock()
	h.lastSnapshot, h.snapshotDur = at, d
	h.mu.Unlock()
}

// LastSnapshot answers when the last snapshot of this process finished
// and how long it took (zero time: none yet).
func (h *History) LastSnapshot() (time.Time, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastSnapshot, h.snapshotDur
}

// WALBytes is the number of bytes appended to the log since start.
func (h *History) WALBytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.walBytes
}

// Record closes the interval ending at now with the engine's counters
// (which only grow) and returns its sample. The first call only sets the
// starting point and returns ok=false; so does a call whose now is not
// after the previous one.
func (h *History) Record(now time.Time, s engine.Stats) (Sample, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.have || !now.After(h.lastTime) {
		if !h.have {
			h.have, h.last, h.lastTime = true, s, now
			h.resetInterval()
		}
		return Sample{}, false
	}
	secs := now.Sub(h.lastTime).Seconds()
	rate := func(cur, prev uint64) float64 {
		if cur < prev { // counters were reset (engine.ResetStats): count from zero
			prev = 0
		}
		return float64(cur-prev) / secs
	}
	smp := Sample{
		Time:         now,
		Put:          rate(s.Put, h.last.Put),
		Take:         rate(s.Taken, h.last.Taken),
		Ack:          rate(s.Acked, h.last.Acked),
		Nack:         rate(s.Nacked, h.last.Nacked),
		Commits:      h.commits,
		CommitMaxMs:  ms(h.top),
		WALBytesPerS: float64(h.bytes) / secs,
	}
	if h.commits > 0 {
		smp.CommitMeanMs = ms(h.sum / time.Duration(h.commits))
	}
	h.ring[h.head] = smp
	h.head = (h.head + 1) % len(h.ring)
	h.n = min(h.n+1, len(h.ring))
	h.last, h.lastTime = s, now
	h.resetInterval()
	return smp, true
}

func (h *History) resetInterval() {
	h.commits, h.entries, h.bytes, h.sum, h.top = 0, 0, 0, 0, 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Samples returns the held samples taken after since, oldest first.
func (h *History) Samples(since time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, h.n)
	start := (h.head - h.n + len(h.ring)) % len(h.ring)
	for i := 0; i < h.n; i++ {
		s := h.ring[(start+i)%len(h.ring)]
		if s.Time.After(since) {
			out = append(out, s)
		}
	}
	return out
}
