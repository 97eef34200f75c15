#!/usr/bin/env bash
# Cold restart of a kept data directory (e.g. one bench/scale.sh left with
# KEEP=1): drops the page cache, starts the server on it, polls /healthz
# every 50 ms, prints the time to it, the recovery log line, the process's
# CPU time and RSS, then SIGKILLs the server so the directory stays as it
# was (no shutdown snapshot). Needs root (drop_caches).
#
#   bench/restart-cold.sh CHRONOQ_BIN DATA_DIR
#
# SERVE_FLAGS adds `chronoq serve` flags (a directory bench/scale.sh filled
# with SERVE_FLAGS="--far-horizon 1h" must restart with them too, or its
# far-future jobs come back into memory); WARM=1 keeps the page cache.
set -euo pipefail
BIN=$1 D=$2
HTTP=127.0.0.1:17797 ADMIN=127.0.0.1:17798
LOG=$(mktemp)
sync
if [[ ${WARM:-0} != 1 ]]; then
	echo 3 >/proc/sys/vm/drop_caches
fi
t0=$(date +%s%N)
# shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
"$BIN" serve --data "$D" --http "$HTTP" --admin "$ADMIN" --beanstalk "" ${SERVE_FLAGS:-} >"$LOG" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$LOG"' EXIT
until curl -sf -o /dev/null "http://$HTTP/healthz"; do
	kill -0 $pid 2>/dev/null || { cat "$LOG" >&2; exit 1; }
	sleep 0.05
done
t1=$(date +%s%N)
echo "restart to /healthz: $(((t1 - t0) / 1000000)) ms"
grep -o 'msg=recovered.*' "$LOG" || true
ticks=$(getconf CLK_TCK)
read -r ut st < <(awk '{print $14, $15}' /proc/$pid/stat)
echo "process CPU: $(((ut + st) * 1000 / ticks)) ms (user $((ut * 1000 / ticks)), system $((st * 1000 / ticks)))"
grep VmRSS /proc/$pid/status
