package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

const cliUsage = `Usage:
  %[1]s --target T [--addr HOST:PORT] --scenario S [flags]
%[2]s
Drives a queue server with --conns connections (one worker each) for
--duration and prints a summary table (with --json: exactly one JSON
object) of throughput, latency percentiles and the server process's CPU
time per operation (server_cpu_us_per_op, from /proc/<pid>/stat). On a terminal a live
progress line is shown on stderr. It runs with GOGC=400 (fewer pauses of
its own in the latencies) unless GOGC is set.

Scenarios:
  put        durable puts as fast as possible; latency is one put
  lifecycle  put -> take -> ack per iteration; latency is the cycle.
             chronoq-http acks and takes the next job in one request
             (two requests per cycle; --three-requests: three)
  delayed    put with a random delay from --delay-range, take it when
             due, ack; the percentiles are lateness (handed out - due,
             due being the put's start plus the delay, so the put's own
             latency is in it); chronoq-http and chronoq-ws also report
             it from the activate_at the take answers (activation_*)
  fanout     one publisher, --conns subscribers of a channel (chronoq-ws,
             centrifugo with --token its API key); jobs are deliveries,
             latency is publish -> delivery
  mixed      --conns producers put while --conns other connections take
             and ack the same queue; jobs are consumed jobs, latency is a
             consume request (put latency reported apart); producers
             wait while --backlog jobs are put and not yet taken; with
             --base-conns B it first runs B+B and prints the ratios
  scale      fill the server through the batch API with --jobs jobs
             (delays over a year, a tenth keyed, a twentieth tagged), then
             measure RSS and heap per job (--admin-addr), put/take/ack
             latency at that size and while a snapshot is written, and
             activation lateness (chronoq-http; bench/scale.sh adds
             restart time and disk use)
%[3]s
Targets:
`

const reportUsage = `
"plot" draws PNGs (throughput by target and connection count, latency
CDFs, lateness) from a results file (a JSON array of --json objects, with
distributions from RESULTS.cdf.jsonl when present) and prints a markdown
table of medians and same-run ratios against --base. "report" draws them
into --plots and rewrites --doc's generated section (between its marker
lines): the speed goals judged on the run, its medians, before and after
against --before, summaries of the CPU profiles bench/run.sh took
(RESULTS-stem.LABEL.SCENARIO-CONNS.pprof), the plots.
`

// loadGenGCPercent is the load generator's GOGC unless the environment
// sets one. Its own collections stop its goroutines and hold back the
// answers they wait for, which the latencies then count: at HTTP
// 1000 + 1000 the goroutines its collector readied waited p90 47 ms, and
// with GOGC=400 the measured p99/p50 fell from 2.08 to 1.87 (median of
// five alternating runs; docs/benchmarks.md, "where the HTTP tail is
// spent"). The price is a larger heap in the load generator only.
const loadGenGCPercent = 400

