#!/usr/bin/env bash
# run.sh starts the dev stack in the foreground from built binaries in bin/
# (make run builds them first). Ctrl-C or SIGTERM stops every tier; data
# stays in SLIP_DATA_DIR for the next start.
set -euo pipefail

export SLIP_DATA_DIR="${SLIP_DATA_DIR:-.data}"
export SLIP_CORE_ADDR="${SLIP_CORE_ADDR:-127.0.0.1:8081}"
export SLIP_EDGE_ADDR="${SLIP_EDGE_ADDR:-127.0.0.1:8080}"
export SLIP_KAFKA_ADDR="${SLIP_KAFKA_ADDR:-127.0.0.1:9092}"
# SLIP_DEV_CLICKHOUSE=cluster runs the ledger on a ClickHouse cluster on
# loopback: two replicas of one shard and a ZooKeeper (bin/clickhouse starts
# each again when it dies), the usage tier writing to either replica.
if [ "${SLIP_DEV_CLICKHOUSE:-}" = cluster ]; then
	export SLIP_CLICKHOUSE_CLUSTER="${SLIP_CLICKHOUSE_CLUSTER:-slip}"
	export SLIP_CLICKHOUSE_ADDR="${SLIP_CLICKHOUSE_ADDR:-127.0.0.1:9000,127.0.0.1:9001}"
	export SLIP_CLICKHOUSE_HTTP_ADDR="${SLIP_CLICKHOUSE_HTTP_ADDR:-127.0.0.1:8123,127.0.0.1:8124}"
fi
export SLIP_CLICKHOUSE_ADDR="${SLIP_CLICKHOUSE_ADDR:-127.0.0.1:9000}"
export SLIP_CLICKHOUSE_HTTP_ADDR="${SLIP_CLICKHOUSE_HTTP_ADDR:-127.0.0.1:8123}"
export SLIP_USAGE_ADDR="${SLIP_USAGE_ADDR:-127.0.0.1:8084}"
export SLIP_DISPATCHER_ADDR="${SLIP_DISPATCHER_ADDR:-127.0.0.1:8083}"
export SLIP_ADMIN_ADDR="${SLIP_ADMIN_ADDR:-127.0.0.1:8085}"
# The edge's access log goes to a file, not the terminal the tiers log to.
export SLIP_EDGE_ACCESS_LOG="${SLIP_EDGE_ACCESS_LOG:-$SLIP_DATA_DIR/edge-access.log}"
mkdir -p "$SLIP_DATA_DIR"
chmod 700 "$SLIP_DATA_DIR"

# Dev secrets are made once per data dir and kept there, so a restart finds
# the secrets its stored data was sealed with. Production sets them itself.
secrets="$SLIP_DATA_DIR/dev-secrets.env"
if [ ! -f "$secrets" ]; then
	rnd() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
	(umask 077; printf 'SLIP_EDGE_TOKEN=%s\nSLIP_MASTER_KEY=%s\n' "$(rnd)" "$(rnd)" >"$secrets")
fi
# The admin API's bootstrap token, added to a data dir made before it.
if ! grep -q '^SLIP_ADMIN_TOKEN=' "$secrets"; then
	(umask 077; printf 'SLIP_ADMIN_TOKEN=%s\n' "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >>"$secrets")
fi
while IFS='=' read -r name value; do
	[ -n "${!name:-}" ] || export "$name=$value"
done <"$secrets"

pids=()
# stop_all stops the tiers in the reverse order of their start: the edge
# drains while core still answers, and core finishes before the broker.
stop_all() {
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		# Until it is gone: a wait can return early here. A SIGTERM to
		# make's process group reaches this script twice (make forwards its
		# own), and then now and then every tier was stopped at once.
		while kill -0 "${pids[i]}" 2>/dev/null; do
			wait "${pids[i]}" 2>/dev/null || true
		done
	done
}
stop() {
	trap "" INT TERM # a second signal must not leave tiers running
	echo "stack: stopping" >&2
	stop_all
	exit 0
}
trap stop INT TERM

# alive: every tier is running (an exited, unreaped tier is a zombie, which
# kill -0 would still find).
alive() {
	local p state
	for p in "${pids[@]}"; do
		state=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null) || return 1
		[ -n "$state" ] && [ "$state" != Z ] || return 1
	done
}

