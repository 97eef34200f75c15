#!/usr/bin/env bash
# Before/after run of two chronoq builds side by side, for changes whose
# effect is smaller than the drift of a shared machine: both servers run
# at once (fresh data directories, default flags), with in-memory
# beanstalkd and Redis (appendfsync always) as references, and every
# repetition runs every cell against each in turn (A, B, A, B ...), so
# compare same-repetition ratios, not lone absolutes. Each line of OUT is
# one `chronoq-bench --json` object plus "rep" and "load" (1-minute load
# average when the run started); server_cpu_us_per_op is the server
# process's CPU per operation (/proc/<pid>/stat).
#
#   bench/speed-ab.sh BASE_BIN NEW_BIN OUT [REPS (3)] [DURATION (5s)]
#
# BASE_BIN and NEW_BIN are chronoq binaries (e.g. built with
# `git worktree add /tmp/base <commit> && go build -o /tmp/chronoq-base
# ./cmd/chronoq` there). The base's chronoq-http lifecycle runs with
# --three-requests (a base without ack-and-take-next rejects "take");
# BASE_ACKTAKE=1 also runs it with ack-and-take-next (bases since
# 2026-11-25). The pipelined cells need a chronoq-bench with --pipeline.
# Summarize with: bench/speed-ab.sh --table OUT [BASE_LABEL].
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
if [[ ${1:-} == --table ]]; then
	arr=$(mktemp --suffix=.json)
	{ echo "["; paste -sd, "$2"; echo "]"; } >"$arr"
	go run ./cmd/chronoq-bench plot "$arr" "$(mktemp -d)" --base "${3:-base-http}" 2>/dev/null
	rm -f "$arr"
	exit 0
fi
BASE=$1 NEW=$2 OUT=$3 REPS=${4:-3} DUR=${5:-5s}
BENCH=${BENCH_DIR:-/tmp/chronoq-bench}/chronoq-bench
mkdir -p "$(dirname "$BENCH")"
go build -o "$BENCH" ./cmd/chronoq-bench
D=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$D"' EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# ports below the ephemeral range, so no outgoing connection holds them
"$BASE" serve --data "$D/base" --http 127.0.0.1:23477 --admin 127.0.0.1:23478 --beanstalk 127.0.0.1:23420 >"$D/base.log" 2>&1 &
pids+=($!)
"$NEW" serve --data "$D/new" --http 127.0.0.1:23577 --admin 127.0.0.1:23578 --beanstalk 127.0.0.1:23520 >"$D/new.log" 2>&1 &
pids+=($!)
beanstalkd -l 127.0.0.1 -p 23311 &
pids+=($!)
mkdir -p "$D/redis"
redis-server --bind 127.0.0.1 --port 23379 --dir "$D/redis" --appendonly yes --appendfsync always \
	--save "" --daemonize no --protected-mode yes >"$D/redis.log" 2>&1 &
pids+=($!)
for p in 23477 23577 23311 23379; do wait_port $p || { echo "nothing listens on $p" >&2; exit 1; }; done
: >"$OUT"
rep=0
run() { # label target addr scenario conns [flags]
	local label=$1 tg=$2 addr=$3 sc=$4 n=$5 out
	shift 5
	if out=$("$BENCH" --target "$tg" --addr "$addr" --label "$label" --scenario "$sc" --conns "$n" \
		--duration "$DUR" --payload 100 --json "$@" 2>&1); then
		echo "$out" | sed "s/^{/{\"rep\":$rep,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",/" >>"$OUT"
	else
		echo "$label $sc $n: $out" >&2
	fi
}
B=127.0.0.1:23477 N=127.0.0.1:23577 BB=127.0.0.1:23420 NB=127.0.0.1:23520
for rep in $(seq "$REPS"); do
	echo "rep $rep $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	for n in 64 8; do
		run base-http chronoq-http $B put $n
		run new-http chronoq-http $N put $n
		run base-beanstalk chronoq-beanstalk $BB put $n
		run new-beanstalk chronoq-beanstalk $NB put $n
		if [[ $n == 64 ]]; then
			run base-ws chronoq-ws $B put $n
			run new-ws chronoq-ws $N put $n
			run beanstalkd-nobinlog beanstalkd 127.0.0.1:23311 put $n
			run redis redis 127.0.0.1:23379 put $n
		fi
		run base-http-3req chronoq-http $B lifecycle $n --three-requests
		[[ -n ${BASE_ACKTAKE:-} ]] && run base-http-acktake chronoq-http $B lifecycle $n
		run new-http-acktake chronoq-http $N lifecycle $n
		run new-http-3req chronoq-http $N lifecycle $n --three-requests
		run base-beanstalk chronoq-beanstalk $BB lifecycle $n
		run new-beanstalk chronoq-beanstalk $NB lifecycle $n
		if [[ $n == 64 ]]; then
			run base-ws chronoq-ws $B lifecycle $n
			run new-ws chronoq-ws $N lifecycle $n
			run beanstalkd-nobinlog beanstalkd 127.0.0.1:23311 lifecycle $n
			run redis redis 127.0.0.1:23379 lifecycle $n
		fi
	done
	# pipelined puts: 8 connections with 32 puts in flight each
	run base-ws-p32 chronoq-ws $B put 8 --pipeline 32
	run new-ws-p32 chronoq-ws $N put 8 --pipeline 32
	run base-beanstalk-p32 chronoq-beanstalk $BB put 8 --pipeline 32
	run new-beanstalk-p32 chronoq-beanstalk $NB put 8 --pipeline 32
	run beanstalkd-nobinlog-p32 beanstalkd 127.0.0.1:23311 put 8 --pipeline 32
	run base-ws chronoq-ws $B fanout 1000
	run new-ws chronoq-ws $N fanout 1000
	run base-http chronoq-http $B delayed 64 --delay-range 1s..2s
	run new-http chronoq-http $N delayed 64 --delay-range 1s..2s
done
echo "done $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
