package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronoq/chronoq/internal/broker"
)

// tableCollector exports the memory of the job table at scrape time
// (docs/operations.md, "Monitor"): it grows with the most jobs held at
// once and shrinks again, in the background, once at least half of it has
// been free for a while (docs/architecture.md, "Memory per job").
type tableCollector struct{ b *broker.Broker }

var (
	descTableBytes     = prometheus.NewDesc("chronoq_job_table_bytes", "Memory of the job table's fixed-size records (in-memory jobs and free slots).", nil, nil)
	descTableShrinking = prometheus.NewDesc("chronoq_job_table_shrinking", "1 while the job table is shrinking or due to (at least half of it free).", nil, nil)
)

func (c tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTableBytes
	ch <- descTableShrinking
}

func (c tableCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t, err := c.b.JobTable(ctx)
	if err != nil {
		return
	}
	shrinking := 0.0
	if t.Shrinking {
		shrinking = 1
	}
	ch <- prometheus.MustNewConstMetric(descTableBytes, prometheus.GaugeValue, float64(t.Bytes))
	ch <- prometheus.MustNewConstMetric(descTableShrinking, prometheus.GaugeValue, shrinking)
}