# wait_ready URL: poll until URL answers 200, or fail when a tier died.
wait_ready() {
	for _ in $(seq 1 200); do
		curl -fsS --max-time 1 "$1" >/dev/null 2>&1 && return 0
		alive || return 1
		sleep 0.1
	done
	return 1
}

# fail stops the stack when a tier does not come up.
fail() {
	echo "stack: $1 did not start; stopping" >&2
	stop_all
	exit 1
}

# wait_tcp HOST:PORT: poll until it accepts connections, or fail when a tier
# died.
wait_tcp() {
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null && return 0
		alive || return 1
		sleep 0.1
	done
	return 1
}

# tier PROGRAM runs a tier in a session of its own (setsid), so a Ctrl-C at
# the terminal reaches this script only and stop_all stops the tiers in
# order (without it every tier, the broker too, would get SIGINT at once),
# and with SIGTERM as its parent-death signal, so a tier does not outlive
# this script when it is killed.
tier() { setsid setpriv --pdeathsig TERM "$@" & }

# start NAME URL: run bin/NAME and wait until URL answers 200.
start() {
	tier "bin/$1"
	pids+=($!)
	wait_ready "$2" || fail "$1"
}

# The broker first: every later tier may talk to it.
tier bin/broker
pids+=($!)
wait_tcp "${SLIP_KAFKA_ADDR%%,*}" || fail broker

# ClickHouse holds the usage ledger: Debian's clickhouse-server, installed
# here when missing (as root), with its data under SLIP_DATA_DIR.
if [ ! -x "${SLIP_CLICKHOUSE_BIN:-/usr/sbin/clickhouse-server}" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		# A fresh machine's package lists may be empty: update them first.
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clickhouse-server clickhouse-client >&2 || fail clickhouse
	else
		echo "stack: install clickhouse-server (apt-get install clickhouse-server clickhouse-client)" >&2
		fail clickhouse
	fi
fi
if [ -n "${SLIP_CLICKHOUSE_CLUSTER:-}" ] && [ ! -e /usr/share/java/zookeeper.jar ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >&2 || fail clickhouse
	else
		echo "stack: install zookeeper (apt-get install zookeeper)" >&2
		fail clickhouse
	fi
fi
# Every replica answers /ping (one server: the one).
tier bin/clickhouse
pids+=($!)
for http in ${SLIP_CLICKHOUSE_HTTP_ADDR//,/ }; do
	wait_ready "http://$http/ping" || fail clickhouse
done

# SLIP_DEV_BANKS=fake runs core's real bank connectors (SLIP_BANK
# 014=scb,*=kbank) against local fakes of KBank, SCB and RDCW over TLS with
# client certificates (bin/bankfake; the slips they know: README, "Bank
# connectors").
if [ "${SLIP_DEV_BANKS:-}" = fake ]; then
	rm -f "$SLIP_DATA_DIR/bankfake.env"
	tier bin/bankfake -dir "$SLIP_DATA_DIR/bankfake" -env "$SLIP_DATA_DIR/bankfake.env"
	pids+=($!)
	for _ in $(seq 1 100); do
		[ -s "$SLIP_DATA_DIR/bankfake.env" ] && break
		alive || fail bankfake
		sleep 0.1
	done
	[ -s "$SLIP_DATA_DIR/bankfake.env" ] || fail bankfake
	set -a
	. "$SLIP_DATA_DIR/bankfake.env"
	set +a
fi
start core "http://$SLIP_CORE_ADDR/health"
start usage "http://$SLIP_USAGE_ADDR/health"
start dispatcher "http://$SLIP_DISPATCHER_ADDR/health"
start edge "http://$SLIP_EDGE_ADDR/health"
echo "stack: ready on http://$SLIP_EDGE_ADDR (access log: $SLIP_EDGE_ACCESS_LOG)" >&2
[ "$SLIP_ADMIN_ADDR" = off ] || echo "stack: admin API on http://$SLIP_ADMIN_ADDR/admin/v1 (bin/slipadm; token: SLIP_ADMIN_TOKEN in $secrets)" >&2

# A tier that exits on its own stops the stack.
set +e
wait -n "${pids[@]}"
rc=$?
echo "stack: a tier exited ($rc); stopping the rest" >&2
stop_all
exit "$rc"
