#!/usr/bin/env bash
# Starts (or stops) the queue servers chronoq is compared with, each bound
# to 127.0.0.1 on its own port, with data in a scratch directory and the
# same durability as chronoq's default (fdatasync before every OK) where
# the peer allows it:
#
#   beanstalkd        -b DIR -f0 (binlog, fsync after every write)  :11310
#   beanstalkd-mem    no binlog (the in-memory reference)            :11311
#   redis             appendonly yes, appendfsync always              :16379
#   nats              JetStream file storage, sync_interval: always   :14222
#   rabbitmq          quorum queues (fsync before confirms)           :15673
#
# Usage:
#   bench/peers.sh [start] [PEER...]   install what is missing, start (default: all)
#   bench/peers.sh stop                stop every peer this script started (by PID)
#   bench/peers.sh status
#
# With a peer up, drive it with the bench's own command (the peers' client
# libraries live only there, not in the chronoq binary), e.g.
#   go run ./cmd/chronoq-bench --target redis --addr 127.0.0.1:16379 --scenario put
#
# Environment: BENCH_DIR (scratch, default /tmp/chronoq-bench), BENCH_BIN
# (binaries built here, default ~/.cache/chronoq-bench/bin), and the ports
# BEANSTALKD_PORT BEANSTALKD_MEM_PORT REDIS_PORT NATS_PORT RABBITMQ_PORT.
#
# Packages come from Debian (apt-get). One exception: Debian 12 ships
# nats-server 2.9, which lacks sync_interval (JetStream then fsyncs only
# every two minutes), so when the installed nats-server rejects it a
# current one is built with `go install github.com/nats-io/nats-server/v2`.
set -euo pipefail

BENCH_DIR=${BENCH_DIR:-/tmp/chronoq-bench}
BENCH_BIN=${BENCH_BIN:-$HOME/.cache/chronoq-bench/bin}
BEANSTALKD_PORT=${BEANSTALKD_PORT:-11310}
BEANSTALKD_MEM_PORT=${BEANSTALKD_MEM_PORT:-11311}
REDIS_PORT=${REDIS_PORT:-16379}
NATS_PORT=${NATS_PORT:-14222}
RABBITMQ_PORT=${RABBITMQ_PORT:-15673}
PIDS=$BENCH_DIR/pids
ALL_PEERS="beanstalkd beanstalkd-mem redis nats rabbitmq"

log() { echo "peers: $*" >&2; }

# wait_port PORT SECONDS: until something accepts on 127.0.0.1:PORT.
wait_port() {
	local port=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}

running() { [[ -f $PIDS/$1 ]] && kill -0 "$(cat "$PIDS/$1")" 2>/dev/null; }

