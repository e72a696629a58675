#!/usr/bin/env bash
# run.sh starts the dev stack in the foreground from built binaries in bin/
# (make run builds them first). Ctrl-C or SIGTERM stops every tier; data
# stays in SLIP_DATA_DIR for the next start.
set -euo pipefail

export SLIP_DATA_DIR="${SLIP_DATA_DIR:-.data}"
# SLIP_STORE=postgres runs core on several nodes: a PostgreSQL primary and
# its synchronous standby on loopback (SLIP_POSTGRES_ADDR), one core per
# address of SLIP_CORE_ADDR (each started again when it exits), the edge
# balancing across them.
if [ -n "${SLIP_STORE:-}" ]; then
	if [ "$SLIP_STORE" != postgres ]; then
		echo "stack: SLIP_STORE=$SLIP_STORE: make run knows SLIP_STORE=postgres (or none: one core on bbolt)" >&2
		exit 2
	fi
	export SLIP_CORE_ADDR="${SLIP_CORE_ADDR:-127.0.0.1:8081,127.0.0.1:8082}"
	export SLIP_ADMIN_ADDR="${SLIP_ADMIN_ADDR:-127.0.0.1:8085,127.0.0.1:8086}"
	export SLIP_POSTGRES_ADDR="${SLIP_POSTGRES_ADDR:-127.0.0.1:5442,127.0.0.1:5443}"
	# A core without the PostgreSQL store would open one bbolt file twice.
	if ! grep -q '(SLIP_STORE)' <<<"$(bin/core -h 2>&1)"; then
		echo "stack: bin/core has no PostgreSQL store (it does not read SLIP_STORE)" >&2
		exit 2
	fi
	IFS=, read -ra core_addrs <<<"$SLIP_CORE_ADDR"
	IFS=, read -ra admin_addrs <<<"$SLIP_ADMIN_ADDR"
	if [ "$SLIP_ADMIN_ADDR" = off ]; then
		for i in "${!core_addrs[@]}"; do admin_addrs[i]=off; done
	elif [ ${#admin_addrs[@]} != ${#core_addrs[@]} ]; then
		echo "stack: SLIP_ADMIN_ADDR lists ${#admin_addrs[@]} addresses for ${#core_addrs[@]} cores (SLIP_CORE_ADDR): one per core, or off" >&2
		exit 2
	fi
fi
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
# Without SLIP_STORE: one core, on bbolt.
[ -n "${SLIP_STORE:-}" ] || { core_addrs=("$SLIP_CORE_ADDR"); admin_addrs=("$SLIP_ADMIN_ADDR"); }
store_env=()
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
# The password of core's PostgreSQL role, likewise.
if [ -n "${SLIP_STORE:-}" ] && ! grep -q '^SLIP_POSTGRES_PASSWORD=' "$secrets"; then
	(umask 077; printf 'SLIP_POSTGRES_PASSWORD=%s\n' "$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >>"$secrets")
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
	[ -z "${napping:-}" ] || kill "$napping" 2>/dev/null # the wait before a core starts again
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

# start NAME URL [VAR=value...]: run bin/NAME (with the settings given) and
# wait until URL answers 200.
start() {
	tier env "${@:3}" "bin/$1"
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

# PostgreSQL (SLIP_STORE=postgres) keeps core's state: Debian's
# postgresql-15, installed here when missing (as root), a primary and a
# standby whose every commit the primary waits for (synchronous_commit=on,
# synchronous_standby_names), both under SLIP_DATA_DIR/postgres. PostgreSQL
# refuses to run as root: run as root, this script runs it as the postgres
# user the package makes, lets that user's group through SLIP_DATA_DIR and
# gives it SLIP_DATA_DIR/postgres. The primary is made with initdb and the
# standby copied from it with pg_basebackup once; later starts keep both.
# Over TCP both take core's role, slip, with SLIP_POSTGRES_PASSWORD
# (dev-secrets.env); the standby replicates over the primary's socket.
if [ -n "${SLIP_STORE:-}" ]; then
	pg_bin=/usr/lib/postgresql/15/bin
	if [ ! -x "$pg_bin/postgres" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >&2 || fail postgres
		else
			echo "stack: install postgresql-15 (apt-get install postgresql-15)" >&2
			fail postgres
		fi
	fi
	IFS=, read -r pg_primary pg_standby <<<"$SLIP_POSTGRES_ADDR"
	if [ -z "$pg_standby" ]; then
		echo "stack: SLIP_POSTGRES_ADDR=$SLIP_POSTGRES_ADDR: the primary's and the standby's host:port, comma-separated" >&2
		fail postgres
	fi
	pg_dir="$(cd "$SLIP_DATA_DIR" && pwd)/postgres"
	mkdir -p "$pg_dir"
	as_pg=() # setpriv's options that run a program as PostgreSQL's user
	if [ "$(id -u)" = 0 ]; then
		as_pg=(--reuid=postgres --regid=postgres --init-groups)
		chgrp postgres "$SLIP_DATA_DIR"
		chmod 710 "$SLIP_DATA_DIR"
		chown postgres: "$pg_dir"
	fi
	chmod 700 "$pg_dir"
	# pg PROGRAM ARGS...: one of PostgreSQL's programs, as its user.
	pg() { HOME="$pg_dir" setpriv "${as_pg[@]}" "$pg_bin/$1" "${@:2}"; }
	if ! setpriv "${as_pg[@]}" test -w "$pg_dir"; then
		echo "stack: PostgreSQL's user cannot reach $pg_dir: each directory above it must let that user through" >&2
		fail postgres
	fi
	# pg_log NAME: the end of NAME's log, where a failure says why.
	pg_log() { echo "stack: the end of $pg_dir/$1.log:" >&2; tail -n 20 "$pg_dir/$1.log" >&2; }
	# pg_server NAME HOST:PORT SETTINGS...: run a server of data dir NAME.
	pg_server() {
		# SIGINT if this script dies: PostgreSQL's fast shutdown, which ends
		# the sessions of cores dying beside it (SIGTERM waits for them).
		setsid setpriv --pdeathsig INT "${as_pg[@]}" "$pg_bin/postgres" -D "$pg_dir/$1" -p "${2##*:}" -k "$pg_dir" \
			-c listen_addresses="${2%:*}" -c cluster_name="$1" "${@:3}" >>"$pg_dir/$1.log" 2>&1 &
		pids+=($!)
		for _ in $(seq 1 600); do
			"$pg_bin/pg_isready" -q -U postgres -h "$pg_dir" -p "${2##*:}" && return 0
			alive || break
			sleep 0.1
		done
		pg_log "$1"
		fail postgres
	}
	# psql_primary ARGS...: psql as PostgreSQL's superuser over the
	# primary's socket (SQL from stdin, or -c); its commits do not wait for
	# the standby, which may not be there yet.
	psql_primary() { PGOPTIONS="-c synchronous_commit=local" "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$pg_dir" -p "${pg_primary##*:}" -U postgres -d postgres "$@"; }
	if [ ! -f "$pg_dir/primary/PG_VERSION" ]; then
		echo "stack: making PostgreSQL's primary in $pg_dir/primary" >&2
		rm -rf "$pg_dir/primary.new"
		pg initdb -D "$pg_dir/primary.new" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
			--locale=C -E UTF8 >"$pg_dir/primary.log" 2>&1 || { pg_log primary; fail postgres; }
		mv "$pg_dir/primary.new" "$pg_dir/primary"
	fi
	pg_server primary "$pg_primary" -c synchronous_standby_names=standby -c synchronous_commit=on
	psql_primary <<-EOF || fail postgres
		\set pw '$SLIP_POSTGRES_PASSWORD'
		SELECT 'CREATE ROLE slip LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'slip') \gexec
		ALTER ROLE slip PASSWORD :'pw';
		SELECT 'CREATE DATABASE slip OWNER slip' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'slip') \gexec
	EOF
	if [ ! -f "$pg_dir/standby/standby.signal" ]; then
		echo "stack: copying PostgreSQL's standby from the primary into $pg_dir/standby" >&2
		rm -rf "$pg_dir/standby.new"
		pg pg_basebackup -h "$pg_dir" -p "${pg_primary##*:}" -U postgres -D "$pg_dir/standby.new" -R -X stream -c fast \
			>"$pg_dir/standby.log" 2>&1 || { pg_log standby; fail postgres; }
		mv "$pg_dir/standby.new" "$pg_dir/standby"
	fi
	pg_server standby "$pg_standby"
	# Ready once the primary counts the standby as synchronous: before,
	# every commit would wait.
	synchronous() { [ "$(psql_primary -tA -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")" = sync ]; }
	for _ in $(seq 1 200); do
		synchronous && break
		alive || break
		sleep 0.1
	done
	synchronous || { pg_log standby; fail postgres; }
	echo "stack: PostgreSQL on $pg_primary, its synchronous standby on $pg_standby (data: $pg_dir)" >&2
	# What the cores, and only they, are given: a URL of both servers, with
	# which a core finds the one that takes writes.
	store_env=("SLIP_STORE=postgres://slip:$SLIP_POSTGRES_PASSWORD@$pg_primary,$pg_standby/slip?sslmode=disable&target_session_attrs=read-write")
fi

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
# The cores, one after another (a core on PostgreSQL brings its schema up
# to date at start); the edge balances across them and usage asks the
# first for its counters.
core_at=() # each core's index in pids
for i in "${!core_addrs[@]}"; do
	core_at+=(${#pids[@]})
	start core "http://${core_addrs[i]}/health" SLIP_CORE_ADDR="${core_addrs[i]}" SLIP_ADMIN_ADDR="${admin_addrs[i]}" "${store_env[@]}"
done
start usage "http://$SLIP_USAGE_ADDR/health" SLIP_CORE_ADDR="${core_addrs[0]}"
start dispatcher "http://$SLIP_DISPATCHER_ADDR/health"
start edge "http://$SLIP_EDGE_ADDR/health"
if [ -n "${SLIP_STORE:-}" ]; then
	list=""
	for i in "${!core_addrs[@]}"; do list+="${list:+, }${core_addrs[i]} (pid ${pids[core_at[i]]})"; done
	echo "stack: ${#core_addrs[@]} cores on PostgreSQL: $list; a core that exits is started again" >&2
fi
echo "stack: ready on http://$SLIP_EDGE_ADDR (access log: $SLIP_EDGE_ACCESS_LOG)" >&2
[ "$SLIP_ADMIN_ADDR" = off ] || echo "stack: admin API on $(printf 'http://%s/admin/v1 ' "${admin_addrs[@]}")(bin/slipadm; token: SLIP_ADMIN_TOKEN in $secrets)" >&2

# A tier that exits on its own stops the stack; with SLIP_STORE a core is
# started again instead, as a supervisor would: after 1 s, twice as long
# each time it exits again within a minute of its start, up to 30 s.
set +e
since=() # when each core started (SECONDS)
delay=() # each core's last wait before a start again
while :; do
	wait -n -p gone "${pids[@]}" 2>/dev/null # the line below says it, not bash's "Killed"
	rc=$?
	j=""
	if [ -n "${SLIP_STORE:-}" ]; then
		for i in "${!core_at[@]}"; do
			[ "${pids[core_at[i]]}" = "$gone" ] && j=$i
		done
	fi
	if [ -z "$j" ]; then
		echo "stack: a tier exited ($rc); stopping the rest" >&2
		stop_all
		exit "$rc"
	fi
	d=1
	if [ $((SECONDS - ${since[j]:-0})) -lt 60 ] && [ -n "${delay[j]:-}" ]; then
		d=$((delay[j] * 2 > 30 ? 30 : delay[j] * 2))
	fi
	delay[j]=$d
	echo "stack: core on ${core_addrs[j]} exited ($rc); starting it again in ${d}s" >&2
	sleep "$d" >/dev/null 2>&1 &
	napping=$!
	wait "$napping"
	napping=""
	tier env SLIP_CORE_ADDR="${core_addrs[j]}" SLIP_ADMIN_ADDR="${admin_addrs[j]}" "${store_env[@]}" bin/core
	pids[core_at[j]]=$!
	since[j]=$SECONDS
	if wait_ready "http://${core_addrs[j]}/health"; then
		echo "stack: core on ${core_addrs[j]} is back (pid ${pids[core_at[j]]})" >&2
	fi
done
