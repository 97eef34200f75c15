#!/usr/bin/env bash
# The scale run (docs/benchmarks.md, "Scale run"): builds chronoq, starts
# it on a fresh data directory, fills it through the batch API with N jobs
# and measures it at that size (`chronoq bench --scenario scale`: fill
# rate, RSS and heap per job, put/take/ack p50/p99 at N and while a
# snapshot is written, activation lateness), then stops it (timing the
# shutdown, which writes a snapshot), measures the disk used, starts it
# again and times the restart until /healthz answers (the listeners open
# only after recovery) and the RSS after it. Prints one JSON object per
# phase and a summary; keeps the server's log next to the data.
#
# Usage: bench/scale.sh [N]        (N default 100000000)
# Knobs (environment): DATA (/var/tmp/chronoq-scale; emptied first) SYNC
# (always) FILL_CONNS (8) PROBE (10s) LATENESS (30s) CHRONOQ_BIN (a prebuilt server;
# default: built from this tree) KEEP (1: leave the data directory)
# SERVE_FLAGS (more `chronoq serve` flags, e.g. "--far-horizon 1h")
# BENCH_FLAGS (more `chronoq bench` flags, e.g. "--payload 10").
# Never run two at once: the ports and the machine's memory are shared.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

N=${1:-100000000}
DATA=${DATA:-/var/tmp/chronoq-scale}
SYNC=${SYNC:-always}
FILL_CONNS=${FILL_CONNS:-8}
PROBE=${PROBE:-10s}
LATENESS=${LATENESS:-30s}
HTTP=127.0.0.1:17787 ADMIN=127.0.0.1:17788
BIN=${CHRONOQ_BIN:-}
if [[ -z $BIN ]]; then
	BIN=$(mktemp -d)/chronoq
	go build -o "$BIN" ./cmd/chronoq
fi
rm -rf "$DATA"
mkdir -p "$DATA"
LOG=$DATA.log
: >"$LOG"

now_ms() { date +%s%3N; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

start() {
	"$BIN" serve --data "$DATA" --http "$HTTP" --admin "$ADMIN" --beanstalk "" \
		--sync "$SYNC" --max-connections 10000 ${SERVE_FLAGS:-} >>"$LOG" 2>&1 &
	PID=$!
	local t0
	t0=$(now_ms)
	until curl -fsS "http://$HTTP/healthz" >/dev/null 2>&1; do
		if ! kill -0 "$PID" 2>/dev/null; then
			echo "scale: the server exited; see $LOG" >&2
			exit 1
		fi
		sleep 0.05
	done
	STARTED_MS=$(($(now_ms) - t0))
}

stop() {
	local t0
	t0=$(now_ms)
	kill -TERM "$PID"
	wait "$PID" || true
	STOPPED_MS=$(($(now_ms) - t0))
}

start
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
echo "scale: server pid $PID, data $DATA, $N jobs" >&2
"$BIN" bench --scenario scale --addr "$HTTP" --admin-addr "$ADMIN" --jobs "$N" \
	--fill-conns "$FILL_CONNS" --probe "$PROBE" --lateness "$LATENESS" ${BENCH_FLAGS:-} --json >"$DATA.bench.json"
cat "$DATA.bench.json"
stop
DISK=$(du -sb "$DATA" | cut -f1)
SNAP=$(du -sb "$DATA/snap" 2>/dev/null | cut -f1 || echo 0)
start
RESTART_MS=$STARTED_MS
# what recovery took (the log says how long and from which snapshot); the
# log segments before the snapshot are checked afterwards, in the
# background ("log scrub complete" in the log)
grep 'msg=recovered' "$LOG" | tail -1 >&2 || true
sleep 2 # let the loop settle before reading RSS
RSS_AFTER=$(($(rss_kib "$PID") * 1024))
# every job of the filled queue, whatever its state (a few of the shortest
# delays come due during a long run)
COUNT=$(curl -fsS "http://$HTTP/v1/ns/default/queues" | grep -o '"counts":{[^}]*}' | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
stop
printf '{"jobs":%s,"shutdown_ms":%s,"disk_bytes":%s,"snapshot_bytes":%s,"restart_ms":%s,"rss_after_restart_bytes":%s,"jobs_after_restart":%s}\n' \
	"$N" "$STOPPED_MS" "$DISK" "$SNAP" "$RESTART_MS" "$RSS_AFTER" "${COUNT:-0}" | tee "$DATA.restart.json"
trap - EXIT
if [[ ${KEEP:-0} != 1 ]]; then
	rm -rf "$DATA"
fi
