package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Target is a queue server under test. Open prepares fresh state for one
// run (a new queue, tube, key prefix or stream) so runs never see each
// other's jobs; Cleanup removes it afterwards where the server allows.
type Target interface {
	Addr() string
	Caps() Caps
	// Connect opens one connection; each worker uses its own.
	Connect(ctx context.Context) (Conn, error)
	Cleanup(ctx context.Context) error
	Close() error
}

// Caps describes what a target can do.
type Caps struct {
	// DelayResolution is the granularity of delays (beanstalkd: whole
	// seconds); zero when the target cannot delay jobs.
	DelayResolution time.Duration
	// NoDelayReason says why, for the report's n/a cells.
	NoDelayReason string
}

// Conn is one connection of one worker; not used concurrently.
type Conn interface {
	// Put stores a job durably (to the target's durability setting) and
	// returns once the server confirmed it; delay > 0 makes it due later.
	Put(ctx context.Context, payload []byte, delay time.Duration) error
	// Take reserves one job, waiting up to wait for one; ErrEmpty if none.
	Take(ctx context.Context, wait time.Duration) (Job, error)
	// Ack completes a taken job.
	Ack(ctx context.Context, j Job) error
	Close() error
}

// AckTaker is a Conn that can ack a job and take the next one in one
// request (chronoq-http: an ack with "take"); the lifecycle scenario uses
// it unless Config.ThreeRequests is set.
type AckTaker interface {
	// AckTake acks j and reserves the next job, waiting up to wait for
	// one; ErrEmpty (the ack done) if none came.
	AckTake(ctx context.Context, j Job, wait time.Duration) (Job, error)
}

// Pipeliner is a Conn that can send several puts before reading their
// answers, as a client with many puts in flight on one connection does
// (--pipeline).
type Pipeliner interface {
	// PutPipelined sends len(lat) puts back to back, then reads their
	// answers in order; lat[i] is the time from the i-th put's send to its
	// answer.
	PutPipelined(ctx context.Context, payload []byte, lat []time.Duration) error
}

// FanoutTarget is a target with publish/subscribe channels (the fanout
// scenario): one publisher, --conns subscribers of one channel per run.
type FanoutTarget interface {
	// Subscribe opens a subscriber connection; onPub gets each
	// publication's payload, on one goroutine per subscriber.
	Subscribe(ctx context.Context, onPub func(payload []byte)) (Subscriber, error)
	Publisher(ctx context.Context) (Publisher, error)
}

// Subscriber is one subscribed connection.
type Subscriber interface {
	// Err tells why the connection ended early (nil while it is up).
	Err() error
	// Close ends the connection; no onPub call follows its return.
	Close() error
}

// Publisher publishes to the run's channel and returns once the server
// accepted the publication.
type Publisher interface {
	Publish(ctx context.Context, payload []byte) error
	Close() error
}

// Job is a taken job: its payload and the target's handle to ack it.
type Job struct {
	Payload []byte
	Ref     any // the target's own: a receipt, a delivery, a message
	// ActivateAt is when the server made the job due, where the target's
	// answer says (chronoq's activate_at); zero otherwise.
	ActivateAt time.Time
}

// OpenFunc connects to a target at addr and prepares fresh state named
// after run (a queue, tube, key prefix or stream).
type OpenFunc func(ctx context.Context, cfg Config, addr, run string) (Target, error)

type targetInfo struct {
	defaultAddr string
	about       string
	open        OpenFunc
}

// targets by --target name: chronoq's own protocols here; the peers
// (beanstalkd, Redis, NATS, RabbitMQ) register from internal/bench/peers,
// which only cmd/chronoq-bench links, so their client libraries stay out
// of the server binary.
var (
	targetsMu sync.Mutex
	targets   = map[string]targetInfo{
		"chronoq-http":      {"127.0.0.1:7777", "chronoq's native HTTP API", openChronoqHTTP},
		"chronoq-beanstalk": {"127.0.0.1:11300", "chronoq's beanstalkd-protocol listener (go-beanstalk)", OpenBeanstalk},
		"chronoq-ws":        {"127.0.0.1:7777", "chronoq's WebSocket API (gorilla/websocket; also the fanout scenario)", openChronoqWS},
	}
)

// Register adds a target under name; registering a name twice panics,
// as it is a programming error.
func Register(name, defaultAddr, about string, open OpenFunc) {
	targetsMu.Lock()
	defer targetsMu.Unlock()
	if _, dup := targets[name]; dup {
		panic("bench: target " + name + " registered twice")
	}
	targets[name] = targetInfo{defaultAddr, about, open}
}

// Targets lists the target names with a line about each.
func Targets() []string {
	targetsMu.Lock()
	defer targetsMu.Unlock()
	var out []string
	for name, t := range targets {
		out = append(out, fmt.Sprintf("%-18s %s (default %s)", name, t.about, t.defaultAddr))
	}
	sort.Strings(out)
	return out
}

// Open connects to cfg.Target and prepares a fresh queue for one run.
func Open(ctx context.Context, cfg Config) (Target, error) {
	targetsMu.Lock()
	t, ok := targets[cfg.Target]
	var names []string
	for n := range targets {
		names = append(names, n)
	}
	targetsMu.Unlock()
	if !ok {
		sort.Strings(names)
		return nil, fmt.Errorf("unknown target %q (want one of %s)", cfg.Target, strings.Join(names, ", "))
	}
	addr := cfg.Addr
	if addr == "" {
		addr = t.defaultAddr
	}
	run := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return t.open(ctx, cfg, addr, run)
}

// stampLen is the size of the due-time stamp at the start of a delayed
// job's payload: 19 decimal digits of Unix nanoseconds and a space. ASCII,
// so it survives every target, JSON strings included.
const stampLen = 20

func stamp(payload []byte, due time.Time) {
	s := strconv.FormatInt(due.UnixNano(), 10)
	for len(s) < stampLen-1 {
		s = "0" + s
	}
	copy(payload, s+" ")
}

func unstamp(payload []byte) (time.Time, bool) {
	if len(payload) < stampLen || payload[stampLen-1] != ' ' {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(string(payload[:stampLen-1]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// ParseDelayRange reads "MIN..MAX" (or one duration for a fixed delay).
func ParseDelayRange(s string) (lo, hi time.Duration, err error) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		b = a
	}
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err == nil {
		hi, err = time.ParseDuration(strings.TrimSpace(b))
	}
	if err != nil || lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("--delay-range: want MIN..MAX durations with 0 <= MIN <= MAX (e.g. 1s..10s), got %q", s)
	}
	return lo, hi, nil
}
