package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/chronoq/chronoq/internal/bench"
)

// The speed goals (docs/benchmarks.md, "Against the speed goals") are
// judged at this many connections, the matrix's larger count.
const goalConns = 64

// The targets the goals name, as bench/run.sh labels them.
const (
	tHTTP      = "chronoq-http"
	tWS        = "chronoq-ws"
	tBeanstalk = "chronoq-beanstalk"
	tMemory    = "beanstalkd-nobinlog"
	tRedis     = "redis"
)

// verdict is one goal's outcome in one run.
type verdict struct {
	goal   string
	result string
	met    string // "**met**", "not met" or "n/a"
}

func metOrNot(ok bool) string {
	if ok {
		return "**met**"
	}
	return "not met"
}

// sameRun is the median over repetitions k of f(a's rep k) ÷ f(b's rep
// k): the two ran next to each other in the A/B/A/B order, so their ratio
// holds when the machine drifts between repetitions. ok is false when a
// cell is missing or had failed requests, or no repetition has both
// values.
func sameRun(m *matrix, sc string, n int, a, b string, f func(bench.Result) float64) (float64, bool) {
	ca, cb := m.find(sc, a, n), m.find(sc, b, n)
	if ca == nil || cb == nil || ca.errors() > 0 || cb.errors() > 0 {
		return 0, false
	}
	var rr []float64
	for k := 0; k < min(len(ca.runs), len(cb.runs)); k++ {
		if x, y := f(ca.runs[k]), f(cb.runs[k]); x > 0 && y > 0 {
			rr = append(rr, x/y)
		}
	}
	if len(rr) == 0 {
		return 0, false
	}
	return median(rr), true
}

// medianOf is the median of f at goalConns over the repetitions where
// f > 0; not ok for a cell with failed requests.
func medianOf(m *matrix, sc, t string, f func(bench.Result) float64) (float64, bool) {
	c := m.find(sc, t, goalConns)
	if c == nil || c.errors() > 0 {
		return 0, false
	}
	return positiveMedian(c, f)
}

func rate(r bench.Result) float64   { return r.JobsPerSec }
func cpuPer(r bench.Result) float64 { return r.ServerCPUUsPerOp }

// cpuGoal: a's server CPU per operation ≤ limit × b's.
func cpuGoal(m *matrix, goal, sc, a, b string, limit float64) verdict {
	ca, okA := medianOf(m, sc, a, cpuPer)
	cb, okB := medianOf(m, sc, b, cpuPer)
	r, ok := sameRun(m, sc, goalConns, a, b, cpuPer)
	if !okA || !okB || !ok {
		return verdict{goal, fmt.Sprintf("needs %s and %s with server CPU at %d conns", a, b, goalConns), "n/a"}
	}
	return verdict{goal, fmt.Sprintf("%.1f vs %.1f µs (%.2f×)", ca, cb, r), metOrNot(r <= limit)}
}

// rateGoal: a's throughput ≥ limit × b's, same run.
func rateGoal(m *matrix, goal, sc, a, b string, limit float64) verdict {
	r, ok := sameRun(m, sc, goalConns, a, b, rate)
	if !ok {
		return verdict{goal, fmt.Sprintf("needs %s and %s at %d conns", a, b, goalConns), "n/a"}
	}
	ra, _ := medianOf(m, sc, a, rate)
	rb, _ := medianOf(m, sc, b, rate)
	return verdict{goal, fmt.Sprintf("%.0f vs %.0f/s (%.2f×)", ra, rb, r), metOrNot(r >= limit)}
}