apt_install() { # apt_install CMD PACKAGE
	command -v "$1" >/dev/null && return 0
	log "installing $2"
	if [[ ! -f $BENCH_DIR/.apt-updated ]]; then apt-get update -qq && touch "$BENCH_DIR/.apt-updated"; fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

# spawn NAME LOG CMD...: start CMD in the background, remember its PID.
spawn() {
	local name=$1 logf=$2
	shift 2
	"$@" >"$logf" 2>&1 &
	echo $! >"$PIDS/$name"
}

start_beanstalkd() {
	apt_install beanstalkd beanstalkd
	local d=$BENCH_DIR/beanstalkd
	rm -rf "$d" && mkdir -p "$d/binlog"
	running beanstalkd || spawn beanstalkd "$d/log" beanstalkd -l 127.0.0.1 -p "$BEANSTALKD_PORT" -b "$d/binlog" -f0
	wait_port "$BEANSTALKD_PORT" 10 || { log "beanstalkd did not start:"; cat "$d/log" >&2; return 1; }
	log "beanstalkd (binlog, -f0) on 127.0.0.1:$BEANSTALKD_PORT"
}

start_beanstalkd_mem() {
	apt_install beanstalkd beanstalkd
	local d=$BENCH_DIR/beanstalkd-mem
	mkdir -p "$d"
	running beanstalkd-mem || spawn beanstalkd-mem "$d/log" beanstalkd -l 127.0.0.1 -p "$BEANSTALKD_MEM_PORT"
	wait_port "$BEANSTALKD_MEM_PORT" 10 || { log "beanstalkd-mem did not start:"; cat "$d/log" >&2; return 1; }
	log "beanstalkd (no binlog) on 127.0.0.1:$BEANSTALKD_MEM_PORT"
}

start_redis() {
	apt_install redis-server redis-server
	local d=$BENCH_DIR/redis
	rm -rf "$d" && mkdir -p "$d"
	running redis || spawn redis "$d/log" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$d" \
		--appendonly yes --appendfsync always --save "" --daemonize no --protected-mode yes
	wait_port "$REDIS_PORT" 10 || { log "redis did not start:"; cat "$d/log" >&2; return 1; }
	log "redis (appendonly yes, appendfsync always) on 127.0.0.1:$REDIS_PORT"
}

nats_binary() {
	apt_install nats-server nats-server
	local conf=$BENCH_DIR/nats/test.conf
	printf 'jetstream {\n  store_dir: "%s"\n  sync_interval: always\n}\n' "$BENCH_DIR/nats/test-js" >"$conf"
	if nats-server -c "$conf" -t >/dev/null 2>&1; then
		command -v nats-server
		return
	fi
	if [[ ! -x $BENCH_BIN/nats-server ]]; then
		log "the Debian nats-server ($(nats-server --version)) lacks sync_interval; building a current one into $BENCH_BIN"
		mkdir -p "$BENCH_BIN"
		(cd /tmp && GOBIN=$BENCH_BIN GOFLAGS=-mod=mod go install github.com/nats-io/nats-server/v2@latest) >&2
	fi
	echo "$BENCH_BIN/nats-server"
}

start_nats() {
	local d=$BENCH_DIR/nats
	rm -rf "$d" && mkdir -p "$d"
	local bin
	bin=$(nats_binary)
	cat >"$d/nats.conf" <<-EOF
		listen: 127.0.0.1:$NATS_PORT
		jetstream {
		  store_dir: "$d/js"
		  sync_interval: always
		}
	EOF
	running nats || spawn nats "$d/log" "$bin" -c "$d/nats.conf"
	wait_port "$NATS_PORT" 20 || { log "nats did not start:"; cat "$d/log" >&2; return 1; }
	log "nats $("$bin" --version) (JetStream, file storage, sync_interval: always) on 127.0.0.1:$NATS_PORT"
}

start_rabbitmq() {
	apt_install rabbitmq-server rabbitmq-server
	local d=$BENCH_DIR/rabbitmq
	rm -rf "$d" && mkdir -p "$d/mnesia" "$d/log" "$d/home"
	# our own epmd (bound to loopback), so stop can end it by PID
	if ! running rabbitmq-epmd; then
		spawn rabbitmq-epmd "$d/epmd.log" env ERL_EPMD_ADDRESS=127.0.0.1 epmd -port 4369
		wait_port 4369 10 || log "epmd: port 4369 not answering (another epmd may be running; rabbit will use it)"
	fi
	cat >"$d/rabbitmq.conf" <<-EOF
		listeners.tcp.1 = 127.0.0.1:$RABBITMQ_PORT
		loopback_users.guest = true
		log.console = false
	EOF
	if ! running rabbitmq; then
		spawn rabbitmq "$d/log/startup.log" env HOME="$d/home" ERL_EPMD_ADDRESS=127.0.0.1 \
			RABBITMQ_NODENAME=chronoqbench@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
			RABBITMQ_NODE_PORT="$RABBITMQ_PORT" RABBITMQ_DIST_PORT=$((RABBITMQ_PORT + 20000)) \
			RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_MNESIA_BASE="$d/mnesia" \
			RABBITMQ_LOG_BASE="$d/log" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
			RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
			/usr/lib/rabbitmq/bin/rabbitmq-server
	fi
	wait_port "$RABBITMQ_PORT" 120 || { log "rabbitmq did not start:"; tail -20 "$d/log/startup.log" >&2; return 1; }
	log "rabbitmq (quorum queues) on 127.0.0.1:$RABBITMQ_PORT"
}

# kill_tree PID: its descendants (found by parent PID), then itself; the
# rabbitmq-server script, for one, runs beam.smp as a child.
kill_tree() {
	local pid=$1 child
	for child in $(pgrep -P "$pid" 2>/dev/null); do kill_tree "$child"; done
	kill -0 "$pid" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
}

stop_all() {
	local f pid
	[[ -d $PIDS ]] || return 0
	for f in "$PIDS"/*; do
		[[ -f $f ]] || continue
		pid=$(cat "$f")
		if kill -0 "$pid" 2>/dev/null; then
			kill_tree "$pid"
			log "stopped $(basename "$f") (pid $pid)"
		fi
		rm -f "$f"
	done
}

status() {
	local f
	for f in "$PIDS"/*; do
		[[ -f $f ]] || continue
		if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$(basename "$f") running (pid $(cat "$f"))"; else echo "$(basename "$f") dead"; fi
	done
}

mkdir -p "$BENCH_DIR" "$PIDS"
cmd=${1:-start}
case $cmd in
start | stop | status) shift || true ;;
*) cmd=start ;;
esac
case $cmd in
stop) stop_all ;;
status) status ;;
start)
	peers=${*:-$ALL_PEERS}
	for p in $peers; do
		case $p in
		beanstalkd) start_beanstalkd ;;
		beanstalkd-mem) start_beanstalkd_mem ;;
		redis) start_redis ;;
		nats) start_nats ;;
		rabbitmq) start_rabbitmq ;;
		*) log "unknown peer $p (want: $ALL_PEERS)"; exit 2 ;;
		esac
	done
	;;
esac
