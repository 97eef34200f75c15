#!/usr/bin/env bash
# TLS against plain HTTP put throughput, alternating runs against two
# identical servers (one with --tls-cert), and the server CPU per put read
# from /proc/<pid>/stat. Usage: test/ops/tls_bench.sh [SECONDS] [ROUNDS] [SYNC]
# A measurement for docs/operations.md, not a check.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
secs=${1:-8}; rounds=${2:-2}; sync=${3:-always}
tmp=$(mktemp -d)
plain_pid=; tls_pid=
trap 'kill $plain_pid $tls_pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/chronoq" ./cmd/chronoq
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
  -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$tmp/srv.key" -out "$tmp/srv.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$tmp/ext"
openssl x509 -req -in "$tmp/srv.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial -days 1 \
  -extfile "$tmp/ext" -out "$tmp/srv.pem" 2>/dev/null

"$tmp/chronoq" serve --data "$tmp/plain" --http 127.0.0.1:17777 --admin "" --beanstalk "" --sync "$sync" 2>"$tmp/plain.log" &
plain_pid=$!
"$tmp/chronoq" serve --data "$tmp/tls" --http 127.0.0.1:17787 --admin "" --beanstalk "" --sync "$sync" \
  --tls-cert "$tmp/srv.pem" --tls-key "$tmp/srv.key" 2>"$tmp/tls.log" &
tls_pid=$!
sleep 1

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }  # utime+stime, clock ticks
hz=$(getconf CLK_TCK)
run() { # name pid addr
  local before after out ops
  before=$(cpu "$2")
  out=$(SSL_CERT_FILE="$tmp/ca.pem" "$tmp/chronoq" bench --target chronoq-http --addr "$3" --scenario put \
    --conns 32 --duration "${secs}s" --json)
  after=$(cpu "$2")
  ops=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("jobs", d.get("ops", 0)), d.get("throughput", d.get("jobs_per_sec", 0)), d.get("p50_ms", ""), d.get("p99_ms", ""))')
  echo "$1 $ops cpu_ticks=$((after-before)) hz=$hz"
  printf '%s\n' "$out" > "$tmp/last.json"
}
for r in $(seq "$rounds"); do
  run plain "$plain_pid" 127.0.0.1:17777
  run tls "$tls_pid" https://127.0.0.1:17787
done
echo "last JSON:"; cat "$tmp/last.json"
