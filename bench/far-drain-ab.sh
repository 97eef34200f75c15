#!/usr/bin/env bash
# A far drain's bucket writes against other clients' puts, builds
# alternating (docs/benchmarks.md, "Far buckets written back as they
# grow"): each run starts a build with --far-horizon 1h on an empty DIR,
# puts N jobs delayed 2 h to a year (bench/drain -mode farfill, batches of
# 1000), then, while the far store moves them to bucket files, runs
# `chronoq bench --scenario put --conns 8` for PROBE and prints the put
# latency, the log commits over 3.2 ms, the most dirty page cache seen
# (/proc/meminfo, sampled every 0.5 s), the jobs still to move and the
# writes the disk saw from the fill to the probe's end (DISK, default vda).
#
#   bench/far-drain-ab.sh DIR N ROUNDS BIN...      (PROBE: 30s)
#
# Needs root (the page cache is synced and dropped between runs).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1 N=$2 ROUNDS=$3
shift 3
PROBE=${PROBE:-30s} DISK=${DISK:-vda}
HTTP=127.0.0.1:17987 ADMIN=127.0.0.1:17988
DRAIN=$(mktemp -d)/drain
go build -o "$DRAIN" ./bench/drain
PID= SAMPLER=
trap 'if [[ -n $PID ]]; then kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; fi; [[ -z $SAMPLER ]] || kill $SAMPLER 2>/dev/null || true' EXIT
metric() { curl -fsS "http://$ADMIN/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
slow() {
	curl -fsS "http://$ADMIN/metrics" | awk '/^chronoq_wal_fsync_seconds_bucket\{le="0.0032"\}/ {a=$2} /^chronoq_wal_fsync_seconds_count/ {c=$2} END {print c-a}'
}
for round in $(seq "$ROUNDS"); do
	for bin in "$@"; do
		rm -rf "$DIR"
		mkdir -p "$DIR"
		sync
		echo 3 >/proc/sys/vm/drop_caches
		"$bin" serve --data "$DIR" --http "$HTTP" --admin "$ADMIN" --beanstalk "" --far-horizon 1h >"$DIR.log" 2>&1 &
		PID=$!
		until curl -fsS "http://$HTTP/healthz" >/dev/null 2>&1; do
			kill -0 $PID 2>/dev/null || { echo "the server exited; see $DIR.log" >&2; exit 1; }
			sleep 0.05
		done
		read -r _ _ _ _ w1 _ ws1 _ < /sys/block/$DISK/stat || true
		fill=$("$DRAIN" -addr "$HTTP" -mode farfill -n "$N" -conns 8)
		s1=$(slow)
		: >"$DIR.dirty"
		(while :; do awk '/^Dirty:/ {print $2}' /proc/meminfo >>"$DIR.dirty"; sleep 0.5; done) &
		SAMPLER=$!
		put=$("$bin" bench --target chronoq-http --addr "$HTTP" --scenario put --conns 8 --duration "$PROBE" --json |
			python3 -c 'import json, sys; d = json.load(sys.stdin); print("put p50 %.2f p99 %.2f max %.1f ms, %d/s" % (d["p50_ms"], d["p99_ms"], d["max_ms"], d["jobs_per_sec"]))')
		kill $SAMPLER
		SAMPLER=
		s2=$(slow)
		read -r _ _ _ _ w2 _ ws2 _ < /sys/block/$DISK/stat || true
		backlog=$(metric chronoq_far_backlog_jobs)
		dirty=$(sort -n "$DIR.dirty" | tail -1)
		kill -TERM $PID
		wait $PID || true
		PID=
		echo "round $round $bin: $fill; $put; commits over 3.2 ms $((s2 - s1)); dirty max $((dirty / 1024)) MiB; far backlog after ${backlog:-?}; disk writes $((w2 - w1)) ($(((ws2 - ws1) / 2048)) MiB)"
	done
done
