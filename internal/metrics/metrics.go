// Package metrics exposes chronoq's Prometheus metrics. Per-queue job
// counts and counters are read from the engine at scrape time (a collector),
// so the hot path pays nothing for them; latencies are histograms fed by
// the broker and the APIs.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chronoq/chronoq/internal/engine"
)

// Other is the label value that stands for every queue beyond the cap.
const Other = "_other"

// Metrics holds the registry and the collectors fed by the server.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	fsync       prometheus.Histogram
	batch       prometheus.Histogram
	walBytes    prometheus.Counter
	snapshot    prometheus.Histogram
	snapRunning prometheus.Gauge
	jobWait     *prometheus.HistogramVec
	lateness    prometheus.Histogram
	pubs        prometheus.Counter
	damage      *prometheus.CounterVec
	realtime    atomic.Pointer[func() Realtime]

	// reqObs caches requests' labelled children by protocol, route and
	// status: WithLabelValues hashes the three values and formats the code
	// on every request, a cost on every API call's path. The key space is
	// bounded by the routes and the status codes the servers answer.
	reqObs sync.Map // reqKey → prometheus.Observer

	guard labelGuard
}

type reqKey struct {
	protocol, op string
	code         int
}

// QueueSource returns every queue's info at scrape time.
type QueueSource func(ctx context.Context) ([]engine.QueueInfo, error)

// New registers every metric. maxQueues caps the distinct queue label
// values (beyond it, queues are counted under namespace/queue "_other"), so
// a tenant creating a million queues cannot blow up a scrape.
func New(maxQueues int, queues QueueSource) *Metrics {
	latency := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100µs .. ~13s
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chronoq_request_duration_seconds", Help: "API request latency by protocol, operation and status code.", Buckets: latency,
		}, []string{"protocol", "op", "code"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "chronoq_connections", Help: "Open client connections by protocol.",
		}, []string{"protocol"}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chronoq_wal_fsync_seconds", Help: "Duration of one log commit (write + fdatasync).", Buckets: latency,
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chronoq_wal_batch_records", Help: "Log entries made durable by one commit (group commit size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		walBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chronoq_wal_bytes_total", Help: "Bytes appended to the log.",
		}),
		snapshot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chronoq_snapshot_seconds", Help: "Time to write one snapshot.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		snapRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chronoq_snapshot_running", Help: "1 while a snapshot is being written, else 0.",
		}),
		jobWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "chronoq_job_wait_seconds", Help: "Time from a job's activation to its first delivery (produce→consume latency).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 22),
		}, []string{"namespace", "queue"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "chronoq_job_lateness_seconds", Help: "Time from a job's activation to its hand-out to a worker that was already waiting (timer precision).",
			Buckets: latency,
		}),
		pubs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chronoq_channel_publications_total", Help: "Publications to real-time channels.",
		}),
		damage: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chronoq_storage_damage_total", Help: "Damaged stored data: reads refused because a checksum failed (read_refused), jobs dead-lettered because their payload or result was damaged (job_dead_lettered), damaged ranges found by the check of the log segments before the snapshot after a start (scrub_damaged_range).",
		}, []string{"event"}),
		guard: labelGuard{max: maxQueues, seen: map[string]bool{}},
	}
	m.reg.MustRegister(m.requests, m.connections, m.fsync, m.batch, m.walBytes, m.snapshot, m.snapRunning,
		m.jobWait, m.lateness, m.pubs, m.damage, realtimeCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&queueCollector{m: m, source: queues})
	m.connections.WithLabelValues("http") // present from the first scrape
	return m
}

