package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The scale scenario (docs/benchmarks.md, "Scale run") fills a chronoq
// server through the batch API with N jobs — delays spread over a year,
// 100-byte payloads, a tenth keyed, a twentieth tagged — and measures the
// server at that size: fill rate, resident memory and Go heap per job,
// put/take/ack latency on a small probe queue (also while a snapshot is
// written), and activation lateness. Restart time and disk use need the
// server stopped and started again: bench/scale.sh does that around it.

// ScaleConfig describes one scale run against a running chronoq.
type ScaleConfig struct {
	Addr      string // HTTP API host:port
	AdminAddr string // admin listener host:port (metrics, pprof, backup)
	Token     string // namespace token, also used on the admin listener
	Jobs      int64  // jobs to fill
	Conns     int    // fill connections, each sending batches
	Batch     int    // jobs per batch request (≤ 1000)
	Span      time.Duration
	Payload   int
	Probe     time.Duration // how long each latency probe runs
	ProbeConn int           // probe connections
	Lateness  time.Duration // how long the activation-lateness probe runs
	Queue     string        // the filled queue (default scale-<time>)
	Progress  io.Writer
}

// ScaleResult is what RunScale measured.
type ScaleResult struct {
	Jobs           int64   `json:"jobs"`
	FillS          float64 `json:"fill_s"`
	FillJobsPerSec float64 `json:"fill_jobs_per_sec"`
	RSSBytes       int64   `json:"rss_bytes"`
	HeapInuse      int64   `json:"heap_inuse_bytes"`
	HeapAlloc      int64   `json:"heap_alloc_bytes"`
	RSSPerJob      float64 `json:"rss_bytes_per_job"`
	HeapPerJob     float64 `json:"heap_inuse_bytes_per_job"`
	LivePerJob     float64 `json:"heap_alloc_bytes_per_job"`
	// With the far-future store on: how long its backlog took to go out
	// after the fill, how many jobs it then held, and memory after that.
	FarDrainS         float64 `json:"far_drain_s,omitempty"`
	FarJobs           int64   `json:"far_jobs,omitempty"`
	DrainedRSSBytes   int64   `json:"drained_rss_bytes,omitempty"`
	DrainedHeapInuse  int64   `json:"drained_heap_inuse_bytes,omitempty"`
	DrainedHeapPerJob float64 `json:"drained_heap_inuse_bytes_per_job,omitempty"`
	// the job table's size once it was no longer shrinking after the
	// drain, and how long after the drain that was (the drained figures are
	// read then)
	JobTableBytes int64     `json:"job_table_bytes,omitempty"`
	ShrinkS       float64   `json:"shrink_s,omitempty"`
	SnapWaitS     float64   `json:"snapshot_wait_s"`
	Idle          OpLatency `json:"at_n"`
	Snapshot      OpLatency `json:"during_snapshot"`
	SnapshotS     float64   `json:"snapshot_s"`
	LatenessP50MS float64   `json:"lateness_p50_ms"`
	LatenessP99MS float64   `json:"lateness_p99_ms"`
	LatenessMaxMS float64   `json:"lateness_max_ms"`
	LatenessJobs  int64     `json:"lateness_jobs"`
	// the same jobs' lateness from the activate_at the take answered
	// (Result.ActivationP99MS): without the put's own latency
	ActivationP50MS float64 `json:"activation_p50_ms"`
	ActivationP99MS float64 `json:"activation_p99_ms"`
	ActivationMaxMS float64 `json:"activation_max_ms"`
	Errors          int64   `json:"errors"`
}

// OpLatency is put, take and ack latency of single requests, in ms.
type OpLatency struct {
	Cycles  int64   `json:"cycles"`
	PutP50  float64 `json:"put_p50_ms"`
	PutP99  float64 `json:"put_p99_ms"`
	TakeP50 float64 `json:"take_p50_ms"`
	TakeP99 float64 `json:"take_p99_ms"`
	AckP50  float64 `json:"ack_p50_ms"`
	AckP99  float64 `json:"ack_p99_ms"`
}

