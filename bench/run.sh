#!/usr/bin/env bash
# Runs the benchmark matrix: builds chronoq and its load generator
# (cmd/chronoq-bench), starts chronoq and the peers
# (bench/peers.sh), and runs every scenario × connection count with the
# targets alternating A/B/C/A/B/C... (REPS repetitions each) because
# shared machines drift; then writes bench/results/<date-HHMM>.json (a JSON
# array of `chronoq-bench --json` objects), <date-HHMM>.cdf.jsonl (the latency
# distributions), <date-HHMM>.na.txt (cells that could not run, with why) and
# the plots and a markdown table of medians under bench/results/<date-HHMM>/;
# <date-HHMM>.load.txt has the load average at the start of every repetition
# (the machine may be shared: read the medians next to it). Last, it
# rewrites the generated section of docs/benchmarks.md ("chronoq-bench
# report") from the run: the speed goals judged on it, its medians, before
# and after against BEFORE, summaries of the CPU profiles, and the plots
# in docs/benchmarks/.
#
# Every result carries server_cpu_us_per_op: the CPU time (user + system)
# the server process spent per operation, read by chronoq-bench from
# /proc/<pid>/stat of the process listening on the target's port.
#
# Knobs (environment): DURATION (5s) CONNS ("8 64") REPS (3) PAYLOAD (100)
# SCENARIOS ("put lifecycle"; empty: none) TARGETS (see below, default: all
# that are up) DELAYED_TARGETS ("chronoq-http chronoq-ws chronoq-beanstalk
# beanstalkd-nobinlog redis"; empty: skip the delayed runs) DELAYED_CONNS (64)
# DELAY_RANGE (1s..2s) DELAYED_DURATION (10s) FANOUT_CONNS ("64"; empty:
# skip the chronoq-ws fanout runs) CHRONOQ_BIN (a prebuilt server;
# default: built from this tree) PROFILE (1: CPU-profile chronoq during
# the first run of each scenario at the largest conns of every target in
# PROFILE_TARGETS, "chronoq-http chronoq-beanstalk") KEEP_PEERS (1: leave
# the peers running) BENCH_DIR (scratch, /tmp/chronoq-bench) BEFORE (the
# results file the report compares with; default the matrix of the build
# before the speed work, 4e6f109, run on 2026-11-27 with this load
# generator) REPORT (1: rewrite docs/benchmarks.md; 0: don't;
# default: only when SCENARIOS, CONNS, TARGETS and DELAYED_TARGETS are
# their defaults, so a partial run leaves the page alone).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

DURATION=${DURATION:-5s}
CONNS=${CONNS:-8 64}
REPS=${REPS:-3}
PAYLOAD=${PAYLOAD:-100}
SCENARIOS=${SCENARIOS-put lifecycle}
DELAYED_TARGETS=${DELAYED_TARGETS-chronoq-http chronoq-ws chronoq-beanstalk beanstalkd-nobinlog redis}
DELAYED_CONNS=${DELAYED_CONNS:-64}
DELAY_RANGE=${DELAY_RANGE:-1s..2s}
DELAYED_DURATION=${DELAYED_DURATION:-10s}
FANOUT_CONNS=${FANOUT_CONNS-64}
PROFILE=${PROFILE:-1}
PROFILE_TARGETS=${PROFILE_TARGETS:-chronoq-http chronoq-beanstalk}
BEFORE=${BEFORE:-bench/results/2026-11-27-1632.json}
if [[ -z ${REPORT:-} ]]; then
	REPORT=1
	[[ $SCENARIOS == "put lifecycle" && $CONNS == "8 64" && -z ${TARGETS:-} &&
		$DELAYED_TARGETS == "chronoq-http chronoq-ws chronoq-beanstalk beanstalkd-nobinlog redis" ]] || REPORT=0
fi
export BENCH_DIR=${BENCH_DIR:-/tmp/chronoq-bench}
CQ_HTTP=127.0.0.1:17777 CQ_ADMIN=127.0.0.1:17778 CQ_BEANSTALK=127.0.0.1:11320

# label=target@addr of every target the matrix knows
declare -A SPEC=(
	[chronoq-http]=chronoq-http@$CQ_HTTP
	[chronoq-http-3req]=chronoq-http@$CQ_HTTP
	[chronoq-ws]=chronoq-ws@$CQ_HTTP
	[chronoq-beanstalk]=chronoq-beanstalk@$CQ_BEANSTALK
	[beanstalkd]=beanstalkd@127.0.0.1:${BEANSTALKD_PORT:-11310}
	[beanstalkd-nobinlog]=beanstalkd@127.0.0.1:${BEANSTALKD_MEM_PORT:-11311}
	[redis]=redis@127.0.0.1:${REDIS_PORT:-16379}
	[nats]=nats@127.0.0.1:${NATS_PORT:-14222}
	[rabbitmq]=rabbitmq@127.0.0.1:${RABBITMQ_PORT:-15673}
)
# chronoq-http's lifecycle acks and takes the next job in one request (two
# requests per cycle); chronoq-http-3req is the same server driven with
# put, take and ack as three requests.
# extra flags of a label, and the scenarios it runs (default: all)
declare -A FLAGS=([chronoq-http-3req]=--three-requests)
declare -A ONLY=([chronoq-http-3req]=lifecycle)
ORDER="chronoq-http chronoq-http-3req chronoq-ws chronoq-beanstalk beanstalkd beanstalkd-nobinlog redis nats rabbitmq"
PEERS=${PEERS:-beanstalkd beanstalkd-mem redis nats rabbitmq}

