package report

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/chronoq/chronoq/internal/bench"
)

// run is one synthetic result: rates and CPU per op are chosen so every
// goal's verdict is known.
func run(sc, target string, rate, cpu, p99 float64) bench.Result {
	return bench.Result{Scenario: sc, Target: target, Conns: 64, JobsPerSec: rate, ServerCPUUsPerOp: cpu, P99MS: p99}
}

// matrixRuns is three repetitions of the cells the goals read. In the
// second repetition every rate is doubled, so a ratio taken across
// repetitions (instead of within one) would show.
func matrixRuns(cpu bool) []bench.Result {
	var rs []bench.Result
	for rep := range 3 {
		k := 1.0
		if rep == 1 {
			k = 2
		}
		c := func(v float64) float64 {
			if cpu {
				return v
			}
			return 0
		}
		rs = append(rs,
			run("put", tHTTP, k*30000, c(40), 5),
			run("put", tWS, k*45000, c(22), 3),
			run("put", tBeanstalk, k*40000, c(20), 3),
			run("put", tMemory, k*80000, c(10), 2),
			run("put", tRedis, k*50000, c(15), 3),
			run("lifecycle", tHTTP, k*12000, c(90), 12),
			run("lifecycle", tBeanstalk, k*14000, c(60), 8),
			run("lifecycle", tMemory, k*28000, c(28), 6),
			run("lifecycle", tRedis, k*7000, c(50), 8),
		)
		d := run("delayed", tHTTP, 40, c(1500), 4)
		d.ActivationSamples, d.ActivationP99MS = 1000, 2.5+float64(rep)
		rs = append(rs, d, run("delayed", tMemory, 40, c(60), 3))
	}
	return rs
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeCPUProfile writes a CPU profile of 5 s: 3 s in syscall.Syscall6
// called by a connection's goroutine (net/http's: a package path without
// a dot), 1 s in engine.(*Engine).Put inlined into the loop's goroutine,
// 1 s in an assembly routine of the runtime's.
func writeCPUProfile(t *testing.T, path string) {
	t.Helper()
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	sys, serve := fn(1, "syscall.Syscall6"), fn(2, "net/http.(*conn).serve")
	put, loop := fn(3, "github.com/chronoq/chronoq/internal/engine.(*Engine).Put"), fn(4, "github.com/chronoq/chronoq/internal/broker.(*loop).run")
	exit, sched := fn(5, "runtime.goexit"), fn(6, "gosave_systemstack_switch")
	loc := func(id uint64, fs ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fs {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lSys, lServe, lPut, lExit, lSched := loc(1, sys), loc(2, serve), loc(3, put, loop), loc(4, exit), loc(5, sched)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000, DurationNanos: 4e9,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lSys, lServe, lExit}, Value: []int64{300, 3e9}},
			{Location: []*profile.Location{lPut, lExit}, Value: []int64{100, 1e9}},
			{Location: []*profile.Location{lSched}, Value: []int64{100, 1e9}},
		},
		Location: []*profile.Location{lSys, lServe, lPut, lExit, lSched},
		Function: []*profile.Function{sys, serve, put, loop, exit, sched},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}

