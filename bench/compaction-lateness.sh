#!/usr/bin/env bash
# Activation lateness while log compaction runs (docs/benchmarks.md, "Log
# compaction and activation lateness"), builds alternating: every run
# starts a build on a fresh copy of DIR (a data directory whose log
# compaction still has segments to empty) and, 0.5 s after /healthz
# answers, runs `chronoq bench --scenario delayed` (64 connections, delays
# 1–3 s, --duration) against it. One line per run: lateness p50/p99/max and
# samples, the log commits (write + fdatasync) over 3.2 and 12.8 ms during
# the probe (chronoq_wal_fsync_seconds), and the log files at the probe's
# start and end.
#
#   bench/compaction-lateness.sh DIR ROUNDS BIN...
#
# DIR: e.g. `DATA=/var/tmp/cfar KEEP=1 SERVE_FLAGS="--far-horizon 1h"
# bench/scale.sh 15000000` once (the fill ends after the far drain, with
# segments left for compaction). Knobs: COLD=1 drops the page cache after
# each copy (root), so the server reads its segments from the disk as
# after a reboot; SERVE_FLAGS (default "--far-horizon 1h"); DURATION (10s);
# BENCH, the binary whose `bench` runs the probe (default: each build's
# own), so that builds are compared with one load generator.
#
# Each line gives two latenesses: from the put's start plus the delay (an
# upper bound: it holds the put's own latency, and the first puts of the
# 64 workers, sent at the same instant, take 3–25 ms), and from the activate_at the
# take answers, the activation lateness proper (docs/benchmarks.md, "What
# the lateness probe measured").
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1 ROUNDS=$2
shift 2
SERVE_FLAGS=${SERVE_FLAGS:---far-horizon 1h}
DURATION=${DURATION:-10s}
HTTP=127.0.0.1:17887 ADMIN=127.0.0.1:17888
COPY=$DIR.probe
PID=
trap 'if [[ -n $PID ]]; then kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; fi; rm -rf "$COPY"' EXIT
slow() { # commits over 3.2 ms and over 12.8 ms so far
	curl -fsS "http://$ADMIN/metrics" | awk '
		/^chronoq_wal_fsync_seconds_bucket\{le="0.0032"\}/ {a=$2}
		/^chronoq_wal_fsync_seconds_bucket\{le="0.0128"\}/ {b=$2}
		/^chronoq_wal_fsync_seconds_count/ {c=$2}
		END {print c-a, c-b, c}'
}
logs() { ls "$COPY/wal" | grep -c '\.log$'; }
# quiet waits (up to 60 s) until the disk (DISK, default vda) has done no
# writes or discards for 3 s: removing the last run's copy discards
# gigabytes on a filesystem mounted with online discard, and the disk
# goes on with that long after rm returned.
quiet() {
	local before now
	before=$(awk '{print $5, $8, $12, $15}' "/sys/block/${DISK:-vda}/stat")
	for _ in $(seq 20); do
		sleep 3
		now=$(awk '{print $5, $8, $12, $15}' "/sys/block/${DISK:-vda}/stat")
		[[ $now == "$before" ]] && return
		before=$now
	done
}
for round in $(seq "$ROUNDS"); do
	for bin in "$@"; do
		rm -rf "$COPY"
		cp -a "$DIR" "$COPY"
		sync
		if [[ ${COLD:-0} == 1 ]]; then echo 3 >/proc/sys/vm/drop_caches; fi
		sleep 10
		quiet
		"$bin" serve --data "$COPY" --http "$HTTP" --admin "$ADMIN" --beanstalk "" $SERVE_FLAGS >"$COPY.log" 2>&1 &
		PID=$!
		until curl -fsS "http://$HTTP/healthz" >/dev/null 2>&1; do
			kill -0 $PID 2>/dev/null || { echo "the server exited; see $COPY.log" >&2; exit 1; }
			sleep 0.05
		done
		sleep 0.5
		read -r s1 t1 c1 < <(slow)
		l1=$(logs)
		out=$("${BENCH:-$bin}" bench --target chronoq-http --addr "$HTTP" --scenario delayed --conns 64 \
			--delay-range 1s..3s --duration "$DURATION" --json)
		read -r s2 t2 c2 < <(slow)
		l2=$(logs)
		kill -TERM $PID
		wait $PID || true
		PID=
		echo "$out" | python3 -c '
import json, sys
d, a = json.load(sys.stdin), sys.argv
act = ""
if d.get("activation_samples"):
    act = "; from activate_at p50 %.2f p99 %.2f max %.1f ms" % (d["activation_p50_ms"], d["activation_p99_ms"], d["activation_max_ms"])
print("round %s %s: lateness p50 %.2f p99 %.2f max %.1f ms (%d samples)%s; commits %s, over 3.2 ms %s, over 12.8 ms %s; log files %s -> %s"
      % (a[1], a[2], d["p50_ms"], d["p99_ms"], d["max_ms"], d["jobs"], act, a[3], a[4], a[5], a[6], a[7]))
' "$round" "$bin" $((c2 - c1)) $((s2 - s1)) $((t2 - t1)) "$l1" "$l2"
	done
done