// Main is the bench command line; prog names it in the usage text.
// report, when set, runs "prog plot ARGS" and "prog report ARGS" (it is
// given the subcommand's name and its arguments); without it the command
// has neither.
func Main(prog string, args []string, report func(args []string) error) error {
	reportLines, reportText := "", ""
	if report != nil {
		reportLines = "  " + prog + " plot RESULTS.json OUTDIR [--base TARGET]\n" +
			"  " + prog + " report RESULTS.json --doc FILE --plots DIR [--before BEFORE.json] [--commit SHA]\n"
		reportText = reportUsage
		if len(args) > 0 && (args[0] == "plot" || args[0] == "report") {
			return report(args)
		}
	}
	var (
		cfg        Config
		scale      ScaleConfig
		baseConns  int
		delayRange string
		jsonOut    bool
		cdfPath    string
		cpuProfile string
		tracePath  string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Target, "target", "chronoq-http", "a target listed above")
	fs.StringVar(&cfg.Addr, "addr", "", "server address host:port (default: the target's usual port on 127.0.0.1)")
	fs.StringVar(&cfg.Scenario, "scenario", "put", "put, lifecycle, delayed, fanout, mixed or scale")
	fs.IntVar(&cfg.Conns, "conns", 64, "concurrent connections, one worker each")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long workers start new iterations")
	fs.IntVar(&cfg.Payload, "payload", 100, "payload size in bytes")
	fs.StringVar(&delayRange, "delay-range", "1s..10s", "delayed: range of the random delays, MIN..MAX")
	fs.BoolVar(&jsonOut, "json", false, "print exactly one JSON object instead of the table")
	fs.StringVar(&cfg.Label, "label", "", "name reported as the target (e.g. beanstalkd-nobinlog)")
	fs.StringVar(&cfg.Token, "token", os.Getenv("CHRONOQ_TOKEN"), "chronoq namespace token, when the server requires one (env CHRONOQ_TOKEN)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "the server's process id, whose CPU time per operation is reported (default: the process listening on --addr's port, when on this host)")
	fs.IntVar(&cfg.Pipeline, "pipeline", 0, "put: each connection sends this many puts before reading their answers (chronoq-ws, chronoq-beanstalk, beanstalkd)")
	fs.BoolVar(&cfg.ThreeRequests, "three-requests", false, "lifecycle: put, take and ack in three requests even where the target acks and takes the next job in one (chronoq-http)")
	fs.BoolVar(&cfg.NoServerCPU, "no-server-cpu", false, "do not measure the server's CPU time")
	fs.StringVar(&cdfPath, "cdf", "", "append the run's latency distribution to this .cdf.jsonl file (for plot)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file (is the client or the server the limit?)")
	fs.StringVar(&tracePath, "trace", "", "write the load generator's own runtime execution trace to this file (how long its goroutines wait for a CPU: go tool trace -pprof=sched)")
	fs.IntVar(&baseConns, "base-conns", 0, "mixed: first run with this many producers and consumers, then --conns, and compare")
	fs.IntVar(&cfg.Backlog, "backlog", 0, "mixed: producers wait while this many jobs are put and not yet taken (0: 2 x --conns; negative: unpaced, put as fast as possible)")
	fs.Int64Var(&scale.Jobs, "jobs", 100_000_000, "scale: jobs to fill")
	fs.IntVar(&scale.Conns, "fill-conns", 8, "scale: connections sending batches while filling")
	fs.StringVar(&scale.AdminAddr, "admin-addr", "127.0.0.1:7778", "scale: the server's admin listener (metrics, pprof, backup)")
	fs.DurationVar(&scale.Probe, "probe", 10*time.Second, "scale: how long each latency probe runs")
	fs.DurationVar(&scale.Lateness, "lateness", 30*time.Second, "scale: how long the activation-lateness probe runs (64 connections, delays 1–3 s: ~30 samples a second)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), cliUsage, prog, reportLines, reportText)
		for _, t := range Targets() {
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
	if cfg.DelayMin, cfg.DelayMax, err = ParseDelayRange(delayRange); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(loadGenGCPercent)
	}
	if isTerminal(os.Stderr) {
		cfg.Progress = os.Stderr
	}
	endProfile, err := capture(cpuProfile, "--cpuprofile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return err
	}
	defer endProfile()
	endTrace, err := capture(tracePath, "--trace", trace.Start, trace.Stop)
	if err != nil {
		return err
	}
	defer endTrace()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.Scenario == "scale" {
		scale.Addr, scale.Token, scale.Payload, scale.Progress = cfg.Addr, cfg.Token, cfg.Payload, os.Stderr
		if scale.Addr == "" {
			scale.Addr = "127.0.0.1:7777"
		}
		res, err := RunScale(ctx, scale)
		if err != nil {
			return fmt.Errorf("bench: scale: %w", err)
		}
		if jsonOut {
			return writeScaleJSON(os.Stdout, res)
		}
		return WriteScaleTable(os.Stdout, res)
	}
	if cfg.Scenario == "mixed" && baseConns > 0 {
		small, large, err := MixedComparison(ctx, cfg, baseConns)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		for _, r := range []Result{small, large} {
			if jsonOut {
				err = WriteJSON(os.Stdout, r)
			} else {
				err = WriteTable(os.Stdout, r)
			}
			if err != nil {
				return err
			}
		}
		if jsonOut {
			return nil
		}
		return WriteMixedRatios(os.Stdout, small, large)
	}
	res, rec, err := Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return fmt.Errorf("bench: n/a: %w", err)
		}
		return fmt.Errorf("bench: %w", err)
	}
	if cdfPath != "" {
		if err := AppendCDF(cdfPath, res, rec); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if jsonOut {
		return WriteJSON(os.Stdout, res)
	}
	return WriteTable(os.Stdout, res)
}

// capture starts one of the load generator's own recordings (a CPU
// profile, an execution trace) into the file at path, when path is set,
// and answers what ends it.
func capture(path, flag string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: %s: %w", flag, err)
	}
	return func() {
		stop()
		f.Close()
	}, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