func TestReportRewritesOnlyItsSection(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results", "2026-11-27-1700.json")
	before := filepath.Join(dir, "results", "2026-11-22-0616.json")
	if err := os.MkdirAll(filepath.Dir(results), 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, results, matrixRuns(true))
	old := matrixRuns(false)
	for i := range old {
		old[i].JobsPerSec /= 2
		// the build before lacked ack-and-take-next: its HTTP lifecycle failed
		if old[i].Scenario == "lifecycle" && old[i].Target == tHTTP {
			old[i].Errors = 5
		}
	}
	writeJSON(t, before, old)
	stem := strings.TrimSuffix(results, ".json")
	load := "2026-11-27T17:00:05Z load 0.40 0.30 0.20 start\n2026-11-27T17:11:40Z load 3.60 2.00 1.00 end\n"
	if err := os.WriteFile(stem+".load.txt", []byte(load), 0o644); err != nil {
		t.Fatal(err)
	}
	writeCPUProfile(t, stem+".chronoq-beanstalk.put-64.pprof")

	docPath := filepath.Join(dir, "docs", "benchmarks.md")
	if err := os.MkdirAll(filepath.Dir(docPath), 0o755); err != nil {
		t.Fatal(err)
	}
	head, tail := "# Benchmarks\n\nWritten by hand.\n\n", "\n\n## History\n\nAlso by hand.\n"
	doc := head + beginMarker + "\nstale\n" + endMarker + tail
	if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	plots := filepath.Join(dir, "docs", "benchmarks")
	if err := Report(io.Discard, results, docPath, plots, before, "abc1234"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	if !strings.HasPrefix(text, head+beginMarker+"\n") || !strings.HasSuffix(text, endMarker+tail) || strings.Contains(text, "stale") {
		t.Fatalf("the hand-written parts moved or the old section stayed:\n%s", text)
	}
	for _, want := range []string{
		"`bench/run.sh` on `abc1234`, 2026-11-27 17:00–17:11 UTC, load average (1 min) 0.4–3.6",
		"in-memory beanstalkd's puts at 64 connections: 80000/s, 10.0 µs of server CPU each.",
		// CPU 20 against 10 µs in every repetition
		"| durable put, beanstalkd protocol: server CPU per put ≤ in-memory beanstalkd's | 20.0 vs 10.0 µs (2.00×) | not met |",
		"| HTTP put: server CPU per put ≤ 2× in-memory beanstalkd's | 40.0 vs 10.0 µs (4.00×) | not met |",
		// medians: 40 000/s (reps 40k, 80k, 40k); same-run ratio 0.50
		"| put: beanstalkd protocol ≥ 1.0× in-memory beanstalkd | 40000 vs 80000/s (0.50×) | not met |",
		"| put: HTTP ≥ 40 000/s | 30000/s | not met |",
		"| put: WebSocket ≥ beanstalkd protocol | 45000 vs 40000/s (1.12×) | **met** |",
		"| lifecycle: chronoq's best protocol ≥ in-memory beanstalkd | chronoq-beanstalk: 14000 vs 28000/s (0.50×) | not met |",
		"| lifecycle: HTTP ≥ 1.5× Redis (lmstfy's layout) | 12000 vs 7000/s (1.71×) | **met** |",
		"| activation lateness p99 ≤ 5 ms (from activate_at) | chronoq-http 3.50 ms (beanstalkd-nobinlog, from the put's start: 3.00 ms) | **met** |",
		// before: half the rate, no CPU figures
		"| put | 64 | chronoq-beanstalk | 20000 → 40000 | 2.00× | 0.50 → 0.50 | n/a → 20.0 | — | 3.00 → 3.00 |",
		"Left out, with failed requests: lifecycle at 64 conns, chronoq-http (errors before 15, after 0).",
		"#### chronoq-beanstalk, put, 64 connections\n\n5.0 s of CPU in 4.0 s.\n",
		"| `net/http.(*conn).serve` | 60.0 % |",
		"| `github.com/chronoq/chronoq/internal/broker.(*loop).run` | 20.0 % |",
		"| (the runtime's own: scheduler, GC workers, sysmon) | 20.0 % |",
		"| `syscall` (system calls: the kernel's time) | 60.0 % |",
		"| `github.com/chronoq/chronoq/internal/engine` | 20.0 % |",
		"| `github.com/chronoq/chronoq/internal/engine.(*Engine).Put` | 20.0 % |",
		"| `gosave_systemstack_switch` | 20.0 % |",
		"![throughput-put](benchmarks/throughput-put.png)",
		"![lateness](benchmarks/lateness.png)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
	for _, png := range []string{"throughput-put.png", "latency-cdf-lifecycle.png", "lateness.png"} {
		if _, err := os.Stat(filepath.Join(plots, png)); err != nil {
			t.Error(err)
		}
	}

	// a second report of the same run leaves the document as it was
	if err := Report(io.Discard, results, docPath, plots, before, "abc1234"); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != text {
		t.Fatal("a second report changed the document")
	}
}

func TestReportRefusesADocumentWithoutMarkers(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "r.json")
	writeJSON(t, results, matrixRuns(true))
	docPath := filepath.Join(dir, "b.md")
	const doc = "# Benchmarks\n\nno markers here\n"
	if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Report(io.Discard, results, docPath, filepath.Join(dir, "img"), "", "")
	if err == nil || !strings.Contains(err.Error(), "lacks the marker lines") {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(docPath); string(got) != doc {
		t.Fatal("the document changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "img")); err == nil {
		t.Fatal("plots drawn for a document it would not rewrite")
	}
}

func TestReportRefusesABadBeforeAndDrawsNothing(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "r.json")
	writeJSON(t, results, matrixRuns(true))
	docPath := filepath.Join(dir, "b.md")
	doc := "# Benchmarks\n\n" + beginMarker + "\n" + endMarker + "\n"
	if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Report(io.Discard, results, docPath, filepath.Join(dir, "img"), filepath.Join(dir, "missing.json"), "")
	if err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("err = %v", err)
	}
	if got, _ := os.ReadFile(docPath); string(got) != doc {
		t.Fatal("the document changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "img")); err == nil {
		t.Fatal("plots drawn for a report that was refused")
	}
}

func TestGoalsWithoutTheirCellsAreNotApplicable(t *testing.T) {
	vs := speedGoals([]bench.Result{run("put", tHTTP, 50000, 30, 3)})
	for _, v := range vs {
		want := "n/a"
		if v.goal == "put: HTTP ≥ 40 000/s" {
			want = "**met**"
		}
		if v.met != want {
			t.Errorf("%s: %s (%s), want %s", v.goal, v.met, v.result, want)
		}
	}
}

func TestSplice(t *testing.T) {
	sec := []byte(beginMarker + "\nnew\n" + endMarker + "\n")
	for _, tc := range []struct{ doc, want, err string }{
		{"a\n" + beginMarker + "\nold\n" + endMarker + "\nb\n", "a\n" + beginMarker + "\nnew\n" + endMarker + "\nb\n", ""},
		{"a\n" + endMarker + "\n" + beginMarker + "\n", "", "before"},
		{beginMarker + endMarker + beginMarker + endMarker, "", "more than one"},
		{"a\n" + beginMarker + "\n", "", "lacks"},
	} {
		got, err := Splice([]byte(tc.doc), sec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.doc, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%q: got %q, %v", tc.doc, got, err)
		}
	}
}

// TestBenchmarksPageIsItsRun rewrites the generated section of the
// repository's docs/benchmarks.md from the committed results it names and
// wants what is there: the page holds no hand edits between its markers,
// and what it says follows from files in the repository.
func TestBenchmarksPageIsItsRun(t *testing.T) {
	t.Chdir("../../..") // the repository's root, where bench/run.sh runs it
	doc, err := os.ReadFile("docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	b, e := bytes.Index(doc, []byte(beginMarker)), bytes.Index(doc, []byte(endMarker))
	if b < 0 || e < b {
		t.Fatal("docs/benchmarks.md has no report section")
	}
	written := string(doc[b : e+len(endMarker)])
	find := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(written)
		if m == nil {
			t.Fatalf("the section has nothing like %s", re)
		}
		return m[1]
	}
	cfg := SectionConfig{
		Results: find(`runs \(`+"`"+`(bench/results/[^`+"`"+`]+)\.\*`+"`"+`\)`) + ".json",
		Before:  find("Before is `([^`]+)`"),
		Commit:  find("`bench/run.sh` on `([^`]+)`"),
	}
	for _, m := range regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`).FindAllStringSubmatch(written, -1) {
		cfg.Plots = append(cfg.Plots, m[1])
	}
	var sec strings.Builder
	if err := WriteSection(&sec, cfg); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(sec.String(), "\n"); got != written {
		t.Errorf("docs/benchmarks.md's report section is not what %s gives; rewrite it with\n"+
			"  go run ./cmd/chronoq-bench report %s --doc docs/benchmarks.md --plots docs/benchmarks --before %s --commit %s",
			cfg.Results, cfg.Results, cfg.Before, cfg.Commit)
	}
}
