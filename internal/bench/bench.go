// Package bench is chronoq's load generator: it drives chronoq through its
// HTTP, WebSocket and beanstalkd-protocol listeners and, once
// internal/bench/peers registered them, its peers (beanstalkd, Redis with
// lmstfy's layout, NATS JetStream, RabbitMQ), each through its standard Go
// client, with the same scenarios, and reports throughput and latency
// percentiles. internal/bench/report draws the plots; Main is the command
// line of both `chronoq bench` (chronoq's targets only) and
// cmd/chronoq-bench (every target, and plot).
//
// A target is reached through the small Target/Conn interface: put (with
// an optional delay), take with a wait, ack. Scenarios:
//
//   - put: durable puts as fast as possible; latency is one put.
//   - lifecycle: put → take → ack per iteration; latency is the cycle.
//   - delayed: put with a random delay, take it when due, ack; the
//     reported percentiles are lateness (handed out − due).
//   - fanout: one publisher, N subscribers of a chronoq channel over the
//     WebSocket API (chronoq-ws only); a job is one delivery, latency is
//     publish → delivery.
//   - mixed: N producer and N other consumer connections on one queue;
//     a job is one consumed job, latency is a consume request (mixed.go).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Scenarios in the order they are documented.
var Scenarios = []string{"put", "lifecycle", "delayed", "fanout", "mixed"}

// Config describes one run.
type Config struct {
	Target   string        // a name of Targets
	Addr     string        // host:port; empty: the target's default
	Scenario string        // put, lifecycle, delayed or fanout
	Conns    int           // concurrent connections, one worker each
	Duration time.Duration // how long workers start new iterations
	Payload  int           // payload bytes
	DelayMin time.Duration // delayed: the range of random delays
	DelayMax time.Duration
	Label    string // reported as "target" instead of Target (e.g. beanstalkd-nobinlog)
	Token    string // chronoq namespace token, if the server requires one
	// ServerPID is the server process whose CPU time is measured; 0 finds
	// it by the listening port of the target's address (this host only).
	ServerPID int
	// NoServerCPU skips the server CPU measurement.
	NoServerCPU bool
	// ThreeRequests makes the lifecycle scenario put, take and ack in three
	// requests even where the target can ack and take the next job in one
	// (AckTaker).
	ThreeRequests bool
	// Pipeline (put) makes each connection send this many puts before
	// reading their answers (targets that are Pipeliners); 0 or 1: one.
	Pipeline int

	// Backlog (mixed) bounds the jobs put and not yet taken: producers
	// wait for room (mixed.go). 0 means 2 × Conns; negative means
	// unpaced, producers put as fast as they can.
	Backlog int

	// Progress, when set, gets a live "\r"-rewritten status line.
	Progress io.Writer
	// ProgressEvery is the progress period [1s].
	ProgressEvery time.Duration
}

