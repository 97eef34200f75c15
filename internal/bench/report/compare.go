package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/chronoq/chronoq/internal/bench"
)

// writeBeforeAfter writes, for every cell both runs have, the medians
// before and after: throughput, server CPU per operation and p99, and
// the throughput as a share of in-memory beanstalkd's in the same run.
// The runs were made at different times on a shared machine, so the
// absolute columns move with the machine; the share does less, because
// both of its terms moved together. A cell with errors on either side
// (a request the build before did not have, say) is left out and named
// below the table.
func writeBeforeAfter(w io.Writer, before, after []bench.Result) {
	mb, ma := group(before), group(after)
	var left []string
	fmt.Fprintln(w, "| scenario | conns | target | jobs/s before → after | × | ÷ in-memory beanstalkd, same run: before → after | server cpu µs/op before → after | × | p99 ms before → after |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, sc := range ma.scenarios {
		for _, n := range ma.conns(sc) {
			for _, t := range ma.targetsOf(sc) {
				a, b := ma.find(sc, t, n), mb.find(sc, t, n)
				if a == nil || b == nil {
					continue
				}
				if eb, ea := b.errors(), a.errors(); eb > 0 || ea > 0 {
					left = append(left, fmt.Sprintf("%s at %d conns, %s (errors before %d, after %d)", sc, n, t, eb, ea))
					continue
				}
				var throughput, share, ratio string
				if sc == "delayed" {
					// the delays set a delayed run's rate
					throughput, share, ratio = "—", "—", "—"
				} else {
					rb, ra := b.median(rate), a.median(rate)
					throughput = fmt.Sprintf("%.0f → %.0f", rb, ra)
					ratio = times(ra, rb)
					share = fmt.Sprintf("%s → %s", shareOf(mb, sc, t, n), shareOf(ma, sc, t, n))
				}
				cb, cOK := positiveMedian(b, cpuPer)
				ca, aOK := positiveMedian(a, cpuPer)
				cpu, cpuRatio := "n/a", "—"
				switch {
				case cOK && aOK:
					cpu, cpuRatio = fmt.Sprintf("%.1f → %.1f", cb, ca), times(ca, cb)
				case aOK:
					cpu = fmt.Sprintf("n/a → %.1f", ca)
				}
				p99 := func(r bench.Result) float64 { return r.P99MS }
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %.2f → %.2f |\n",
					sc, n, t, throughput, ratio, share, cpu, cpuRatio, b.median(p99), a.median(p99))
			}
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "\nLeft out, with failed requests: %s.\n", strings.Join(left, "; "))
	}
}

// shareOf is t's throughput over in-memory beanstalkd's in one run, the
// median of the per-repetition ratios, or "n/a".
func shareOf(m *matrix, sc, t string, n int) string {
	r, ok := sameRun(m, sc, n, t, tMemory, rate)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", r)
}

// positiveMedian is the median of f over the runs where it is > 0 (a
// server CPU figure is absent where it could not be read).
func positiveMedian(c *cell, f func(bench.Result) float64) (float64, bool) {
	var v []float64
	for _, r := range c.runs {
		if x := f(r); x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

func times(after, before float64) string {
	if before <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", after/before)
}
