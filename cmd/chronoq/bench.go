package main

import (
	"errors"

	"github.com/chronoq/chronoq/internal/bench"
)

// benchCmd load-tests chronoq's own listeners. The peer targets and the
// plots live in cmd/chronoq-bench, so their client and plotting libraries
// stay out of this binary.
func benchCmd(args []string) error {
	if len(args) > 0 && args[0] == "plot" {
		return errors.New("bench plot: moved to chronoq-bench (go run ./cmd/chronoq-bench plot RESULTS.json OUTDIR)")
	}
	return bench.Main("chronoq bench", args, nil)
}