func (c *ScaleConfig) defaults() error {
	if c.Conns <= 0 {
		c.Conns = 8
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Span <= 0 {
		c.Span = 365 * 24 * time.Hour
	}
	if c.Payload <= 0 {
		c.Payload = 100
	}
	if c.Probe <= 0 {
		c.Probe = 10 * time.Second
	}
	if c.ProbeConn <= 0 {
		c.ProbeConn = 8
	}
	if c.Lateness <= 0 {
		c.Lateness = 30 * time.Second
	}
	if c.Queue == "" {
		c.Queue = "scale-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	switch {
	case c.Jobs < 0:
		return fmt.Errorf("--jobs: must not be negative, got %d", c.Jobs)
	case c.Batch > 1000:
		return fmt.Errorf("--batch: the batch API takes at most 1000 jobs, got %d", c.Batch)
	case c.AdminAddr == "":
		return errors.New("--admin-addr: the scale scenario reads the server's metrics from its admin listener")
	}
	return nil
}

// RunScale fills the server and measures it at that size.
func RunScale(ctx context.Context, cfg ScaleConfig) (ScaleResult, error) {
	if err := cfg.defaults(); err != nil {
		return ScaleResult{}, err
	}
	var res ScaleResult
	hc := &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Conns + 4}}
	base := "http://" + cfg.Addr
	admin := "http://" + cfg.AdminAddr
	do := func(ctx context.Context, method, url string, body []byte) ([]byte, error) {
		return doHTTP(ctx, hc, cfg.Token, method, url, body)
	}

	// fill
	start := time.Now()
	var next, filled, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	batches := (cfg.Jobs + int64(cfg.Batch) - 1) / int64(cfg.Batch)
	stop := make(chan struct{})
	var pg sync.WaitGroup
	if cfg.Progress != nil {
		pg.Add(1)
		go func() {
			defer pg.Done()
			t := time.NewTicker(10 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					n := filled.Load()
					el := time.Since(start)
					fmt.Fprintf(cfg.Progress, "fill: %d of %d jobs in %s (%.0f jobs/s)\n", n, cfg.Jobs, el.Round(time.Second), float64(n)/el.Seconds())
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var body bytes.Buffer
			pay := strings.Repeat("x", cfg.Payload)
			url := base + "/v1/ns/default/queues/" + cfg.Queue + "/jobs/batch"
			for ctx.Err() == nil {
				b := next.Add(1) - 1
				if b >= batches {
					return
				}
				lo := b * int64(cfg.Batch)
				hi := min(lo+int64(cfg.Batch), cfg.Jobs)
				body.Reset()
				body.WriteString(`{"jobs":[`)
				for k := lo; k < hi; k++ {
					if k > lo {
						body.WriteByte(',')
					}
					// at least a minute out, so nothing of the fill
					// activates during the run
					d := time.Minute + time.Duration(rng.Int64N(int64(cfg.Span-time.Minute)))
					fmt.Fprintf(&body, `{"payload":%q,"delay":"%dms"`, pay, d.Milliseconds())
					if k%10 == 0 {
						fmt.Fprintf(&body, `,"key":"user:%d"`, k%50000)
					}
					if k%20 == 0 {
						fmt.Fprintf(&body, `,"tags":{"tenant":"%d"}`, k%100)
					}
					body.WriteByte('}')
				}
				body.WriteString(`]}`)
				if _, err := do(ctx, http.MethodPost, url, body.Bytes()); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				filled.Add(hi - lo)
			}
		}()
	}
	wg.Wait()
	close(stop)
	pg.Wait()
	if e := firstErr.Load(); e != nil {
		return res, fmt.Errorf("fill stopped after %d jobs: %w", filled.Load(), *e)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	el := time.Since(start)
	res.Jobs, res.FillS = filled.Load(), round3(el.Seconds())
	res.FillJobsPerSec = round3(float64(res.Jobs) / el.Seconds())
	progress(cfg.Progress, "filled %d jobs in %s", res.Jobs, el.Round(time.Millisecond))

	// memory after a collection (the heap profile endpoint runs one)
	if _, err := do(ctx, http.MethodGet, admin+"/debug/pprof/heap?gc=1", nil); err != nil {
		return res, fmt.Errorf("forcing a collection: %w", err)
	}
	m, err := do(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return res, fmt.Errorf("reading metrics: %w", err)
	}
	vals := promValues(m, "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes")
	res.RSSBytes, res.HeapInuse, res.HeapAlloc = int64(vals[0]), int64(vals[1]), int64(vals[2])
	if res.Jobs > 0 {
		n := float64(res.Jobs)
		res.RSSPerJob, res.HeapPerJob, res.LivePerJob = round3(vals[0]/n), round3(vals[1]/n), round3(vals[2]/n)
	}
	progress(cfg.Progress, "rss %d MiB, heap in use %d MiB", res.RSSBytes>>20, res.HeapInuse>>20)
	if bytes.Contains(m, []byte("\nchronoq_far_backlog_jobs ")) {
		if err := waitFarDrained(ctx, do, admin, &res, 30*time.Minute); err != nil {
			return res, err
		}
		progress(cfg.Progress, "far store: %d jobs out of memory after %.1fs; job table %d MiB %.1fs later; then rss %d MiB, heap in use %d MiB (%.1f bytes/job)",
			res.FarJobs, res.FarDrainS, res.JobTableBytes>>20, res.ShrinkS, res.DrainedRSSBytes>>20, res.DrainedHeapInuse>>20, res.DrainedHeapPerJob)
	}

	// put/take/ack at N, on a node that is not writing a snapshot: the
	// fill's log growth usually leaves one running, and that case is
	// measured on its own below
	waited, err := waitSnapshotQuiet(ctx, do, admin, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.SnapWaitS = round3(waited.Seconds())
	progress(cfg.Progress, "waited %.1fs for the fill's snapshot to end", res.SnapWaitS)
	pcfg := Config{Target: "chronoq-http", Addr: cfg.Addr, Token: cfg.Token, Payload: cfg.Payload}
	if res.Idle, err = probeOps(ctx, pcfg, cfg.ProbeConn, func() bool { return true }, cfg.Probe); err != nil {
		return res, fmt.Errorf("probe at N: %w", err)
	}
	progress(cfg.Progress, "at N: put p50 %.2f ms p99 %.2f ms", res.Idle.PutP50, res.Idle.PutP99)

	// the same while a snapshot is written: an online backup starts a
	// fresh one (and then copies the log, which the probe also sees)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snapDone := make(chan error, 1)
	t0 := time.Now()
	var snapEnd atomic.Int64
	go func() {
		req, err := http.NewRequestWithContext(bctx, http.MethodPost, admin+"/admin/backup", nil)
		if err == nil {
			if cfg.Token != "" {
				req.Header.Set("Authorization", "Bearer "+cfg.Token)
			}
			var resp *http.Response
			if resp, err = hc.Do(req); err == nil {
				// the headers come once the snapshot is complete
				snapEnd.Store(int64(time.Since(t0)))
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("backup: %s", resp.Status)
				}
			}
		}
		snapDone <- err
	}()
	res.Snapshot, err = probeOps(ctx, pcfg, cfg.ProbeConn, func() bool { return snapEnd.Load() == 0 }, 10*time.Minute)
	if err != nil {
		return res, fmt.Errorf("probe during a snapshot: %w", err)
	}
	res.SnapshotS = round3(time.Duration(snapEnd.Load()).Seconds())
	if err := <-snapDone; err != nil {
		return res, fmt.Errorf("backup (for a snapshot): %w", err)
	}
	progress(cfg.Progress, "snapshot %.1fs: put p50 %.2f ms p99 %.2f ms meanwhile", res.SnapshotS, res.Snapshot.PutP50, res.Snapshot.PutP99)

	// activation lateness at N
	lcfg := pcfg
	lcfg.Scenario, lcfg.Conns, lcfg.Duration = "delayed", 64, cfg.Lateness
	lcfg.DelayMin, lcfg.DelayMax, lcfg.NoServerCPU = time.Second, 3*time.Second, true
	lr, _, err := Run(ctx, lcfg)
	if err != nil {
		return res, fmt.Errorf("lateness: %w", err)
	}
	res.LatenessP50MS, res.LatenessP99MS, res.LatenessMaxMS, res.LatenessJobs = lr.P50MS, lr.P99MS, lr.MaxMS, lr.Jobs
	res.ActivationP50MS, res.ActivationP99MS, res.ActivationMaxMS = lr.ActivationP50MS, lr.ActivationP99MS, lr.ActivationMaxMS
	res.Errors = errs.Load() + lr.Errors
	return res, nil
}

// waitFarDrained polls the far-future store's backlog until every job due
// beyond the horizon has gone out to its bucket, then reads memory again.
func waitFarDrained(ctx context.Context, do func(context.Context, string, string, []byte) ([]byte, error), admin string, res *ScaleResult, limit time.Duration) error {
	start := time.Now()
	for {
		m, err := do(ctx, http.MethodGet, admin+"/metrics", nil)
		if err != nil {
			return fmt.Errorf("reading metrics: %w", err)
		}
		v := promValues(m, "chronoq_far_backlog_jobs", "chronoq_far_held_bytes", "chronoq_far_jobs")
		if v[0] == 0 && v[1] == 0 {
			res.FarDrainS, res.FarJobs = round3(time.Since(start).Seconds()), int64(v[2])
			break
		}
		if time.Since(start) > limit {
			return fmt.Errorf("the far-future store still had %.0f jobs to move out after %s", v[0], limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The job table shrinks once the backlog is out (docs/architecture.md,
	// "Memory per job"): memory is read once it is no longer due to, for a
	// second.
	settle := time.Now()
	for quiet := 0; quiet < 5; {
		m, err := do(ctx, http.MethodGet, admin+"/metrics", nil)
		if err != nil {
			return fmt.Errorf("reading metrics: %w", err)
		}
		if !bytes.Contains(m, []byte("\nchronoq_job_table_shrinking ")) {
			break
		}
		v := promValues(m, "chronoq_job_table_shrinking", "chronoq_job_table_bytes")
		res.JobTableBytes = int64(v[1])
		if v[0] == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if time.Since(settle) > limit {
			return fmt.Errorf("the job table was still shrinking after %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	res.ShrinkS = round3(time.Since(settle).Seconds())
	if _, err := do(ctx, http.MethodGet, admin+"/debug/pprof/heap?gc=1", nil); err != nil {
		return fmt.Errorf("forcing a collection: %w", err)
	}
	m, err := do(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return fmt.Errorf("reading metrics: %w", err)
	}
	v := promValues(m, "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes")
	res.DrainedRSSBytes, res.DrainedHeapInuse = int64(v[0]), int64(v[1])
	if res.Jobs > 0 {
		res.DrainedHeapPerJob = round3(v[1] / float64(res.Jobs))
	}
	return nil
}

// waitSnapshotQuiet polls the admin listener's chronoq_snapshot_running
// until it reads 0 and says how long that took; a server that does not
// export the gauge counts as quiet.
func waitSnapshotQuiet(ctx context.Context, do func(context.Context, string, string, []byte) ([]byte, error), admin string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		m, err := do(ctx, http.MethodGet, admin+"/metrics", nil)
		if err != nil {
			return 0, fmt.Errorf("reading metrics: %w", err)
		}
		if promValues(m, "chronoq_snapshot_running")[0] == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("a snapshot was still running after %s", limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// probeOps runs conns workers doing put, take, ack on a fresh queue, one
// request each, while more() holds and for at least a second, at most limit.
func probeOps(ctx context.Context, cfg Config, conns int, more func() bool, limit time.Duration) (OpLatency, error) {
	tgt, err := Open(ctx, cfg)
	if err != nil {
		return OpLatency{}, err
	}
	defer tgt.Close()
	defer func() { _ = tgt.Cleanup(context.Background()) }()
	type recs struct{ put, take, ack Recorder }
	all := make([]recs, conns)
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for i := range all {
		c, err := tgt.Connect(ctx)
		if err != nil {
			return OpLatency{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			r := &all[i]
			payload := bytes.Repeat([]byte("x"), max(cfg.Payload, 1))
			for ctx.Err() == nil && time.Since(start) < limit && (time.Since(start) < time.Second || more()) {
				t0 := time.Now()
				err := c.Put(ctx, payload, 0)
				t1 := time.Now()
				var j Job
				if err == nil {
					j, err = c.Take(ctx, 5*time.Second)
				}
				t2 := time.Now()
				if err == nil {
					err = c.Ack(ctx, j)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				r.put.Record(t1.Sub(t0))
				r.take.Record(t2.Sub(t1))
				r.ack.Record(time.Since(t2))
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return OpLatency{}, *e
	}
	var put, take, ack Recorder
	for i := range all {
		put.Merge(&all[i].put)
		take.Merge(&all[i].take)
		ack.Merge(&all[i].ack)
	}
	return OpLatency{
		Cycles: int64(put.Count()),
		PutP50: ms(put.Quantile(0.5)), PutP99: ms(put.Quantile(0.99)),
		TakeP50: ms(take.Quantile(0.5)), TakeP99: ms(take.Quantile(0.99)),
		AckP50: ms(ack.Quantile(0.5)), AckP99: ms(ack.Quantile(0.99)),
	}, nil
}

// promValues reads unlabelled samples from Prometheus text, in the order
// of names (0 when absent).
func promValues(text []byte, names ...string) []float64 {
	out := make([]float64, len(names))
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				out[i], _ = strconv.ParseFloat(strings.TrimSpace(val), 64)
			}
		}
	}
	return out
}

// WriteScaleTable prints the scale result for people.
func WriteScaleTable(w io.Writer, r ScaleResult) error {
	_, err := fmt.Fprintf(w, `jobs                 %d
fill                 %.1f s, %.0f jobs/s
rss                  %.1f MiB, %.1f bytes/job
heap in use (live)   %.1f MiB, %.1f (%.1f) bytes/job
at N                 put p50/p99 %.2f/%.2f ms, take %.2f/%.2f ms, ack %.2f/%.2f ms (%d cycles; after waiting %.1f s for a snapshot to end)
during a snapshot    put p50/p99 %.2f/%.2f ms, take %.2f/%.2f ms, ack %.2f/%.2f ms (%d cycles; snapshot %.1f s)
lateness             p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d jobs; from activate_at p50 %.2f ms, p99 %.2f ms, max %.2f ms)
errors               %d
`, r.Jobs, r.FillS, r.FillJobsPerSec, float64(r.RSSBytes)/(1<<20), r.RSSPerJob,
		float64(r.HeapInuse)/(1<<20), r.HeapPerJob, r.LivePerJob,
		r.Idle.PutP50, r.Idle.PutP99, r.Idle.TakeP50, r.Idle.TakeP99, r.Idle.AckP50, r.Idle.AckP99, r.Idle.Cycles, r.SnapWaitS,
		r.Snapshot.PutP50, r.Snapshot.PutP99, r.Snapshot.TakeP50, r.Snapshot.TakeP99, r.Snapshot.AckP50, r.Snapshot.AckP99, r.Snapshot.Cycles, r.SnapshotS,
		r.LatenessP50MS, r.LatenessP99MS, r.LatenessMaxMS, r.LatenessJobs, r.ActivationP50MS, r.ActivationP99MS, r.ActivationMaxMS, r.Errors)
	if err == nil && (r.FarDrainS > 0 || r.FarJobs > 0) {
		_, err = fmt.Fprintf(w, "far store           %d jobs out of memory %.1f s after the fill; job table %.1f MiB %.1f s later; then rss %.1f MiB, heap in use %.1f MiB, %.1f bytes/job\n",
			r.FarJobs, r.FarDrainS, float64(r.JobTableBytes)/(1<<20), r.ShrinkS, float64(r.DrainedRSSBytes)/(1<<20), float64(r.DrainedHeapInuse)/(1<<20), r.DrainedHeapPerJob)
	}
	return err
}

// writeScaleJSON writes the result as one JSON object.
func writeScaleJSON(w io.Writer, r ScaleResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