// speedGoals judges one run against the speed goals. Each is a same-run
// comparison at goalConns connections; a goal whose cells the run lacks
// is n/a, never met.
func speedGoals(rs []bench.Result) []verdict {
	m := group(rs)
	out := []verdict{
		cpuGoal(m, "durable put, beanstalkd protocol: server CPU per put ≤ in-memory beanstalkd's", "put", tBeanstalk, tMemory, 1),
		cpuGoal(m, "HTTP put: server CPU per put ≤ 2× in-memory beanstalkd's", "put", tHTTP, tMemory, 2),
		rateGoal(m, "put: beanstalkd protocol ≥ 1.0× in-memory beanstalkd", "put", tBeanstalk, tMemory, 1),
	}
	if r, ok := medianOf(m, "put", tHTTP, rate); ok {
		out = append(out, verdict{"put: HTTP ≥ 40 000/s", fmt.Sprintf("%.0f/s", r), metOrNot(r >= 40000)})
	} else {
		out = append(out, verdict{"put: HTTP ≥ 40 000/s", "needs " + tHTTP, "n/a"})
	}
	out = append(out,
		rateGoal(m, "put: HTTP ≥ Redis with appendfsync always", "put", tHTTP, tRedis, 1),
		rateGoal(m, "put: WebSocket ≥ beanstalkd protocol", "put", tWS, tBeanstalk, 1),
		bestLifecycle(m),
		rateGoal(m, "lifecycle: HTTP ≥ 1.5× Redis (lmstfy's layout)", "lifecycle", tHTTP, tRedis, 1.5),
		lateness(m),
	)
	return out
}

// bestLifecycle: chronoq's best protocol on the lifecycle ≥ in-memory
// beanstalkd; "best" is the protocol with the highest same-run ratio.
func bestLifecycle(m *matrix) verdict {
	const goal = "lifecycle: chronoq's best protocol ≥ in-memory beanstalkd"
	best, bestR := "", 0.0
	for _, t := range []string{tHTTP, tWS, tBeanstalk} {
		if r, ok := sameRun(m, "lifecycle", goalConns, t, tMemory, rate); ok && r > bestR {
			best, bestR = t, r
		}
	}
	if best == "" {
		return verdict{goal, fmt.Sprintf("needs a chronoq target and %s at %d conns", tMemory, goalConns), "n/a"}
	}
	v := rateGoal(m, goal, "lifecycle", best, tMemory, 1)
	v.result = best + ": " + v.result
	return v
}

// lateness: activation lateness p99 ≤ 5 ms for every chronoq target that
// reports it (from the server's activate_at; bench.Result.ActivationP99MS).
func lateness(m *matrix) verdict {
	const goal = "activation lateness p99 ≤ 5 ms (from activate_at)"
	var parts []string
	worst := math.Inf(-1)
	for _, t := range m.targetsOf("delayed") {
		if p99, ok := medianOf(m, "delayed", t, func(r bench.Result) float64 { return r.ActivationP99MS }); ok {
			parts = append(parts, fmt.Sprintf("%s %.2f ms", t, p99))
			worst = math.Max(worst, p99)
		}
	}
	if len(parts) == 0 {
		return verdict{goal, fmt.Sprintf("needs a delayed run at %d conns that reports activate_at", goalConns), "n/a"}
	}
	// in-memory beanstalkd does not say when it made a job due: its
	// lateness counts from the put's start, which also holds the put's
	// latency, so it is an upper bound; it shows how the machine did
	result := strings.Join(parts, ", ")
	if p99, ok := medianOf(m, "delayed", tMemory, func(r bench.Result) float64 { return r.P99MS }); ok {
		result += fmt.Sprintf(" (%s, from the put's start: %.2f ms)", tMemory, p99)
	}
	return verdict{goal, result, metOrNot(worst <= 5)}
}

// writeGoals writes the verdicts as a markdown table.
func writeGoals(w io.Writer, vs []verdict) {
	fmt.Fprintf(w, "| goal (%d connections, same run) | this run | met? |\n|---|---|---|\n", goalConns)
	for _, v := range vs {
		fmt.Fprintf(w, "| %s | %s | %s |\n", v.goal, v.result, v.met)
	}
}
