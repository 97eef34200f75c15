package bench

import (
	"math"
	"slices"
	"time"
)

// Recorder keeps every latency sample of a run, exactly: a run of a few
// seconds holds at most a few million samples (8 bytes each), and exact
// samples make the percentiles and the CDF plots trustworthy. A Recorder is
// not safe for concurrent use: give each worker its own and Merge them.
type Recorder struct {
	samples []time.Duration
	sorted  bool
}

// Record adds one sample. Negative samples are kept (a job handed out a
// hair before its due time has a negative lateness).
func (r *Recorder) Record(d time.Duration) {
	r.samples = append(r.samples, d)
	r.sorted = false
}

// Merge adds every sample of o.
func (r *Recorder) Merge(o *Recorder) {
	if o == nil || len(o.samples) == 0 {
		return
	}
	r.samples = append(r.samples, o.samples...)
	r.sorted = false
}

// Count is the number of samples.
func (r *Recorder) Count() int { return len(r.samples) }

func (r *Recorder) sort() {
	if !r.sorted {
		slices.Sort(r.samples)
		r.sorted = true
	}
}

// Quantile answers the nearest-rank q-quantile (0 < q ≤ 1): the smallest
// sample such that at least q of all samples are ≤ it. Quantile(1) is the
// maximum; q ≤ 0 answers the minimum. Zero without samples.
func (r *Recorder) Quantile(q float64) time.Duration {
	n := len(r.samples)
	if n == 0 {
		return 0
	}
	r.sort()
	if q <= 0 {
		return r.samples[0]
	}
	// the small epsilon keeps 0.9*100 = 90.00000000000001 at rank 90
	rank := int(math.Ceil(q*float64(n) - 1e-9))
	return r.samples[min(max(rank, 1), n)-1]
}

// Summary is what the output reports of a distribution.
type Summary struct {
	Count              int
	P50, P90, P99, Max time.Duration
}

// Summary computes p50, p90, p99 and max.
func (r *Recorder) Summary() Summary {
	return Summary{Count: r.Count(), P50: r.Quantile(0.50), P90: r.Quantile(0.90), P99: r.Quantile(0.99), Max: r.Quantile(1)}
}

// CDFPoint is one point of an empirical distribution: a fraction Q of the
// samples were ≤ MS milliseconds.
type CDFPoint struct {
	Q  float64 `json:"q"`
	MS float64 `json:"ms"`
}

// cdfQuantiles are the fractions a CDF is sampled at: every percent, then
// finer in the tail where queues differ.
var cdfQuantiles = func() []float64 {
	qs := []float64{0.001}
	for i := 1; i <= 99; i++ {
		qs = append(qs, float64(i)/100)
	}
	return append(qs, 0.995, 0.999, 0.9995, 0.9999, 1)
}()

// CDF samples the distribution at fixed fractions (nil without samples).
func (r *Recorder) CDF() []CDFPoint {
	if r.Count() == 0 {
		return nil
	}
	out := make([]CDFPoint, 0, len(cdfQuantiles))
	for _, q := range cdfQuantiles {
		out = append(out, CDFPoint{Q: q, MS: ms(r.Quantile(q))})
	}
	return out
}

// ms converts to milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
