#!/usr/bin/env bash
# Where a server's CPU per operation goes, kernel included: the table in
# docs/benchmarks.md, "Where a durable put's CPU goes". For each target in
# turn (alternating, REPS times) a fresh server is started and driven by
# `chronoq-bench --scenario SCENARIO --conns CONNS` twice: a 10 s run that
# gives the server CPU per operation (server_cpu_us_per_op), then a 12 s
# run during which, 3 s in, `perf stat` counts the server's system calls
# for 2 s and `perf record -g -p PID` then samples it for 5 s (cpu-clock,
# kernel stacks). Each system call family's inclusive share of the
# samples, taken at its kernel entry point, is multiplied by the first
# run's CPU per operation; the counts are divided by the operations the
# second run did in that time.
#
#   bench/perf-breakdown.sh [REPS (2)] [SCENARIO (put)] [CONNS (64)] [TARGETS]
#
# TARGETS (default "chronoq-beanstalk beanstalkd") are chronoq-bench
# targets: chronoq-beanstalk, chronoq-http and chronoq-ws run this tree's
# chronoq (built here; first warmed for 12 s, so its log writes into
# prepared, zero-filled segments as a busy server's does), beanstalkd runs
# the system's beanstalkd without a binlog.
#
# Needs perf (Debian: linux-perf) allowed to trace the server: root, or
# kernel.perf_event_paranoid <= 1 and the tracepoints readable.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
REPS=${1:-2} SC=${2:-put} N=${3:-64} TARGETS=${4:-chronoq-beanstalk beanstalkd}
command -v perf >/dev/null || { echo "perf not found (Debian: apt install linux-perf)" >&2; exit 1; }
D=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
go build -o "$D/chronoq" ./cmd/chronoq
go build -o "$D/chronoq-bench" ./cmd/chronoq-bench
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

run() { # target rep
	local tg=$1 rep=$2 addr
	rm -rf "$D/data"
	if [[ $tg == beanstalkd ]]; then
		beanstalkd -l 127.0.0.1 -p 22311 &
		pid=$! addr=127.0.0.1:22311
	else
		"$D/chronoq" serve --data "$D/data" --http 127.0.0.1:22377 --admin 127.0.0.1:22378 \
			--beanstalk 127.0.0.1:22320 >"$D/server.log" 2>&1 &
		pid=$!
		addr=127.0.0.1:22377
		[[ $tg == chronoq-beanstalk ]] && addr=127.0.0.1:22320
	fi
	wait_port "${addr##*:}" || { echo "$tg: nothing listens on $addr" >&2; exit 1; }
	if [[ $tg != beanstalkd ]]; then
		"$D/chronoq-bench" --target "$tg" --addr "$addr" --scenario put --conns 64 --duration 12s \
			--payload 100 --json >/dev/null
	fi
	# CPU per operation from a run nobody traces (tracing slows system
	# calls), the shares from the traced run after it
	"$D/chronoq-bench" --target "$tg" --addr "$addr" --scenario "$SC" --conns "$N" --duration 10s \
		--payload 100 --json >"$D/run.json"
	"$D/chronoq-bench" --target "$tg" --addr "$addr" --scenario "$SC" --conns "$N" --duration 12s \
		--payload 100 --json >"$D/traced.json" &
	local bench=$!
	sleep 3
	perf stat -x, -p "$pid" -e 'syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_fdatasync,syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,context-switches' \
		-o "$D/stat.csv" -- sleep 2 >/dev/null 2>&1
	perf record -q -g -p "$pid" -o "$D/perf.data" -- sleep 5 >/dev/null 2>&1
	wait $bench
	kill $pid
	wait $pid 2>/dev/null || true
	pid=
	perf report -i "$D/perf.data" --children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' >"$D/report.txt"
	python3 - "$tg" "$rep" "$D/run.json" "$D/traced.json" "$D/report.txt" "$D/stat.csv" >>"$D/rows.jsonl" <<'EOF'
import json, re, sys
tg, rep, run, traced, report, stat = sys.argv[1:]
r = json.load(open(run))
rt = json.load(open(traced))
cpu = r["server_cpu_us_per_op"]
share = {}
for line in open(report):
    m = re.match(r"\s+([\d.]+)%\s+[\d.]+%\s+\[.\]\s+(\S+)", line)
    if m:
        share.setdefault(m.group(2), float(m.group(1)))
fam = {
    "write(2)": ["ksys_write"],
    "read(2)": ["ksys_read"],
    "epoll": ["do_epoll_wait", "__x64_sys_epoll_ctl"],
    "fdatasync(2)": ["__x64_sys_fdatasync"],
    "pwrite(2)": ["__x64_sys_pwrite64"],
    "nanosleep(2)": ["__x64_sys_nanosleep"],
    "futex(2)": ["__x64_sys_futex"],
}
us = {k: sum(share.get(s, 0) for s in v) / 100 * cpu for k, v in fam.items()}
us["everything else"] = cpu - sum(us.values())
counts = {}
for line in open(stat):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        counts[f[2]] = float(f[0]) / 2 / rt["jobs_per_sec"]
print(json.dumps({"target": tg, "rep": int(rep), "jobs_per_sec": r["jobs_per_sec"],
                  "server_cpu_us_per_op": cpu, "us_per_op": us, "per_op": counts}))
EOF
	echo "$tg rep $rep: $(tail -1 "$D/rows.jsonl" | cut -c1-120)..." >&2
}

for rep in $(seq "$REPS"); do
	for tg in $TARGETS; do run "$tg" "$rep"; done
done
python3 - "$D/rows.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
targets = list(dict.fromkeys(r["target"] for r in rows))
def cell(t, f):
    return " / ".join(f"{f(r):.1f}" for r in rows if r["target"] == t)
print("| µs of server CPU per operation (one value per repetition) | " + " | ".join(targets) + " |")
print("|---|" + "---:|" * len(targets))
for k in rows[0]["us_per_op"]:
    print(f"| {k} | " + " | ".join(cell(t, lambda r: r["us_per_op"][k]) for t in targets) + " |")
print("| **total** | " + " | ".join(cell(t, lambda r: r["server_cpu_us_per_op"]) for t in targets) + " |")
print()
print("| per operation (perf stat, 2 s) | " + " | ".join(targets) + " |")
print("|---|" + "---:|" * len(targets))
names = list(dict.fromkeys(k for r in rows for k in r["per_op"]))
for k in names:
    print(f"| {k} | " + " | ".join(" / ".join(f"{r['per_op'].get(k, 0):.2f}" for r in rows if r["target"] == t) for t in targets) + " |")
EOF