mkdir -p bench/results "$BENCH_DIR"
stamp=$(date -u +%Y-%m-%d-%H%M)
OUT=bench/results/$stamp.json
LINES=$BENCH_DIR/$stamp.lines
NA=bench/results/$stamp.na.txt
LOAD=bench/results/$stamp.load.txt
: >"$LINES"
: >"$NA"
: >"$LOAD"
# load LABEL: note the time and load averages (1, 5, 15 min) in $LOAD
load() { echo "$(date -u +%FT%TZ) load $(cut -d" " -f1-3 /proc/loadavg) $*" >>"$LOAD"; }
load start
rm -f "${OUT%.json}.cdf.jsonl"

echo "building chronoq and chronoq-bench" >&2
go build -o "$BENCH_DIR/chronoq" ./cmd/chronoq
go build -o "$BENCH_DIR/chronoq-bench" ./cmd/chronoq-bench
BIN=$BENCH_DIR/chronoq-bench
SERVER=${CHRONOQ_BIN:-$BENCH_DIR/chronoq}

cq_pid=
cleanup() {
	[[ -n $cq_pid ]] && kill "$cq_pid" 2>/dev/null && wait "$cq_pid" 2>/dev/null
	[[ ${KEEP_PEERS:-0} == 1 ]] || bench/peers.sh stop
}
trap cleanup EXIT

rm -rf "$BENCH_DIR/chronoq-data"
"$SERVER" serve --data "$BENCH_DIR/chronoq-data" --http $CQ_HTTP --admin $CQ_ADMIN \
	--beanstalk $CQ_BEANSTALK >"$BENCH_DIR/chronoq.log" 2>&1 &
cq_pid=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/${CQ_HTTP##*:}) 2>/dev/null && break; sleep 0.1; done
bench/peers.sh start $PEERS || echo "some peers did not start; their cells are n/a" >&2

up() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
if [[ -z ${TARGETS:-} ]]; then
	TARGETS=
	for l in $ORDER; do
		addr=${SPEC[$l]#*@}
		if up "$addr"; then TARGETS+="$l "; else echo "$l: n/a: nothing listens on $addr" | tee -a "$NA" >&2; fi
	done
fi
echo "targets: $TARGETS" >&2

# run LABEL SCENARIO CONNS DURATION [extra flags]
run() {
	local label=$1 sc=$2 n=$3 dur=$4
	shift 4
	local spec=${SPEC[$label]} out err
	[[ -z ${ONLY[$label]:-} || " ${ONLY[$label]} " == *" $sc "* ]] || return 0
	err=$(mktemp)
	# shellcheck disable=SC2086 # FLAGS holds words
	if out=$("$BIN" --target "${spec%@*}" --addr "${spec#*@}" --label "$label" --scenario "$sc" \
		--conns "$n" --duration "$dur" --payload "$PAYLOAD" --json --cdf "${OUT%.json}.cdf.jsonl" ${FLAGS[$label]:-} "$@" 2>"$err"); then
		echo "$out" >>"$LINES"
		echo "  $out" >&2
	else
		echo "$label $sc conns=$n: $(tail -1 "$err")" | tee -a "$NA" >&2
	fi
	rm -f "$err"
}

maxconns=$(tr ' ' '\n' <<<"$CONNS" | sort -n | tail -1)
for sc in $SCENARIOS; do
	for n in $CONNS; do
		for rep in $(seq "$REPS"); do
			echo "== $sc conns=$n rep $rep/$REPS" >&2
			load "$sc conns=$n rep $rep"
			for label in $TARGETS; do
				prof=
				if [[ $PROFILE == 1 && " $PROFILE_TARGETS " == *" $label "* && $rep == 1 && $n == "$maxconns" ]]; then
					secs=$(($(sed 's/[^0-9].*//' <<<"$DURATION") - 1))
					((secs >= 1)) || secs=1
					curl -s -o "bench/results/$stamp.$label.$sc-$n.pprof" \
						"http://$CQ_ADMIN/debug/pprof/profile?seconds=$secs" &
					prof=$!
				fi
				run "$label" "$sc" "$n" "$DURATION"
				[[ -n $prof ]] && wait "$prof" || true
			done
		done
	done
done

for rep in $(seq "$REPS"); do
	[[ -n $DELAYED_TARGETS ]] || break
	echo "== delayed conns=$DELAYED_CONNS rep $rep/$REPS" >&2
	load "delayed conns=$DELAYED_CONNS rep $rep"
	for label in $DELAYED_TARGETS; do
		[[ " $TARGETS " == *" $label "* ]] || continue
		run "$label" delayed "$DELAYED_CONNS" "$DELAYED_DURATION" --delay-range "$DELAY_RANGE"
	done
done

if [[ " $TARGETS " == *" chronoq-ws "* ]]; then
	for n in $FANOUT_CONNS; do
		for rep in $(seq "$REPS"); do
			echo "== fanout conns=$n rep $rep/$REPS" >&2
			load "fanout conns=$n rep $rep"
			run chronoq-ws fanout "$n" "$DURATION"
		done
	done
fi

load end
{
	echo "["
	paste -sd, "$LINES" | sed 's/},{/},\n{/g'
	echo "]"
} >"$OUT"
echo "wrote $OUT ($(wc -l <"$LINES") runs)" >&2
mkdir -p "bench/results/$stamp"
"$BIN" plot "$OUT" "bench/results/$stamp" | tee "bench/results/$stamp/table.md"
if [[ $REPORT == 1 ]]; then
	"$BIN" report "$OUT" --doc docs/benchmarks.md --plots docs/benchmarks --before "$BEFORE" \
		--commit "$(git describe --always --dirty 2>/dev/null || echo unknown)"
else
	echo "docs/benchmarks.md left alone (a partial run; REPORT=1 rewrites it anyway)" >&2
fi
