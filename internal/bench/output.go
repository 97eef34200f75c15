package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
)

// WriteJSON writes the result as exactly one JSON object and a newline.
func WriteJSON(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the human summary: one header line and one row.
func WriteTable(w io.Writer, r Result) error {
	what := "latency"
	if r.Scenario == "delayed" {
		what = "lateness" // handed out − due
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tscenario\tconns\tpayload\tduration\tjobs\tjobs/s\t%s p50\tp90\tp99\tmax\terrors\tserver cpu/op\t\n", what)
	cpu := "n/a"
	if r.ServerCPUUsPerOp > 0 {
		cpu = strconv.FormatFloat(r.ServerCPUUsPerOp, 'f', 1, 64) + "µs"
	}
	fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1fs\t%d\t%.0f\t%s\t%s\t%s\t%s\t%d\t%s\t\n",
		r.Target, r.Scenario, r.Conns, r.Payload, r.DurationS, r.Jobs, r.JobsPerSec,
		fmtMS(r.P50MS), fmtMS(r.P90MS), fmtMS(r.P99MS), fmtMS(r.MaxMS), r.Errors, cpu)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Scenario == "mixed" {
		if _, err := fmt.Fprintf(w, "puts %d (%.0f/s), put p50 %s p99 %s\n", r.Puts, r.PutsPerSec, fmtMS(r.PutP50MS), fmtMS(r.PutP99MS)); err != nil {
			return err
		}
	}
	if r.ActivationSamples > 0 {
		if _, err := fmt.Fprintf(w, "lateness from the server's activation time (%d samples): p50 %s p99 %s max %s\n",
			r.ActivationSamples, fmtMS(r.ActivationP50MS), fmtMS(r.ActivationP99MS), fmtMS(r.ActivationMaxMS)); err != nil {
			return err
		}
	}
	if r.ServerCPUError != "" {
		_, err := fmt.Fprintf(w, "server cpu n/a: %s\n", r.ServerCPUError)
		return err
	}
	return nil
}

func fmtMS(v float64) string {
	switch {
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
	}
}

// CDFRecord is one run's latency distribution, a line of a .cdf.jsonl file
// next to a results file, which the plots use for the CDFs.
type CDFRecord struct {
	Target   string     `json:"target"`
	Scenario string     `json:"scenario"`
	Conns    int        `json:"conns"`
	Points   []CDFPoint `json:"points"`
}

// AppendCDF appends the run's distribution to path as one JSON line.
func AppendCDF(path string, r Result, rec *Recorder) error {
	b, err := json.Marshal(CDFRecord{Target: r.Target, Scenario: r.Scenario, Conns: r.Conns, Points: rec.CDF()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
