#!/usr/bin/env bash
# 1000 + 1000 connections against 64 + 64 (`--scenario mixed`), before and
# after: two chronoq builds run side by side (fresh data directories,
# default flags, --sync always) and every repetition runs
# `chronoq-bench --scenario mixed --conns CONNS --base-conns BASE_CONNS`
# over the beanstalkd protocol and over HTTP against each in turn (base,
# new, base, new ...). Compare same-repetition ratios, not lone absolutes:
# the machine is shared. Each line of OUT is one `chronoq-bench --json`
# object plus "rep", "load" (1-minute load average as the run ended) and
# "cpu_some" (/proc/pressure/cpu some avg10: the share of the last 10 s in
# which some runnable task waited for a CPU).
#
#   bench/mixed-ab.sh BASE_BIN NEW_BIN OUT [REPS (3)] [DURATION (10s)]
#   bench/mixed-ab.sh --table OUT
#
# Environment:
#   SERVER_CPUS, BENCH_CPUS  pin the servers and the load generator to
#       separate CPUs with taskset (e.g. SERVER_CPUS=0 BENCH_CPUS=1), so
#       the 2 000 client goroutines do not take the server's CPU and the
#       ratio is about the server; unset, nothing is pinned.
#   CONNS (1000), BASE_CONNS (64), BACKLOG (--backlog; 0: 2 x conns,
#       negative: unpaced producers).
#   PORT (21600): the servers listen on PORT+20/+77/+78 (base) and
#       PORT+120/+177/+178 (new), below the ephemeral range.
#
# --table prints, per server and target, each repetition's throughput
# ratio, consume and put p99/p50 at CONNS + CONNS, and server CPU per
# consumed job at both sizes, then the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
if [[ ${1:-} == --table ]]; then
	jq -rs '
	  def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
	  def r2: . * 100 | round / 100;
	  group_by(.target) | .[] | . as $runs
	  | [group_by(.rep)[] | (map(.conns) | max) as $m | (map(select(.conns < $m))[0]) as $s | (map(select(.conns == $m))[0]) as $l
	     | select($s != null and $l != null)
	     | {rep: $l.rep, load: $l.load, psi: ($l.cpu_some // ""), small: $s.jobs_per_sec, large: $l.jobs_per_sec,
	        ratio: ($l.jobs_per_sec / $s.jobs_per_sec), cp: ($l.p99_ms / $l.p50_ms), pp: ($l.put_p99_ms / $l.put_p50_ms),
	        cpus: ($s.server_cpu_us_per_op // 0), cpul: ($l.server_cpu_us_per_op // 0)}] as $reps
	  | ($reps[] | "\($runs[0].target)\trep \(.rep)\tload \(.load)\tcpu some \(.psi)\t\(.small | round) -> \(.large | round) jobs/s\t\(.ratio * 100 | round) %\tconsume p99/p50 \(.cp | r2)\tput p99/p50 \(.pp | r2)\tserver CPU/job \(.cpus | round) -> \(.cpul | round) us"),
	    "\($runs[0].target)\tmedian\t\t\t\(map($reps[].small) | median | round) -> \(map($reps[].large) | median | round) jobs/s\t\(map($reps[].ratio) | median * 100 | round) %\tconsume p99/p50 \(map($reps[].cp) | median | r2)\tput p99/p50 \(map($reps[].pp) | median | r2)\tserver CPU/job \(map($reps[].cpus) | median | round) -> \(map($reps[].cpul) | median | round) us"
	' "$2"
	exit 0
fi
BASE=$1 NEW=$2 OUT=$3 REPS=${4:-3} DUR=${5:-10s}
CONNS=${CONNS:-1000} BASE_CONNS=${BASE_CONNS:-64} BACKLOG=${BACKLOG:-0} PORT=${PORT:-21600}
BB=127.0.0.1:$((PORT + 20)) BH=127.0.0.1:$((PORT + 77)) BA=127.0.0.1:$((PORT + 78))
NB=127.0.0.1:$((PORT + 120)) NH=127.0.0.1:$((PORT + 177)) NA=127.0.0.1:$((PORT + 178))
srv=() gen=()
if [[ -n ${SERVER_CPUS:-} ]]; then srv=(taskset -c "$SERVER_CPUS"); fi
if [[ -n ${BENCH_CPUS:-} ]]; then gen=(taskset -c "$BENCH_CPUS"); fi
BENCH=${BENCH_DIR:-/tmp/chronoq-bench}/chronoq-bench
mkdir -p "$(dirname "$BENCH")"
go build -o "$BENCH" ./cmd/chronoq-bench
D=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$D"' EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# ports below the ephemeral range, so no outgoing connection holds them
"${srv[@]}" "$BASE" serve --data "$D/base" --http "$BH" --admin "$BA" --beanstalk "$BB" >"$D/base.log" 2>&1 &
pids+=($!)
"${srv[@]}" "$NEW" serve --data "$D/new" --http "$NH" --admin "$NA" --beanstalk "$NB" >"$D/new.log" 2>&1 &
pids+=($!)
for a in "$BB" "$BH" "$NB" "$NH"; do wait_port "${a##*:}" || { echo "nothing listens on $a (see $D/*.log)" >&2; exit 1; }; done
: >"$OUT"
run() { # label target addr server-pid
	local out
	if out=$("${gen[@]}" "$BENCH" --target "$2" --addr "$3" --label "$1" --server-pid "$4" --scenario mixed \
		--conns "$CONNS" --base-conns "$BASE_CONNS" --backlog "$BACKLOG" --duration "$DUR" --payload 100 --json 2>&1); then
		local psi
		psi=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || true)
		echo "$out" | sed "s/^{/{\"rep\":$rep,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"cpu_some\":\"${psi:-}\",/" >>"$OUT"
	else
		echo "$1: $out" >&2
	fi
}
for rep in $(seq "$REPS"); do
	echo "rep $rep $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	run base-beanstalk chronoq-beanstalk "$BB" "${pids[0]}"
	run new-beanstalk chronoq-beanstalk "$NB" "${pids[1]}"
	run base-http chronoq-http "$BH" "${pids[0]}"
	run new-http chronoq-http "$NH" "${pids[1]}"
done
echo "done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