// Register adds a collector of another component (the cluster's, in
// internal/server/cluster.go) to the registry.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request records one API request.
func (m *Metrics) Request(protocol, op string, code int, d time.Duration) {
	k := reqKey{protocol, op, code}
	o, ok := m.reqObs.Load(k)
	if !ok {
		o, _ = m.reqObs.LoadOrStore(k, m.requests.WithLabelValues(protocol, op, strconv.Itoa(code)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// Connections returns the gauge of a protocol's open connections.
func (m *Metrics) Connections(protocol string) prometheus.Gauge {
	return m.connections.WithLabelValues(protocol)
}

// Commit records one durable log commit.
func (m *Metrics) Commit(entries, bytes int, d time.Duration) {
	m.fsync.Observe(d.Seconds())
	m.batch.Observe(float64(entries))
	m.walBytes.Add(float64(bytes))
}

// Snapshot records one finished snapshot.
func (m *Metrics) Snapshot(d time.Duration) { m.snapshot.Observe(d.Seconds()) }

// SnapshotRunning sets chronoq_snapshot_running.
func (m *Metrics) SnapshotRunning(on bool) {
	if on {
		m.snapRunning.Set(1)
	} else {
		m.snapRunning.Set(0)
	}
}

// FirstTake records a job's produce→consume latency.
func (m *Metrics) FirstTake(ns, queue string, waited time.Duration) {
	ns, queue = m.guard.labels(ns, queue)
	m.jobWait.WithLabelValues(ns, queue).Observe(max(waited, 0).Seconds())
}

// Lateness records how late a job reached a worker that was waiting.
func (m *Metrics) Lateness(d time.Duration) { m.lateness.Observe(max(d, 0).Seconds()) }

// Damage counts damaged stored data (event: read_refused, job_dead_lettered,
// scrub_damaged_range).
func (m *Metrics) Damage(event string, n int) { m.damage.WithLabelValues(event).Add(float64(n)) }

// Publication counts one channel publication.
func (m *Metrics) Publication() { m.pubs.Inc() }

// Realtime is what the channels and the WebSocket/SSE server hold,
// read at scrape time.
type Realtime struct {
	Channels, Subscriptions, HistoryPublications int
	Connections                                  int64
	SlowDisconnects, Refused                     int64 // counters
	// PanicsWS, PanicsSSE and PanicsBeanstalk count connections closed
	// after a panic in one of their goroutines (the process lives on).
	PanicsWS, PanicsSSE, PanicsBeanstalk int64
}

// SetRealtime installs the source of the real-time gauges.
func (m *Metrics) SetRealtime(fn func() Realtime) { m.realtime.Store(&fn) }

var (
	descChannels = prometheus.NewDesc("chronoq_channels", "Live real-time channels.", nil, nil)
	descSubs     = prometheus.NewDesc("chronoq_channel_subscribers", "Channel subscriptions (a connection subscribed to 3 channels counts 3).", nil, nil)
	descHistory  = prometheus.NewDesc("chronoq_channel_history_publications", "Publications held in channel histories.", nil, nil)
	descRTConns  = prometheus.NewDesc("chronoq_realtime_connections", "Open WebSocket and SSE connections.", nil, nil)
	descSlow     = prometheus.NewDesc("chronoq_realtime_slow_disconnects_total", "Connections closed because their outgoing queue was full (slow consumers).", nil, nil)
	descRefused  = prometheus.NewDesc("chronoq_realtime_refused_total", "WebSocket/SSE connections refused by the connection cap or the connect rate limit.", nil, nil)
	descPanics   = prometheus.NewDesc("chronoq_connection_panics_total", "Connections closed because one of their goroutines panicked (recovered; the server lives on).", []string{"protocol"}, nil)
)

// realtimeCollector reads the real-time numbers when scraped: they live
// in the hub and the connection table, so copying them into gauges on
// every change would only add work to hot paths.
type realtimeCollector struct{ m *Metrics }

func (c realtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descChannels, descSubs, descHistory, descRTConns, descSlow, descRefused, descPanics} {
		ch <- d
	}
}

func (c realtimeCollector) Collect(ch chan<- prometheus.Metric) {
	var r Realtime
	if fn := c.m.realtime.Load(); fn != nil {
		r = (*fn)()
	}
	ch <- prometheus.MustNewConstMetric(descChannels, prometheus.GaugeValue, float64(r.Channels))
	ch <- prometheus.MustNewConstMetric(descSubs, prometheus.GaugeValue, float64(r.Subscriptions))
	ch <- prometheus.MustNewConstMetric(descHistory, prometheus.GaugeValue, float64(r.HistoryPublications))
	ch <- prometheus.MustNewConstMetric(descRTConns, prometheus.GaugeValue, float64(r.Connections))
	ch <- prometheus.MustNewConstMetric(descSlow, prometheus.CounterValue, float64(r.SlowDisconnects))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(r.Refused))
	ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(r.PanicsWS), "ws")
	ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(r.PanicsSSE), "sse")
	ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(r.PanicsBeanstalk), "beanstalk")
}

