// Package report turns bench results into the benchmark report: PNG
// plots (gonum/plot) and a markdown table of medians. Only
// cmd/chronoq-bench links it, keeping the plotting libraries out of the
// server binary.
package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/chronoq/chronoq/internal/bench"
)

// LoadResults reads a results file: a JSON array of bench.Result objects.
func LoadResults(path string) ([]bench.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []bench.Result
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w (want a JSON array of bench results)", path, err)
	}
	return rs, nil
}

// CDFPath is where the distributions of a results file's runs live.
func CDFPath(results string) string {
	return strings.TrimSuffix(results, ".json") + ".cdf.jsonl"
}

// LoadCDFs reads a .cdf.jsonl file; a missing file is no error (the plots
// then draw CDFs through the results' p50/p90/p99/max only).
func LoadCDFs(path string) ([]bench.CDFRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []bench.CDFRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var r bench.CDFRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// cell is every repetition of one (scenario, target, conns).
type cell struct {
	scenario, target string
	conns            int
	runs             []bench.Result
}

// errors is how many requests failed over the cell's repetitions: a cell
// with errors measured something other than the scenario.
func (c *cell) errors() int64 {
	var n int64
	for _, r := range c.runs {
		n += r.Errors
	}
	return n
}

func (c *cell) median(f func(bench.Result) float64) float64 {
	v := make([]float64, len(c.runs))
	for i, r := range c.runs {
		v[i] = f(r)
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// matrix groups results in order of first appearance.
type matrix struct {
	cells     []*cell
	targets   []string // in order of first appearance
	scenarios []string
}

func group(rs []bench.Result) *matrix {
	m := &matrix{}
	for _, r := range rs {
		c := m.find(r.Scenario, r.Target, r.Conns)
		if c == nil {
			c = &cell{scenario: r.Scenario, target: r.Target, conns: r.Conns}
			m.cells = append(m.cells, c)
		}
		c.runs = append(c.runs, r)
		if !slices.Contains(m.targets, r.Target) {
			m.targets = append(m.targets, r.Target)
		}
		if !slices.Contains(m.scenarios, r.Scenario) {
			m.scenarios = append(m.scenarios, r.Scenario)
		}
	}
	return m
}

func (m *matrix) find(scenario, target string, conns int) *cell {
	for _, c := range m.cells {
		if c.scenario == scenario && c.target == target && c.conns == conns {
			return c
		}
	}
	return nil
}

func (m *matrix) conns(scenario string) []int {
	var out []int
	for _, c := range m.cells {
		if c.scenario == scenario && !slices.Contains(out, c.conns) {
			out = append(out, c.conns)
		}
	}
	slices.Sort(out)
	return out
}

func (m *matrix) targetsOf(scenario string) []string {
	var out []string
	for _, t := range m.targets {
		for _, c := range m.cells {
			if c.scenario == scenario && c.target == t && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// WriteMarkdown writes a table of medians per (scenario, conns, target),
// and for each peer the ratio of base's throughput to the peer's: the
// median over repetitions of rep k of base ÷ rep k of the peer, which were
// measured next to each other in the A/B/A/B order.
func WriteMarkdown(w io.Writer, rs []bench.Result, base string) {
	m := group(rs)
	fmt.Fprintf(w, "| scenario | conns | target | reps | jobs/s | p50 ms | p90 ms | p99 ms | max ms | errors | server cpu µs/op | %s ÷ target |\n", base)
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, sc := range m.scenarios {
		for _, n := range m.conns(sc) {
			b := m.find(sc, base, n)
			for _, t := range m.targetsOf(sc) {
				c := m.find(sc, t, n)
				if c == nil {
					continue
				}
				ratio := "—"
				if r, ok := sameRun(m, sc, n, base, t, rate); ok && b != nil && t != base {
					ratio = fmt.Sprintf("%.2f×", r)
				}
				errs := c.errors()
				cpu := "n/a" // a server not on this host, or unreadable
				var cpus []float64
				for _, r := range c.runs {
					if r.ServerCPUUsPerOp > 0 {
						cpus = append(cpus, r.ServerCPUUsPerOp)
					}
				}
				if len(cpus) > 0 {
					cpu = fmt.Sprintf("%.1f", median(cpus))
				}
				fmt.Fprintf(w, "| %s | %d | %s | %d | %.0f | %.2f | %.2f | %.2f | %.1f | %d | %s | %s |\n",
					sc, n, t, len(c.runs), c.median(func(r bench.Result) float64 { return r.JobsPerSec }),
					c.median(func(r bench.Result) float64 { return r.P50MS }), c.median(func(r bench.Result) float64 { return r.P90MS }),
					c.median(func(r bench.Result) float64 { return r.P99MS }), c.median(func(r bench.Result) float64 { return r.MaxMS }),
					errs, cpu, ratio)
			}
		}
	}
	writeActivation(w, m)
}

// writeActivation adds, below the table, the delayed scenario's lateness
// from the server's activation time for the targets that tell it
// (bench.Result.ActivationSamples): the table's lateness counts from the
// put's start, so it also holds the put's own latency.
func writeActivation(w io.Writer, m *matrix) {
	header := false
	for _, n := range m.conns("delayed") {
		for _, t := range m.targetsOf("delayed") {
			c := m.find("delayed", t, n)
			if c == nil || c.median(func(r bench.Result) float64 { return float64(r.ActivationSamples) }) == 0 {
				continue
			}
			if !header {
				fmt.Fprintln(w, "\n| delayed: lateness from activate_at | conns | reps | p50 ms | p99 ms | max ms |")
				fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
				header = true
			}
			fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | %.1f |\n", t, n, len(c.runs),
				c.median(func(r bench.Result) float64 { return r.ActivationP50MS }),
				c.median(func(r bench.Result) float64 { return r.ActivationP99MS }),
				c.median(func(r bench.Result) float64 { return r.ActivationMaxMS }))
		}
	}
}

// Plot draws the report's PNGs into outDir from a results file (and its
// .cdf.jsonl, when present): throughput-<scenario>.png (median jobs/s by
// target and connection count; not for delayed, whose rate the delays
// set), latency-cdf-<scenario>.png (at the
// largest connection count) and lateness.png (the delayed scenario's
// lateness distribution). It answers the files written.
func Plot(resultsPath, outDir string) ([]string, error) {
	rs, err := LoadResults(resultsPath)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no results", resultsPath)
	}
	cdfs, err := LoadCDFs(CDFPath(resultsPath))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	m := group(rs)
	var files []string
	save := func(p *plot.Plot, name string, w, h vg.Length) error {
		path := filepath.Join(outDir, name)
		if err := p.Save(w, h, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, path)
		return nil
	}
	for _, sc := range m.scenarios {
		// the delayed scenario's rate is set by its delays, not the target
		if sc != "delayed" {
			p, err := throughputPlot(m, sc)
			if err != nil {
				return files, err
			}
			if err := save(p, "throughput-"+sc+".png", 11*vg.Inch, 4.5*vg.Inch); err != nil {
				return files, err
			}
		}
		cs := m.conns(sc)
		n := cs[len(cs)-1]
		p, err := cdfPlot(m, cdfs, sc, n)
		if err != nil {
			return files, err
		}
		name := "latency-cdf-" + sc + ".png"
		if sc == "delayed" {
			name = "lateness.png"
		}
		if err := save(p, name, 8*vg.Inch, 4.5*vg.Inch); err != nil {
			return files, err
		}
	}
	return files, nil
}

func throughputPlot(m *matrix, sc string) (*plot.Plot, error) {
	p := plot.New()
	unit := "jobs/s"
	if sc == "fanout" {
		unit = "deliveries/s"
	}
	p.Title.Text = fmt.Sprintf("%s: throughput (median of repetitions)", sc)
	p.Y.Label.Text = unit
	p.X.Label.Text = "target"
	p.Y.Min = 0
	p.Y.Tick.Marker = kTicks{}
	ts := m.targetsOf(sc)
	cs := m.conns(sc)
	// one slot per target on the x axis (about 10 inches of the 11-inch
	// image); a slot's bars fill 80% of it, so groups never touch
	slot := 10 * 72 / float64(len(ts))
	width := vg.Points(math.Min(60, 0.8*slot/float64(len(cs))))
	top := 0.0
	for i, n := range cs {
		vals := make(plotter.Values, len(ts))
		for j, t := range ts {
			if c := m.find(sc, t, n); c != nil {
				vals[j] = c.median(func(r bench.Result) float64 { return r.JobsPerSec })
				top = math.Max(top, vals[j])
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = 0
		bars.Color = seriesColor(i)
		bars.Offset = width * vg.Length(float64(i)-float64(len(cs)-1)/2)
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("%d conns", n), bars)
	}
	p.Y.Max = top * 1.2 // room for the legend above the bars
	p.X.Min, p.X.Max = -0.5, float64(len(ts))-0.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Add(plotter.NewGrid())
	p.NominalX(ts...)
	return p, nil
}

// kTicks are the default ticks labelled without decimals, thousands as k.
type kTicks struct{}

func (kTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label == "" {
			continue
		}
		v := ticks[i].Value
		switch {
		case v == 0:
			ticks[i].Label = "0"
		case math.Abs(v) >= 1000:
			ticks[i].Label = strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
		default:
			ticks[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ticks
}

// cdfPlot draws one line per target: the median over repetitions of each
// quantile; without recorded distributions, the results' percentiles.
func cdfPlot(m *matrix, cdfs []bench.CDFRecord, sc string, conns int) (*plot.Plot, error) {
	p := plot.New()
	lateness := sc == "delayed"
	if lateness {
		p.Title.Text = fmt.Sprintf("delayed: lateness CDF (handed out − due), %d conns", conns)
		p.X.Label.Text = fmt.Sprintf("lateness, ms (log; ≤ %g ms drawn at %g)", minLogMS, minLogMS)
	} else {
		p.Title.Text = fmt.Sprintf("%s: latency CDF, %d conns", sc, conns)
		p.X.Label.Text = "latency, ms (log)"
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Label.Text = "fraction of jobs ≤ x"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	for i, t := range m.targetsOf(sc) {
		c := m.find(sc, t, conns)
		if c == nil {
			continue
		}
		pts := medianCDF(cdfs, sc, t, conns)
		if pts == nil {
			for _, q := range []struct {
				q float64
				f func(bench.Result) float64
			}{{0.5, func(r bench.Result) float64 { return r.P50MS }}, {0.9, func(r bench.Result) float64 { return r.P90MS }},
				{0.99, func(r bench.Result) float64 { return r.P99MS }}, {1, func(r bench.Result) float64 { return r.MaxMS }}} {
				pts = append(pts, bench.CDFPoint{Q: q.q, MS: c.median(q.f)})
			}
		}
		xys := make(plotter.XYs, 0, len(pts))
		for _, pt := range pts {
			x := math.Max(pt.MS, minLogMS) // the log axis needs x > 0
			xys = append(xys, plotter.XY{X: x, Y: pt.Q})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = seriesColor(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(t, l)
	}
	if lateness {
		// the target: lateness p99 ≤ 5 ms
		l, err := plotter.NewLine(plotter.XYs{{X: 5, Y: 0}, {X: 5, Y: 1}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 100}
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add("target p99 5 ms", l)
	}
	// the curves start low on the left and reach 1 on the right: the
	// upper left corner stays free for the legend
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	return p, nil
}

// palette is Tableau 10: ten colours that stay apart (plotutil's seven
// would give the matrix's eighth target the first one's colour).
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff}, {0x76, 0xb7, 0xb2, 0xff},
	{0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff},
	{0x9c, 0x75, 0x5f, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

func seriesColor(i int) color.Color { return palette[i%len(palette)] }

// minLogMS is where the CDFs' log axis starts: smaller values (and a
// lateness ≤ 0, a job handed out on the dot) are drawn there.
const minLogMS = 0.01

// medianCDF merges the repetitions' distributions: at each recorded
// fraction, the median of the repetitions' values.
func medianCDF(cdfs []bench.CDFRecord, sc, target string, conns int) []bench.CDFPoint {
	var reps [][]bench.CDFPoint
	for _, r := range cdfs {
		if r.Scenario == sc && r.Target == target && r.Conns == conns && len(r.Points) > 0 {
			reps = append(reps, r.Points)
		}
	}
	if len(reps) == 0 {
		return nil
	}
	out := make([]bench.CDFPoint, 0, len(reps[0]))
	for i, pt := range reps[0] {
		var v []float64
		for _, r := range reps {
			if i < len(r) && r[i].Q == pt.Q {
				v = append(v, r[i].MS)
			}
		}
		out = append(out, bench.CDFPoint{Q: pt.Q, MS: median(v)})
	}
	return out
}
