package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/chronoq/chronoq/internal/bench"
)

const benchUsage = `Usage:
  chronoq bench --target T [--addr HOST:PORT] --scenario S [flags]
  chronoq bench plot RESULTS.json OUTDIR [--base TARGET]

Drives a queue server with --conns connections (one worker each) for
--duration and prints a summary table (with --json: exactly one JSON
object) of throughput and latency percentiles. On a terminal a live
progress line is shown on stderr.

Scenarios:
  put        durable puts as fast as possible; latency is one put
  lifecycle  put -> take -> ack per iteration; latency is the cycle
  delayed    put with a random delay from --delay-range, take it when
             due, ack; the percentiles are lateness (handed out - due)
  fanout     one publisher, --conns subscribers of a channel (chronoq-ws
             only); jobs are deliveries, latency is publish -> delivery

"plot" draws PNGs (throughput by target and connection count, latency
CDFs, lateness) from a results file (a JSON array of --json objects, with
distributions from RESULTS.cdf.jsonl when present) and prints a markdown
table of medians and same-run ratios against --base.

Targets:
`

func benchCmd(args []string) error {
	if len(args) > 0 && args[0] == "plot" {
		return benchPlot(args[1:])
	}
	var (
		cfg        bench.Config
		delayRange string
		jsonOut    bool
		cdfPath    string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Target, "target", "chronoq-http", "chronoq-http, chronoq-ws, chronoq-beanstalk, beanstalkd, redis, rabbitmq or nats")
	fs.StringVar(&cfg.Addr, "addr", "", "server address host:port (default: the target's usual port on 127.0.0.1)")
	fs.StringVar(&cfg.Scenario, "scenario", "put", "put, lifecycle, delayed or fanout")
	fs.IntVar(&cfg.Conns, "conns", 64, "concurrent connections, one worker each")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long workers start new iterations")
	fs.IntVar(&cfg.Payload, "payload", 100, "payload size in bytes")
	fs.StringVar(&delayRange, "delay-range", "1s..10s", "delayed: range of the random delays, MIN..MAX")
	fs.BoolVar(&jsonOut, "json", false, "print exactly one JSON object instead of the table")
	fs.StringVar(&cfg.Label, "label", "", "name reported as the target (e.g. beanstalkd-nobinlog)")
	fs.StringVar(&cfg.Token, "token", os.Getenv("CHRONOQ_TOKEN"), "chronoq namespace token, when the server requires one (env CHRONOQ_TOKEN)")
	fs.StringVar(&cdfPath, "cdf", "", "append the run's latency distribution to this .cdf.jsonl file (for plot)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		for _, t := range bench.Targets() {
			fmt.Fprintln(fs.Output(), "  "+t)
		}
		fmt.Fprint(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.DelayMin, cfg.DelayMax, err = bench.ParseDelayRange(delayRange); err != nil {
		return err
	}
	if isTerminal(os.Stderr) {
		cfg.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, rec, err := bench.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, bench.ErrUnsupported) {
			return fmt.Errorf("bench: n/a: %w", err)
		}
		return fmt.Errorf("bench: %w", err)
	}
	if cdfPath != "" {
		if err := bench.AppendCDF(cdfPath, res, rec); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return writeBenchResult(os.Stdout, res, jsonOut)
}

func writeBenchResult(w io.Writer, res bench.Result, jsonOut bool) error {
	if jsonOut {
		return bench.WriteJSON(w, res)
	}
	return bench.WriteTable(w, res)
}

func benchPlot(args []string) error {
	fs := flag.NewFlagSet("bench plot", flag.ContinueOnError)
	base := fs.String("base", "chronoq-http", "target the ratio column compares with")
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchUsage); fs.PrintDefaults() }
	// flags may come before or after the two paths
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 2 {
		return errors.New("bench plot: want RESULTS.json OUTDIR")
	}
	files, err := bench.Plot(pos[0], pos[1])
	for _, f := range files {
		fmt.Fprintln(os.Stderr, "wrote", f)
	}
	if err != nil {
		return fmt.Errorf("bench plot: %w", err)
	}
	rs, err := bench.LoadResults(pos[0])
	if err != nil {
		return err
	}
	bench.WriteMarkdown(os.Stdout, rs, *base)
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
