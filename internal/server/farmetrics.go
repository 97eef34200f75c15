package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronoq/chronoq/internal/broker"
)

// farCollector exports the far-future store's size at scrape time
// (docs/operations.md, "Monitor"): how many jobs and buckets are out of
// memory, what their filters cost, and the backlog still to go out, which
// an operator watches after a large fill or a restart.
type farCollector struct{ b *broker.Broker }

var (
	descFarJobs    = prometheus.NewDesc("chronoq_far_jobs", "Delayed jobs in the far-future store's bucket files (out of memory).", nil, nil)
	descFarBuckets = prometheus.NewDesc("chronoq_far_buckets", "Far-future bucket files not yet taken back in.", nil, nil)
	descFarFilters = prometheus.NewDesc("chronoq_far_filter_bytes", "Memory held by the far-future buckets' filters.", nil, nil)
	descFarBacklog = prometheus.NewDesc("chronoq_far_backlog_jobs", "Jobs in memory due beyond --far-horizon, still to be moved to buckets.", nil, nil)
	descFarHeld    = prometheus.NewDesc("chronoq_far_held_bytes", "Far-future bucket items handed out and not yet written to their files.", nil, nil)
)

func (c farCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFarJobs, descFarBuckets, descFarFilters, descFarBacklog, descFarHeld} {
		ch <- d
	}
}

func (c farCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.b.FarStats(ctx)
	if err != nil {
		return
	}
	for d, v := range map[*prometheus.Desc]int{descFarJobs: s.Jobs, descFarBuckets: s.Buckets, descFarFilters: s.FilterBytes,
		descFarBacklog: s.Backlog, descFarHeld: s.HeldBytes} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
}
