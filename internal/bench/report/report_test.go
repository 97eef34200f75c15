package report_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/bench/report"
	"github.com/chronoq/chronoq/internal/server"
	"github.com/chronoq/chronoq/internal/server/servertest"
)

// startChronoq runs the real server on a loopback port until the test
// ends and answers its HTTP base URL.
func startChronoq(t *testing.T) string {
	t.Helper()
	cfg := servertest.Config(t)
	cfg.AdminAddr, cfg.BeanstalkAddr = "", ""
	s := servertest.Start(t, cfg, 10*time.Second)
	return "http://" + s.Addr(server.HTTP)
}

// TestPlot draws the report from a small results file and its CDFs.
func TestPlot(t *testing.T) {
	url := startChronoq(t)
	dir := t.TempDir()
	results := filepath.Join(dir, "r.json")
	var objs []string
	for _, sc := range []string{"put", "delayed"} {
		for _, label := range []string{"chronoq-http", "other"} {
			for _, n := range []int{1, 2} {
				res, rec, err := bench.Run(context.Background(), bench.Config{Target: "chronoq-http", Label: label, Addr: url,
					Scenario: sc, Conns: n, Duration: 100 * time.Millisecond, Payload: 10,
					DelayMin: 10 * time.Millisecond, DelayMax: 30 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				if err := bench.WriteJSON(&b, res); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, strings.TrimSpace(b.String()))
				if err := bench.AppendCDF(report.CDFPath(results), res, rec); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := os.WriteFile(results, []byte("["+strings.Join(objs, ",\n")+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := report.Plot(results, filepath.Join(dir, "img"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"throughput-put.png", "latency-cdf-put.png", "lateness.png"}
	if len(files) != len(want) {
		t.Fatalf("wrote %v", files)
	}
	for i, f := range files {
		if filepath.Base(f) != want[i] {
			t.Fatalf("file %d is %s, want %s", i, f, want[i])
		}
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 1000 || string(b[1:4]) != "PNG" {
			t.Fatalf("%s: not a PNG (%d bytes, %v)", f, len(b), err)
		}
	}
	rs, err := report.LoadResults(results)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	report.WriteMarkdown(&md, rs, "chronoq-http")
	// the table, then the delayed runs' lateness from activate_at (every
	// run here is chronoq's HTTP API, which answers it)
	table, act, ok := strings.Cut(md.String(), "\n\n")
	rows := strings.Count(table, "\n") - 1
	if !ok || rows != 8 || !strings.Contains(table, "| put | 2 | other | 1 |") || !strings.Contains(table, "×") ||
		!strings.Contains(table, "| server cpu µs/op |") {
		t.Fatalf("markdown table with %d rows:\n%s", rows, md.String())
	}
	if rows := strings.Count(act, "\n") - 2; rows != 4 || !strings.Contains(act, "| other | 2 | 1 |") ||
		!strings.Contains(act, "| delayed: lateness from activate_at |") {
		t.Fatalf("activation table with %d rows:\n%s", rows, act)
	}
}
