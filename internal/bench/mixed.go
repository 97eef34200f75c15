package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// The mixed scenario: --conns producer connections put while --conns
// other connections consume the same queue (take, ack; chronoq-http acks
// and takes the next job in one request). Jobs are the jobs consumed;
// jobs_per_sec counts them, puts_per_sec the puts. The main percentiles
// are one consume request (a take that found a job, and its ack),
// put_p50_ms/put_p99_ms one put. Consumers that find the queue empty wait
// (mixedWait) and that wait is not a sample: it measures the producers,
// not the server.
//
// Producers are paced to what the consumers take (Config.Backlog): a put
// needs room in a backlog of jobs put and not yet taken, and every take
// makes room. Unpaced, producers that outrun the consumers (puts are
// cheaper than take + ack) grow the queue for the whole run, so the rate
// depends on how long the run and the runs before it on the same server
// lasted, and the producers take CPU from the consumers on a shared
// machine; paced, the queue holds a steady backlog, every consumer finds
// a job, and puts/s equals jobs/s. The wait for room is not part of the
// put sample.

// mixedWait bounds one consumer take; an empty answer is not an error.
const mixedWait = time.Second

func runMixed(ctx context.Context, cfg Config, tgt Target) (Result, *Recorder, error) {
	prods := make([]Conn, cfg.Conns)
	cons := make([]Conn, cfg.Conns)
	defer func() {
		for _, c := range append(prods, cons...) {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Connections are made before the clock starts, a few at a time so a
	// thousand dials do not overrun the listener's accept backlog.
	if err := connectAll(ctx, tgt, prods); err != nil {
		return Result{}, nil, fmt.Errorf("%s: connect %s: %w", cfg.Target, tgt.Addr(), err)
	}
	if err := connectAll(ctx, tgt, cons); err != nil {
		return Result{}, nil, fmt.Errorf("%s: connect %s: %w", cfg.Target, tgt.Addr(), err)
	}
	r := &runner{cfg: cfg, caps: tgt.Caps()}
	_, r.ackTake = cons[0].(AckTaker)
	var puts atomic.Int64
	room := newBacklog(cfg.backlog())
	putRecs := make([]*Recorder, cfg.Conns)
	conRecs := make([]*Recorder, cfg.Conns)
	r.meterStart(tgt)
	start := time.Now()
	r.deadline = start.Add(cfg.Duration)
	stopRoom := time.AfterFunc(cfg.Duration, room.close)
	defer stopRoom.Stop()
	stopProgress := r.progress(start)
	fail := func(err error) {
		r.errs.Add(1)
		r.firstErr.CompareAndSwap(nil, &err)
	}
	var wg sync.WaitGroup
	for i := range prods {
		putRecs[i], conRecs[i] = &Recorder{}, &Recorder{}
		wg.Add(2)
		go func() {
			defer wg.Done()
			payload := make([]byte, cfg.Payload)
			for k := range payload {
				payload[k] = 'x'
			}
			bad := 0
			for ctx.Err() == nil && time.Now().Before(r.deadline) && bad < maxConsecutiveErrors {
				if !room.acquire(ctx) {
					return
				}
				t0 := time.Now()
				if err := prods[i].Put(ctx, payload, 0); err != nil {
					room.release()
					fail(fmt.Errorf("put: %w", err))
					bad++
					continue
				}
				bad = 0
				putRecs[i].Record(time.Since(t0))
				puts.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			r.consume(ctx, cons[i], conRecs[i], room, fail)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.meterStop()
	stopProgress()

	putRec, rec := &Recorder{}, &Recorder{}
	for i := range putRecs {
		putRec.Merge(putRecs[i])
		rec.Merge(conRecs[i])
	}
	res, rec, err := r.finish(ctx, tgt, elapsed, rec)
	res.Puts = puts.Load()
	res.Backlog = cfg.backlog()
	res.PutsPerSec = round3(float64(res.Puts) / elapsed.Seconds())
	res.PutP50MS, res.PutP99MS = ms(putRec.Quantile(0.5)), ms(putRec.Quantile(0.99))
	return res, rec, err
}

// consume takes and acks until the deadline; the sample is the request(s)
// that brought a job and acked the previous one.
func (r *runner) consume(ctx context.Context, c Conn, rec *Recorder, room *backlog, fail func(error)) {
	at, _ := c.(AckTaker)
	var held *Job
	defer func() {
		if held != nil {
			if err := c.Ack(ctx, *held); err != nil {
				fail(fmt.Errorf("ack: %w", err))
			} else {
				r.jobs.Add(1)
			}
		}
	}()
	bad := 0
	for ctx.Err() == nil && time.Now().Before(r.deadline) && bad < maxConsecutiveErrors {
		t0 := time.Now()
		var j Job
		var err error
		switch {
		case held != nil && at != nil:
			prev := *held
			held = nil
			j, err = at.AckTake(ctx, prev, mixedWait)
			if err == nil || errors.Is(err, ErrEmpty) {
				r.jobs.Add(1) // the ack went through
			}
		case held != nil:
			if err = c.Ack(ctx, *held); err != nil {
				break
			}
			held = nil
			r.jobs.Add(1)
			j, err = c.Take(ctx, mixedWait)
		default:
			j, err = c.Take(ctx, mixedWait)
		}
		switch {
		case errors.Is(err, ErrEmpty):
			continue
		case err != nil:
			fail(fmt.Errorf("consume: %w", err))
			bad++
			continue
		}
		bad = 0
		held = &j
		rec.Record(time.Since(t0))
		room.release()
	}
}

// backlog bounds the jobs put and not yet taken: a producer takes a slot
// before it puts, a consumer's take gives one back. A nil backlog never
// blocks (Config.Backlog < 0).
type backlog struct {
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newBacklog(n int) *backlog {
	if n <= 0 {
		return nil
	}
	return &backlog{slots: make(chan struct{}, n), done: make(chan struct{})}
}

// acquire waits for room; false when the run ended first.
func (b *backlog) acquire(ctx context.Context) bool {
	if b == nil {
		return ctx.Err() == nil
	}
	select {
	case b.slots <- struct{}{}:
		return true
	case <-b.done:
	case <-ctx.Done():
	}
	return false
}

// release gives a slot back; a take of a job no slot covers (the queue
// is fresh, so only after a failed put's slot went back) is ignored.
func (b *backlog) release() {
	if b == nil {
		return
	}
	select {
	case <-b.slots:
	default:
	}
}

// close ends every wait for room (the run's duration is over).
func (b *backlog) close() {
	if b != nil {
		b.once.Do(func() { close(b.done) })
	}
}

// connectAll opens len(dst) connections, 16 at a time.
func connectAll(ctx context.Context, tgt Target, dst []Conn) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	sem := make(chan struct{}, 16)
	for i := range dst {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := tgt.Connect(ctx)
			if err != nil {
				first.CompareAndSwap(nil, &err)
				return
			}
			dst[i] = c
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// MixedComparison runs the mixed scenario at base connections and at
// cfg.Conns, in that order and in the same process, and answers both.
func MixedComparison(ctx context.Context, cfg Config, base int) (small, large Result, err error) {
	b := cfg
	b.Conns = base
	if small, _, err = Run(ctx, b); err != nil {
		return small, large, err
	}
	large, _, err = Run(ctx, cfg)
	return small, large, err
}

// WriteMixedRatios prints how the large run held up against the small one:
// throughput ratio and each run's p99/p50.
func WriteMixedRatios(w io.Writer, small, large Result) error {
	tp := 0.0
	if small.JobsPerSec > 0 {
		tp = large.JobsPerSec / small.JobsPerSec
	}
	ratio := func(p99, p50 float64) float64 {
		if p50 <= 0 {
			return 0
		}
		return p99 / p50
	}
	_, err := fmt.Fprintf(w, "%d+%d against %d+%d: throughput %.0f%% (goal >= 90%%); consume p99/p50 %.2f (%d+%d: %.2f), put p99/p50 %.2f (%d+%d: %.2f) (goal <= 2)\n",
		large.Conns, large.Conns, small.Conns, small.Conns, 100*tp,
		ratio(large.P99MS, large.P50MS), small.Conns, small.Conns, ratio(small.P99MS, small.P50MS),
		ratio(large.PutP99MS, large.PutP50MS), small.Conns, small.Conns, ratio(small.PutP99MS, small.PutP50MS))
	return err
}
