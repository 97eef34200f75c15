package httpkit

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the failed-authentication brake (docs/api.md, Authentication).
const (
	// DefaultFailures is how many failed authentications one source may
	// make in a window before it is refused with 429.
	DefaultFailures = 10
	// DefaultFailureWindow is the window's length.
	DefaultFailureWindow = time.Minute
	// DefaultFailureSources bounds the sources tracked at once. Beyond it,
	// new sources share one overflow entry: memory stays bounded whatever
	// the number of addresses an attacker uses, and churning addresses does
	// not escape the brake.
	DefaultFailureSources = 4096
)

// FailureLimiter counts failed authentications per source address in fixed
// windows and refuses a source that reached the limit until its window
// ends. IPv6 sources count per /64, the smallest block a host is usually
// given.
type FailureLimiter struct {
	max     int
	window  time.Duration
	sources int
	now     func() time.Time

	mu       sync.Mutex
	m        map[netip.Prefix]*failWindow
	overflow failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

// NewFailureLimiter allows max failures per window per source, tracking at
// most sources sources; now is the clock (nil: time.Now). Zero values pick
// the defaults.
func NewFailureLimiter(max int, window time.Duration, sources int, now func() time.Time) *FailureLimiter {
	if max <= 0 {
		max = DefaultFailures
	}
	if window <= 0 {
		window = DefaultFailureWindow
	}
	if sources <= 0 {
		sources = DefaultFailureSources
	}
	if now == nil {
		now = time.Now
	}
	return &FailureLimiter{max: max, window: window, sources: sources, now: now, m: make(map[netip.Prefix]*failWindow)}
}

// sourceKey is the address of remoteAddr ("ip:port"), IPv6 cut to /64. An
// address that does not parse (a unix socket, a test) is one source.
func sourceKey(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// Blocked says whether the source must wait, and how long.
func (l *FailureLimiter) Blocked(remoteAddr string) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.find(sourceKey(remoteAddr), false)
	if w == nil || now.Sub(w.start) >= l.window || w.n < l.max {
		return 0, false
	}
	return w.start.Add(l.window).Sub(now), true
}

// Fail records one failed authentication of the source.
func (l *FailureLimiter) Fail(remoteAddr string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.find(sourceKey(remoteAddr), true)
	if now.Sub(w.start) >= l.window {
		w.start, w.n = now, 0
	}
	w.n++
}

// find returns the source's window; with create, a new one or, when the
// table is full even after dropping ended windows, the overflow window.
func (l *FailureLimiter) find(k netip.Prefix, create bool) *failWindow {
	if w, ok := l.m[k]; ok {
		return w
	}
	if !create {
		if len(l.m) >= l.sources {
			return &l.overflow
		}
		return nil
	}
	if len(l.m) >= l.sources {
		now := l.now()
		for key, w := range l.m {
			if now.Sub(w.start) >= l.window {
				delete(l.m, key)
			}
		}
		if len(l.m) >= l.sources {
			return &l.overflow
		}
	}
	w := &failWindow{}
	l.m[k] = w
	return w
}
