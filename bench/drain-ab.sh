#!/usr/bin/env bash
# A cold backlog's drain against other clients' puts, builds alternating
# (docs/benchmarks.md, "Background reads in small pieces"): each run starts
# a build on a fresh copy of DIR with the page cache dropped (root), drains
# queue "drain" for 12 s with 16 connections (bench/drain) while `chronoq
# bench --scenario put --conns 8` puts into another queue, and prints the
# put latency, the drain rate and the log commits over 3.2 ms.
#
#   bench/drain-ab.sh DIR ROUNDS BIN...
#
# DIR: a data directory with a backlog in queue "drain", e.g. `chronoq serve
# --data DIR ...` and `go run ./bench/drain -mode fill -n 3000000`.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1 ROUNDS=$2
shift 2
HTTP=127.0.0.1:17987 ADMIN=127.0.0.1:17988 COPY=$DIR.probe
DRAIN=$(mktemp -d)/drain
go build -o "$DRAIN" ./bench/drain
PID=
trap 'if [[ -n $PID ]]; then kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; fi; rm -rf "$COPY"' EXIT
slow() {
	curl -fsS "http://$ADMIN/metrics" | awk '/^chronoq_wal_fsync_seconds_bucket\{le="0.0032"\}/ {a=$2} /^chronoq_wal_fsync_seconds_count/ {c=$2} END {print c-a}'
}
for round in $(seq "$ROUNDS"); do
	for bin in "$@"; do
		rm -rf "$COPY"
		cp -a "$DIR" "$COPY"
		sync
		echo 3 >/proc/sys/vm/drop_caches
		sleep 5
		"$bin" serve --data "$COPY" --http "$HTTP" --admin "$ADMIN" --beanstalk "" >"$COPY.log" 2>&1 &
		PID=$!
		until curl -fsS "http://$HTTP/healthz" >/dev/null 2>&1; do
			kill -0 $PID 2>/dev/null || { echo "the server exited; see $COPY.log" >&2; exit 1; }
			sleep 0.05
		done
		sleep 0.3
		s1=$(slow)
		"$DRAIN" -addr "$HTTP" -mode drain -conns 16 -for 12s >"$COPY.drain" 2>&1 &
		DP=$!
		sleep 1
		put=$("$bin" bench --target chronoq-http --addr "$HTTP" --scenario put --conns 8 --duration 10s --json |
			python3 -c 'import json, sys; d = json.load(sys.stdin); print("put p50 %.2f p99 %.2f max %.1f ms, %d/s" % (d["p50_ms"], d["p99_ms"], d["max_ms"], d["jobs_per_sec"]))')
		wait $DP
		s2=$(slow)
		kill -TERM $PID
		wait $PID || true
		PID=
		echo "round $round $bin: $put; $(cat "$COPY.drain"); commits over 3.2 ms $((s2 - s1))"
	done
done
