#!/usr/bin/env bash
# Bytes a chronoq server allocates per job, for each build given: the
# server's go_memstats_alloc_bytes_total (admin port /metrics) over 5 s in
# the middle of an 8 s chronoq-bench run at 64 connections, divided by the
# run's jobs in those 5 s. Each build runs on a fresh data directory, one
# after the other (docs/benchmarks.md, "Allocations per request").
#
#   bench/allocrate.sh BIN [BIN...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
BENCH=${BENCH_DIR:-/tmp/chronoq-bench}/chronoq-bench
mkdir -p "$(dirname "$BENCH")"
go build -o "$BENCH" ./cmd/chronoq-bench
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
allocated() { curl -s http://127.0.0.1:23678/metrics | awk '/^go_memstats_alloc_bytes_total/{print $2}'; }
for bin in "$@"; do
	rm -rf "$D/data"
	"$bin" serve --data "$D/data" --http 127.0.0.1:23677 --admin 127.0.0.1:23678 --beanstalk 127.0.0.1:23620 >"$D/server.log" 2>&1 &
	srv=$!
	for _ in $(seq 100); do curl -sf http://127.0.0.1:23678/metrics >/dev/null && break; sleep 0.1; done
	for cell in "chronoq-http put" "chronoq-beanstalk put" "chronoq-ws put" "chronoq-http lifecycle"; do
		set -- $cell
		addr=127.0.0.1:23677
		[[ $1 == chronoq-beanstalk ]] && addr=127.0.0.1:23620
		"$BENCH" --target "$1" --addr "$addr" --scenario "$2" --conns 64 --duration 8s --payload 100 --json >"$D/run.json" &
		cl=$!
		sleep 1.5
		a0=$(allocated)
		sleep 5
		a1=$(allocated)
		wait $cl
		rate=$(grep -o '"jobs_per_sec":[0-9.]*' "$D/run.json" | cut -d: -f2)
		awk -v b="$bin" -v c="$1 $2" -v a0="$a0" -v a1="$a1" -v r="$rate" \
			'BEGIN { printf "%s\t%s\t%.0f bytes/job\n", b, c, (a1 - a0) / (r * 5) }'
	done
	kill $srv
	wait $srv || true
done