// labelGuard admits the first max distinct queues as label values.
type labelGuard struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func (g *labelGuard) labels(ns, queue string) (string, string) {
	k := ns + "\x00" + queue
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[k] {
		return ns, queue
	}
	if len(g.seen) >= g.max {
		return Other, Other
	}
	g.seen[k] = true
	return ns, queue
}

// queueCollector reads queue counts and counters at scrape time.
type queueCollector struct {
	m      *Metrics
	source QueueSource
}

var (
	descJobs = prometheus.NewDesc("chronoq_queue_jobs", "Jobs in a queue by state.", []string{"namespace", "queue", "state"}, nil)
	descCtr  = map[string]*prometheus.Desc{}
)

func counterDesc(name, help string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, []string{"namespace", "queue"}, nil)
	descCtr[name] = d
	return d
}

var (
	descPut       = counterDesc("chronoq_jobs_put_total", "Jobs put.")
	descTaken     = counterDesc("chronoq_jobs_taken_total", "Jobs handed to workers (every delivery).")
	descAcked     = counterDesc("chronoq_jobs_acked_total", "Jobs acknowledged.")
	descNacked    = counterDesc("chronoq_jobs_nacked_total", "Jobs given back by workers.")
	descDead      = counterDesc("chronoq_jobs_dead_total", "Jobs that went dead (tries used up or buried).")
	descExpired   = counterDesc("chronoq_jobs_expired_total", "Jobs removed by their TTL.")
	descCancelled = counterDesc("chronoq_jobs_cancelled_total", "Jobs cancelled one by one.")
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobs
	for _, d := range descCtr {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs, err := c.source(ctx)
	if err != nil {
		return
	}
	type agg struct {
		counts engine.Counts
		stats  engine.QueueStats
	}
	byLabel := map[[2]string]*agg{}
	var order [][2]string
	for _, q := range qs {
		ns, name := c.m.guard.labels(q.Namespace, q.Name)
		k := [2]string{ns, name}
		a := byLabel[k]
		if a == nil {
			a = &agg{}
			byLabel[k] = a
			order = append(order, k)
		}
		a.counts.Delayed += q.Counts.Delayed
		a.counts.Ready += q.Counts.Ready
		a.counts.Blocked += q.Counts.Blocked
		a.counts.Reserved += q.Counts.Reserved
		a.counts.Dead += q.Counts.Dead
		a.counts.Completed += q.Counts.Completed
		s := &a.stats
		s.Put += q.Stats.Put
		s.Taken += q.Stats.Taken
		s.Acked += q.Stats.Acked
		s.Nacked += q.Stats.Nacked
		s.Dead += q.Stats.Dead
		s.Expired += q.Stats.Expired
		s.Cancelled += q.Stats.Cancelled
	}
	for _, k := range order {
		a := byLabel[k]
		for state, v := range map[string]uint64{
			"delayed": a.counts.Delayed, "ready": a.counts.Ready, "blocked": a.counts.Blocked,
			"reserved": a.counts.Reserved, "dead": a.counts.Dead, "completed": a.counts.Completed,
		} {
			ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(v), k[0], k[1], state)
		}
		for d, v := range map[*prometheus.Desc]uint64{
			descPut: a.stats.Put, descTaken: a.stats.Taken, descAcked: a.stats.Acked, descNacked: a.stats.Nacked,
			descDead: a.stats.Dead, descExpired: a.stats.Expired, descCancelled: a.stats.Cancelled,
		} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), k[0], k[1])
		}
	}
}