// Result is a run's outcome; its JSON form is exactly the object the
// issue specifies, so results of many runs concatenate into an array.
type Result struct {
	Target     string  `json:"target"`
	Scenario   string  `json:"scenario"`
	Conns      int     `json:"conns"`
	Payload    int     `json:"payload"`
	DurationS  float64 `json:"duration_s"`
	Jobs       int64   `json:"jobs"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	P50MS      float64 `json:"p50_ms"`
	P90MS      float64 `json:"p90_ms"`
	P99MS      float64 `json:"p99_ms"`
	MaxMS      float64 `json:"max_ms"`
	Errors     int64   `json:"errors"`
	// Variant says how the scenario ran when a target can run it more than
	// one way: "ack+take" (lifecycle: the ack takes the next job).
	Variant string `json:"variant,omitempty"`
	// The server process's CPU time (user + system) over the run, absent
	// when it could not be read (ServerCPUError says why). Per op is per
	// iteration: a put, a whole put → take → ack cycle, one delivery.
	ServerCPUS       float64 `json:"server_cpu_s,omitempty"`
	ServerCPUUsPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	OpsPerServerCPUS float64 `json:"ops_per_server_cpu_s,omitempty"`
	ServerCPUError   string  `json:"server_cpu_error,omitempty"`
	// mixed: the producers' puts and their latency (Jobs and the main
	// percentiles are the consumers').
	Puts       int64   `json:"puts,omitempty"`
	PutsPerSec float64 `json:"puts_per_sec,omitempty"`
	PutP50MS   float64 `json:"put_p50_ms,omitempty"`
	PutP99MS   float64 `json:"put_p99_ms,omitempty"`
	// mixed: the bound on jobs put and not yet taken (0: unpaced).
	Backlog int `json:"backlog,omitempty"`
	// delayed, where the target says when it made each job due (Job.
	// ActivateAt): the lateness from that moment. The main percentiles
	// count from the put's start plus the delay, so they also hold the
	// put's own latency; these do not, and are the activation lateness
	// proper. Absent for targets that do not say.
	ActivationSamples int     `json:"activation_samples,omitempty"`
	ActivationP50MS   float64 `json:"activation_p50_ms,omitempty"`
	ActivationP99MS   float64 `json:"activation_p99_ms,omitempty"`
	ActivationMaxMS   float64 `json:"activation_max_ms,omitempty"`
}

// ErrUnsupported marks a scenario a target cannot run; the report shows
// such a cell as n/a with the error's reason.
var ErrUnsupported = errors.New("not supported")

// ErrEmpty is what Conn.Take answers when the wait passed without a job.
var ErrEmpty = errors.New("no job within the wait")

// Run performs one benchmark run. rec receives every latency sample (for
// delayed: every lateness sample) and may be used for a CDF afterwards.
func Run(ctx context.Context, cfg Config) (Result, *Recorder, error) {
	if err := cfg.check(); err != nil {
		return Result{}, nil, err
	}
	tgt, err := Open(ctx, cfg)
	if err != nil {
		return Result{}, nil, err
	}
	defer tgt.Close()
	caps := tgt.Caps()
	switch cfg.Scenario {
	case "delayed":
		if caps.DelayResolution == 0 {
			return Result{}, nil, fmt.Errorf("%s: delayed: %w (%s)", cfg.Target, ErrUnsupported, caps.NoDelayReason)
		}
	case "fanout":
		ft, ok := tgt.(FanoutTarget)
		if !ok {
			return Result{}, nil, fmt.Errorf("%s: fanout: %w (fanout needs channels: --target chronoq-ws or centrifugo)", cfg.Target, ErrUnsupported)
		}
		return runFanout(ctx, cfg, tgt, ft)
	case "mixed":
		return runMixed(ctx, cfg, tgt)
	}

	// Connections are made before the clock starts.
	conns := make([]Conn, cfg.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = tgt.Connect(ctx); err != nil {
			return Result{}, nil, fmt.Errorf("%s: connect %s: %w", cfg.Target, tgt.Addr(), err)
		}
	}

	r := &runner{cfg: cfg, caps: caps}
	if cfg.Pipeline > 1 {
		if _, ok := conns[0].(Pipeliner); !ok || cfg.Scenario != "put" {
			return Result{}, nil, fmt.Errorf("%s %s: --pipeline: %w (pipelined puts: the put scenario on chronoq-ws, chronoq-beanstalk or beanstalkd)", cfg.Target, cfg.Scenario, ErrUnsupported)
		}
	}
	if cfg.Scenario == "lifecycle" && !cfg.ThreeRequests {
		_, r.ackTake = conns[0].(AckTaker)
	}
	recs := make([]*Recorder, cfg.Conns)
	acts := make([]*Recorder, cfg.Conns)
	r.meterStart(tgt)
	start := time.Now()
	r.deadline = start.Add(cfg.Duration)
	stopProgress := r.progress(start)
	var wg sync.WaitGroup
	for i := range conns {
		recs[i], acts[i] = &Recorder{}, &Recorder{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(ctx, conns[i], recs[i], acts[i], uint64(i))
			// A finished worker closes its connection at once: a target
			// that pushes jobs to consumers (chronoq-ws, rabbitmq) would
			// otherwise keep handing this idle connection a job another,
			// still running worker is waiting for (its take then fails
			// after takeWait and stretches the run); closing gives such
			// pushed, unsettled jobs back to the queue.
			conns[i].Close()
			conns[i] = nil
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.meterStop()
	stopProgress()

	rec, act := &Recorder{}, &Recorder{}
	for i := range recs {
		rec.Merge(recs[i])
		act.Merge(acts[i])
	}
	res, rec, err := r.finish(ctx, tgt, elapsed, rec)
	if a := act.Summary(); a.Count > 0 {
		res.ActivationSamples = a.Count
		res.ActivationP50MS, res.ActivationP99MS, res.ActivationMaxMS = ms(a.P50), ms(a.P99), ms(a.Max)
	}
	return res, rec, err
}

// finish cleans the target up and builds the result.
func (r *runner) finish(ctx context.Context, tgt Target, elapsed time.Duration, rec *Recorder) (Result, *Recorder, error) {
	cfg := r.cfg
	cleanupCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_ = tgt.Cleanup(cleanupCtx) // best effort: the run is measured already

	res := Result{
		Target: cfg.Target, Scenario: cfg.Scenario, Conns: cfg.Conns, Payload: cfg.Payload,
		DurationS: round3(elapsed.Seconds()), Jobs: r.jobs.Load(), Errors: r.errs.Load(),
	}
	if cfg.Label != "" {
		res.Target = cfg.Label
	}
	res.JobsPerSec = round3(float64(res.Jobs) / elapsed.Seconds())
	if r.ackTake {
		res.Variant = "ack+take"
	}
	if cfg.Pipeline > 1 {
		res.Variant = fmt.Sprintf("pipeline %d", cfg.Pipeline)
	}
	r.cpuInto(&res)
	s := rec.Summary()
	res.P50MS, res.P90MS, res.P99MS, res.MaxMS = ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max)
	if res.Jobs == 0 {
		msg := "no iteration completed"
		if e := r.firstErr.Load(); e != nil {
			msg += ": " + (*e).Error()
		}
		return res, rec, fmt.Errorf("%s %s: %s (%d errors)", cfg.Target, cfg.Scenario, msg, res.Errors)
	}
	if ctx.Err() != nil {
		return res, rec, ctx.Err()
	}
	return res, rec, nil
}

func (cfg *Config) check() error {
	if cfg.Conns < 1 {
		return errors.New("conns must be at least 1")
	}
	if cfg.Duration <= 0 {
		return errors.New("duration must be positive")
	}
	if cfg.Payload < 0 {
		return errors.New("payload must not be negative")
	}
	known := false
	for _, s := range Scenarios {
		known = known || s == cfg.Scenario
	}
	if !known {
		return fmt.Errorf("unknown scenario %q (want %s)", cfg.Scenario, strings.Join(Scenarios, ", "))
	}
	if cfg.Scenario == "delayed" && (cfg.DelayMin < 0 || cfg.DelayMax < cfg.DelayMin) {
		return fmt.Errorf("bad delay range %s..%s", cfg.DelayMin, cfg.DelayMax)
	}
	return nil
}

// backlog is the mixed scenario's bound on jobs put and not yet taken;
// 0 is unpaced.
func (cfg *Config) backlog() int {
	switch {
	case cfg.Backlog < 0:
		return 0
	case cfg.Backlog == 0:
		return 2 * cfg.Conns
	}
	return cfg.Backlog
}

type runner struct {
	cfg      Config
	caps     Caps
	deadline time.Time
	jobs     atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Pointer[error]
	ackTake  bool // lifecycle through AckTaker

	meter  *cpuMeter
	cpu    time.Duration
	cpuErr error
}

func (r *runner) meterStart(tgt Target) {
	if !r.cfg.NoServerCPU {
		r.meter = newCPUMeter(r.cfg.ServerPID, tgt.Addr())
	}
}

func (r *runner) meterStop() {
	if r.meter != nil {
		r.cpu, r.cpuErr = r.meter.stop()
	}
}

// cpuInto reports the server CPU measured between meterStart and meterStop.
func (r *runner) cpuInto(res *Result) {
	switch {
	case r.meter == nil:
	case r.cpuErr != nil:
		res.ServerCPUError = r.cpuErr.Error()
	case res.Jobs > 0:
		res.ServerCPUS = round3(r.cpu.Seconds())
		res.ServerCPUUsPerOp = round3(float64(r.cpu.Microseconds()) / float64(res.Jobs))
		if r.cpu > 0 {
			res.OpsPerServerCPUS = round3(float64(res.Jobs) / r.cpu.Seconds())
		}
	}
}

// maxConsecutiveErrors stops a worker whose target keeps failing, so a
// dead server ends the run instead of spinning for its whole duration.
const maxConsecutiveErrors = 100

// worker runs one connection's loop; act gets the delayed scenario's
// lateness from the server's activation time, where the target tells it.
func (r *runner) worker(ctx context.Context, c Conn, rec, act *Recorder, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	payload := make([]byte, r.cfg.Payload)
	for i := range payload {
		payload[i] = 'x'
	}
	if r.cfg.Scenario == "delayed" && len(payload) < stampLen {
		payload = append(payload, make([]byte, stampLen-len(payload))...)
	}
	consecutive := 0
	var lat []time.Duration // pipelined puts' latencies
	if r.cfg.Pipeline > 1 {
		lat = make([]time.Duration, r.cfg.Pipeline)
	}
	var held *Job // ack+take lifecycle: the job the last ack took
	defer func() {
		if held != nil { // the last taken job is acked outside the clock
			if err := c.Ack(ctx, *held); err != nil {
				r.errs.Add(1)
				r.firstErr.CompareAndSwap(nil, &err)
			}
		}
	}()
	for ctx.Err() == nil && time.Now().Before(r.deadline) {
		var err error
		var sample time.Duration
		switch {
		case lat != nil:
			if err = c.(Pipeliner).PutPipelined(ctx, payload, lat); err == nil {
				r.jobs.Add(int64(len(lat)) - 1)
				for _, d := range lat[1:] {
					rec.Record(d)
				}
				sample = lat[0]
			}
		case r.cfg.Scenario == "put":
			t0 := time.Now()
			err = c.Put(ctx, payload, 0)
			sample = time.Since(t0)
		case r.cfg.Scenario == "lifecycle" && r.ackTake:
			sample, err = r.lifecycleAckTake(ctx, c.(AckTaker), c, payload, &held)
		case r.cfg.Scenario == "lifecycle":
			sample, err = r.lifecycle(ctx, c, payload)
		case r.cfg.Scenario == "delayed":
			sample, err = r.delayed(ctx, c, payload, rng, act)
		}
		if err != nil {
			r.errs.Add(1)
			r.firstErr.CompareAndSwap(nil, &err)
			if consecutive++; consecutive >= maxConsecutiveErrors {
				return
			}
			select { // a failing target must not be hammered in a tight loop
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
			continue
		}
		consecutive = 0
		r.jobs.Add(1)
		rec.Record(sample)
	}
}

// takeWait bounds one take of the lifecycle scenario: the worker's own put
// guarantees a job exists, so a take that waits this long is an error.
const takeWait = 5 * time.Second

func (r *runner) lifecycle(ctx context.Context, c Conn, payload []byte) (time.Duration, error) {
	t0 := time.Now()
	if err := c.Put(ctx, payload, 0); err != nil {
		return 0, fmt.Errorf("put: %w", err)
	}
	j, err := c.Take(ctx, takeWait)
	if err != nil {
		return 0, fmt.Errorf("take: %w", err)
	}
	if err := c.Ack(ctx, j); err != nil {
		return 0, fmt.Errorf("ack: %w", err)
	}
	return time.Since(t0), nil
}

// lifecycleAckTake is the lifecycle in two requests: put, then ack the
// job held from the previous iteration and take the next in one request
// (the first iteration takes with a plain take). Each iteration is still
// one put, one take and one ack; the job taken last is acked after the
// run.
func (r *runner) lifecycleAckTake(ctx context.Context, at AckTaker, c Conn, payload []byte, held **Job) (time.Duration, error) {
	t0 := time.Now()
	if err := c.Put(ctx, payload, 0); err != nil {
		return 0, fmt.Errorf("put: %w", err)
	}
	var j Job
	var err error
	if *held == nil {
		if j, err = c.Take(ctx, takeWait); err != nil {
			return 0, fmt.Errorf("take: %w", err)
		}
	} else {
		prev := **held
		*held = nil
		if j, err = at.AckTake(ctx, prev, takeWait); err != nil {
			return 0, fmt.Errorf("ack+take: %w", err)
		}
	}
	*held = &j
	return time.Since(t0), nil
}

// delayed puts one job due after a random delay, takes one job when one is
// due (any worker's: the queue is shared) and acks it; the sample is the
// taken job's lateness, from the due time stamped in its payload to the
// moment the take answered. The due time is the put's start plus the
// delay, so lateness also includes the put's own latency: an upper bound.
// Where the take's answer says when the server made the job due
// (Job.ActivateAt), act gets the lateness from then.
func (r *runner) delayed(ctx context.Context, c Conn, payload []byte, rng *rand.Rand, act *Recorder) (time.Duration, error) {
	d := r.cfg.DelayMin
	if span := r.cfg.DelayMax - r.cfg.DelayMin; span > 0 {
		d += time.Duration(rng.Int64N(int64(span) + 1))
	}
	if res := r.caps.DelayResolution; res > 1 {
		d = max(d.Round(res), res)
	}
	t0 := time.Now()
	stamp(payload, t0.Add(d))
	if err := c.Put(ctx, payload, d); err != nil {
		return 0, fmt.Errorf("put: %w", err)
	}
	j, err := c.Take(ctx, d+takeWait)
	if err != nil {
		return 0, fmt.Errorf("take: %w", err)
	}
	taken := time.Now()
	due, ok := unstamp(j.Payload)
	if err := c.Ack(ctx, j); err != nil {
		return 0, fmt.Errorf("ack: %w", err)
	}
	if !ok {
		return 0, fmt.Errorf("taken job carries no due-time stamp (%d bytes)", len(j.Payload))
	}
	if !j.ActivateAt.IsZero() {
		act.Record(taken.Sub(j.ActivateAt))
	}
	return taken.Sub(due), nil
}

// progress prints a status line every period until the returned func is
// called, which clears it.
func (r *runner) progress(start time.Time) (stop func()) {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	every := r.cfg.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		lastJobs, lastAt := int64(0), start
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case now := <-t.C:
				jobs := r.jobs.Load()
				rate := float64(jobs-lastJobs) / now.Sub(lastAt).Seconds()
				lastJobs, lastAt = jobs, now
				fmt.Fprintf(w, "\r\033[K%s %s: %6.1fs  %d jobs  %.0f jobs/s  %d errors",
					r.cfg.Target, r.cfg.Scenario, now.Sub(start).Seconds(), jobs, rate, r.errs.Load())
			}
		}
	}()
	return func() { close(done); <-finished }
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// fanoutWindow bounds how many publications the publisher may be ahead of
// the slowest subscriber, so the scenario measures the delivery rate the
// server sustains rather than how fast it disconnects slow consumers.
const fanoutWindow = 100

// runFanout: cfg.Conns subscribers of one channel and one publisher that
// publishes back to back (within the window) until the deadline. A job is
// one delivery to one subscriber; latency is publish start → delivery;
// errors are failed publications and deliveries that never arrived.
func runFanout(ctx context.Context, cfg Config, tgt Target, ft FanoutTarget) (Result, *Recorder, error) {
	r := &runner{cfg: cfg}
	n := cfg.Conns
	recs := make([]Recorder, n)
	counts := make([]atomic.Int64, n)
	subs := make([]Subscriber, n)
	closeSubs := func() {
		for _, s := range subs {
			if s != nil {
				s.Close()
			}
		}
	}
	defer closeSubs()
	for i := range subs {
		var err error
		subs[i], err = ft.Subscribe(ctx, func(p []byte) {
			if sent, ok := unstamp(p); ok {
				recs[i].Record(time.Since(sent))
			}
			counts[i].Add(1)
			r.jobs.Add(1)
		})
		if err != nil {
			return Result{}, nil, fmt.Errorf("%s: subscribe %s: %w", cfg.Target, tgt.Addr(), err)
		}
	}
	pub, err := ft.Publisher(ctx)
	if err != nil {
		return Result{}, nil, fmt.Errorf("%s: publisher %s: %w", cfg.Target, tgt.Addr(), err)
	}
	defer pub.Close()
	slowest := func() (int64, error) {
		low := int64(-1)
		for i := range counts {
			if err := subs[i].Err(); err != nil {
				return 0, fmt.Errorf("subscriber %d: %w", i, err)
			}
			if c := counts[i].Load(); low < 0 || c < low {
				low = c
			}
		}
		return low, nil
	}
	// waitFor waits until every subscriber has seen at least want publications.
	waitFor := func(want int64, limit time.Duration) error {
		give := time.Now().Add(limit)
		for {
			low, err := slowest()
			if err != nil || low >= want {
				return err
			}
			if time.Now().After(give) {
				return fmt.Errorf("subscribers stuck at %d of %d publications for %s", low, want, limit)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}

	payload := make([]byte, max(cfg.Payload, stampLen))
	for i := range payload {
		payload[i] = 'x'
	}
	r.meterStart(tgt)
	start := time.Now()
	r.deadline = start.Add(cfg.Duration)
	stopProgress := r.progress(start)
	var published int64
	var fail error
	for ctx.Err() == nil && time.Now().Before(r.deadline) {
		if fail = waitFor(published-fanoutWindow, takeWait); fail != nil {
			break
		}
		stamp(payload, time.Now())
		if err := pub.Publish(ctx, payload); err != nil {
			r.errs.Add(1)
			r.firstErr.CompareAndSwap(nil, &err)
			if r.errs.Load() >= maxConsecutiveErrors {
				break
			}
			continue
		}
		published++
	}
	if fail == nil {
		fail = waitFor(published, takeWait)
	}
	elapsed := time.Since(start)
	r.meterStop()
	stopProgress()
	closeSubs()
	subs = nil
	if fail != nil {
		r.firstErr.CompareAndSwap(nil, &fail)
	}
	// deliveries that never arrived are errors
	r.errs.Add(max(0, published*int64(n)-r.jobs.Load()))
	rec := &Recorder{}
	for i := range recs {
		rec.Merge(&recs[i])
	}
	res, rec, err := r.finish(ctx, tgt, elapsed, rec)
	if err == nil && fail != nil {
		err = fmt.Errorf("%s fanout: %w", cfg.Target, fail)
	}
	return res, rec, err
}
