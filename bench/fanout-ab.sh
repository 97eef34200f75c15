#!/usr/bin/env bash
# Fan-out before/after and against Centrifugo, alternating: two chronoq
# builds (BASE_BIN, NEW_BIN; NEW also with --ws-pub-interval 10ms) and
# Centrifugo run at the same time, and every repetition runs the fanout
# scenario (one channel, one publisher, N WebSocket subscribers, JSON,
# 100-byte payload) against each in turn at 1 000 and 10 000 subscribers.
# Each line of OUT is one `chronoq-bench --json` object plus "rep",
# "load" (1-minute load average at the start) and "rss_kb_per_conn" (the
# server's peak RSS during the run minus its RSS before the subscribers
# connected, per subscriber).
#
#   bench/fanout-ab.sh BASE_BIN NEW_BIN OUT [REPS (3)] [DURATION (6s)]
#
# Centrifugo: $CENTRIFUGO, else `centrifugo` on PATH, else it is built with
# `go install github.com/centrifugal/centrifugo/v6@v6.9.1` (the module
# proxy); it runs with client.insecure (anonymous subscribers, as
# chronoq's loopback mode) and an HTTP API key, memory broker, no history.
# chronoq runs with its defaults (history of 1000 per channel) plus
# --max-connections 12000 --connect-rate 5000 so 10 000 subscribers fit.
# Summarize with: bench/fanout-ab.sh --table OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin:$HOME/go/bin
if [[ ${1:-} == --table ]]; then
	python3 - "$2" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cells = {}
for r in rows:
    cells.setdefault((r["conns"], r["target"]), []).append(r)
med = lambda rs, k: statistics.median(r.get(k, 0) for r in rs)
print("| subscribers | target | deliveries/s | server CPU µs/delivery | deliveries per server CPU-s | p50 ms | p99 ms | RSS KB/conn | reps |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for (n, t), rs in sorted(cells.items()):
    print(f"| {n} | {t} | {med(rs,'jobs_per_sec'):,.0f} | {med(rs,'server_cpu_us_per_op'):.2f} | {med(rs,'ops_per_server_cpu_s'):,.0f} | {med(rs,'p50_ms'):.1f} | {med(rs,'p99_ms'):.1f} | {med(rs,'rss_kb_per_conn'):.1f} | {len(rs)} |")
# same-repetition ratios of deliveries per server CPU-s
print()
print("| subscribers | A | B | A÷B deliveries per server CPU-s (median of reps) | A÷B deliveries/s |")
print("|---:|---|---|---:|---:|")
byrep = {(r["conns"], r["target"], r["rep"]): r for r in rows}
for n in sorted({r["conns"] for r in rows}):
    for a, b in [("new", "base"), ("new-pub-interval-10ms", "base"), ("new", "centrifugo"), ("new-pub-interval-10ms", "centrifugo"), ("base", "centrifugo"), ("new-pub-interval-10ms", "new")]:
        q, s = [], []
        for rep in sorted({r["rep"] for r in rows}):
            ra, rb = byrep.get((n, a, rep)), byrep.get((n, b, rep))
            if ra and rb and rb.get("ops_per_server_cpu_s"):
                q.append(ra["ops_per_server_cpu_s"] / rb["ops_per_server_cpu_s"])
                s.append(ra["jobs_per_sec"] / rb["jobs_per_sec"])
        if q:
            print(f"| {n} | {a} | {b} | {statistics.median(q):.2f}× | {statistics.median(s):.2f}× |")
EOF
	exit 0
fi
BASE=$1 NEW=$2 OUT=$3 REPS=${4:-3} DUR=${5:-6s}
BENCH=${BENCH_DIR:-/tmp/chronoq-bench}/chronoq-bench
mkdir -p "$(dirname "$BENCH")"
go build -o "$BENCH" ./cmd/chronoq-bench
CENT=${CENTRIFUGO:-$(command -v centrifugo || true)}
if [[ -z $CENT ]]; then
	GOFLAGS=-mod=mod go install github.com/centrifugal/centrifugo/v6@v6.9.1
	CENT=$(go env GOPATH)/bin/centrifugo
fi
D=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$D"' EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# ports below the ephemeral range, so no outgoing connection holds them
flags=(--max-connections 12000 --connect-rate 5000)
"$BASE" serve --data "$D/base" --http 127.0.0.1:25177 --admin 127.0.0.1:25178 --beanstalk 127.0.0.1:25120 "${flags[@]}" >"$D/base.log" 2>&1 &
pids+=($!)
"$NEW" serve --data "$D/new" --http 127.0.0.1:25277 --admin 127.0.0.1:25278 --beanstalk 127.0.0.1:25220 "${flags[@]}" >"$D/new.log" 2>&1 &
pids+=($!)
"$NEW" serve --data "$D/new10" --http 127.0.0.1:25377 --admin 127.0.0.1:25378 --beanstalk 127.0.0.1:25320 "${flags[@]}" --ws-pub-interval 10ms >"$D/new10.log" 2>&1 &
pids+=($!)
cat >"$D/centrifugo.json" <<EOF
{"client": {"insecure": true, "allowed_origins": ["*"]},
 "http_api": {"key": "bench-key"},
 "http_server": {"address": "127.0.0.1", "port": 25477},
 "log": {"level": "error"}, "usage_stats": {"disabled": true}}
EOF
"$CENT" -c "$D/centrifugo.json" >"$D/centrifugo.log" 2>&1 &
pids+=($!)
for p in 25177 25277 25377 25477; do wait_port $p || { echo "nothing listens on $p" >&2; exit 1; }; done
pid_of() { ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
: >"$OUT"
run() { # label target port conns [flags]
	local label=$1 tg=$2 port=$3 n=$4 out pid before peak sampler
	shift 4
	pid=$(pid_of "$port")
	before=$(rss "$pid")
	echo "$before" >"$D/peak"
	(while sleep 0.25; do r=$(rss "$pid") || exit; [[ $r -gt $(cat "$D/peak") ]] && echo "$r" >"$D/peak"; done) &
	sampler=$!
	if out=$("$BENCH" --target "$tg" --addr "127.0.0.1:$port" --label "$label" --scenario fanout --conns "$n" \
		--duration "$DUR" --payload 100 --json "$@" 2>&1 | tail -1) && [[ $out == "{"* ]]; then
		kill "$sampler"
		wait "$sampler" 2>/dev/null || true
		peak=$(cat "$D/peak")
		echo "$out" | sed "s/^{/{\"rep\":$rep,\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"rss_kb_per_conn\":$(awk -v a="$peak" -v b="$before" -v n="$n" 'BEGIN{printf "%.2f", (a-b)/n}'),/" >>"$OUT"
	else
		kill "$sampler"
		wait "$sampler" 2>/dev/null || true
		echo "$label $n: $out" >&2
	fi
	sleep 2 # let the closed subscribers' sockets go
}
for rep in $(seq "$REPS"); do
	for n in 1000 10000; do
		echo "rep $rep n $n $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		run base chronoq-ws 25177 "$n"
		run new chronoq-ws 25277 "$n"
		run new-pub-interval-10ms chronoq-ws 25377 "$n"
		run centrifugo centrifugo 25477 "$n" --token bench-key
	done
done
