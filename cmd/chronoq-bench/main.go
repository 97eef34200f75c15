// Command chronoq-bench load-tests chronoq and its peers (beanstalkd,
// Redis, NATS JetStream, RabbitMQ) with the same scenarios and draws the
// report's plots; bench/run.sh and bench/peers.sh drive it and
// docs/benchmarks.md shows its results. It is a separate binary so the
// peers' client libraries and gonum/plot never link into chronoq's server.
package main

import (
	"fmt"
	"os"

	"github.com/chronoq/chronoq/internal/bench"
	"github.com/chronoq/chronoq/internal/bench/peers"
	"github.com/chronoq/chronoq/internal/bench/report"
)

func main() {
	peers.Register()
	if err := bench.Main("chronoq-bench", os.Args[1:], report.Command); err != nil {
		fmt.Fprintln(os.Stderr, "chronoq-bench:", err)
		os.Exit(1)
	}
}
