package server

import (
	"log/slog"
	"runtime"
)

// minProcs is the fewest Ps (GOMAXPROCS) the server runs with. The
// syncer's fdatasync is a blocking system call, and the runtime hands its
// P to another thread only once sysmon notices the call has lasted (20 µs
// to 10 ms later, depending on how busy sysmon has found the process).
// With a single P, then, nothing else runs during a sync: no connection
// reads its next request, the loop's next turn finds one request, and
// group commit falls to one record per fdatasync. On one CPU (taskset -c
// 0, which makes GOMAXPROCS 1, as a CPU limit of 1 in a container does)
// 1 000 + 1 000 beanstalkd-protocol connections did 2 400 jobs/s at 1.02
// records per sync with one P and 23 800 at 168 with two; 8 connections'
// puts 13 900/s against 20 900; one connection the same (docs/benchmarks.md,
// "One P stalls group commit").
const minProcs = 2

// raiseProcs raises GOMAXPROCS to minProcs when the runtime chose fewer,
// and says so in the log. An operator's own GOMAXPROCS (the environment
// variable) is left alone, with a warning if it is below minProcs.
func raiseProcs(lg *slog.Logger, getenv func(string) string) {
	if v := getenv("GOMAXPROCS"); v != "" {
		if runtime.GOMAXPROCS(0) < minProcs {
			lg.Warn("GOMAXPROCS is below 2: every disk sync stops the server, and under load each fdatasync covers about one request; unset it or set 2 or more", "GOMAXPROCS", v)
		}
		return
	}
	if n := runtime.GOMAXPROCS(0); n < minProcs {
		runtime.GOMAXPROCS(minProcs)
		lg.Info("raised GOMAXPROCS so that a disk sync does not stop every other goroutine; set GOMAXPROCS to choose", "from", n, "to", minProcs)
	}
}
