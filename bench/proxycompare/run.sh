#!/usr/bin/env bash
# proxycompare: throughput and latency of the edge against a bare fasthttp
# proxy and nginx, all in front of the same trivial upstream, driven by wrk.
#
#   bench/proxycompare/run.sh
#
# Targets (all POST /v2/verify/bank with the same body):
#   a  edge, Authorization: Bearer <key>, rate limited   (lua/bearer.lua)
#   b  edge, signed request (spec 5.2), fresh nonces     (lua/signed.lua)
#   c  bare fasthttp reverse proxy                       (lua/bearer.lua)
#   d  nginx proxy_pass, keep-alive upstream             (lua/bearer.lua)
#   e  the upstream itself, no proxy (open-loop part only)
#
# CPU pinning (2 cores): every proxy under test runs alone on PROXY_CPUS
# (default 1) with GOMAXPROCS / worker_processes = that many cores; wrk, the
# open-loop generator and the upstream share LOAD_CPUS (default 0). Every
# target thus gets the same single core and the same load generator. The
# table shows each run's CPU use of the proxy, of the load core and of other
# users of the machine: where the load core saturates before the proxy
# (nginx, here), requests/s understate that proxy, and "req/s per proxy
# core" (requests/s / proxy CPU) is the fairer comparison. PIN=0 turns
# pinning off.
#
# Then an open-loop phase (openloop/, fixed arrival rate) at OL_FRACTION of
# the peak of (a) against (e) the upstream directly, (a), (c) and (d), and
# at OL_FRACTION of the peak of (b) against (e) and (b), OL_ROUNDS rounds
# interleaved: the edge's added latency is its p99 minus the upstream's in
# the same round, the median over the rounds where the generator kept up
# (a few stalls of the machine decide the p99 of a 10 s run; one unlucky
# round does not decide the result). Each target's CPU in that phase is
# reported too (below saturation a request costs more).
#
# Settings (environment): ROUNDS=3 DURATION=10s CONNS=64 THREADS=1
# WARMUP=3s OL_DURATION=10s OL_WARMUP=2s OL_FRACTION=0.5 (0: no open loop)
# OL_ROUNDS=3
# BASE_PORT=18180 (edge; upstream +1, bare proxy +2, nginx +3)
# LOAD_CPUS=0 PROXY_CPUS=1 PIN=1 NICE=-10 OUT=<file for the markdown table>
# SIGNED_RATE=60000 (signed.lua signs DURATION x this many requests before
# each run of (b), so that wrk sends prebuilt bytes for every target; a round
# that outran them is flagged) TARGETS="a b c d" ACCESS_LOG=1 (the edge's and nginx's access logs on,
# to files) PROFILE=1 (perf stat and perf record of every proxy:
# CPU µs, syscalls and context switches per request; the edge's functions)
#
# Needs wrk, nginx (nginx-light), taskset, curl, go; perf for PROFILE=1.
# Everything it starts is stopped on exit; results stay in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-3s}
OL_DURATION=${OL_DURATION:-10s}
OL_WARMUP=${OL_WARMUP:-2s}
OL_FRACTION=${OL_FRACTION:-0.5}
OL_ROUNDS=${OL_ROUNDS:-3}
BASE_PORT=${BASE_PORT:-18180}
LOAD_CPUS=${LOAD_CPUS:-0}
PROXY_CPUS=${PROXY_CPUS:-1}
PIN=${PIN:-1}
TARGETS=${TARGETS:-a b c d}
PROFILE=${PROFILE:-0}
SIGNED_RATE=${SIGNED_RATE:-60000}

EDGE_PORT=$BASE_PORT
UP_PORT=$((BASE_PORT + 1))
BARE_PORT=$((BASE_PORT + 2))
NGINX_PORT=$((BASE_PORT + 3))

KEY=6f1c2a9e-7b3d-4c5e-9f80-1a2b3c4d5e6f
SECRET=proxycompare-signing-secret-0123456789abcdef
TOKEN=proxycompare-edge-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export BENCH_KEY=$KEY BENCH_SECRET=$SECRET

# NICE (default -10 when root) raises the CPU weight of every bench process
# ~9x over other work, so other users of a shared machine disturb the
# comparison less; NICE=0 turns it off. With the kernel's autogroup
# scheduling (each session is one scheduling group, whose members' nice
# values count only against each other), the script re-runs itself in a
# session of its own and sets that session's autogroup nice, which ends with
# the script; otherwise it sets each process's nice.
NICE=${NICE:-$([ "$(id -u)" = 0 ] && echo -10 || echo 0)}
AUTOGROUP_NICE=0
if [ "$NICE" != 0 ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] && [ -w /proc/self/autogroup ]; then
	if [ -z "${PROXYCOMPARE_SESSION:-}" ]; then
		PROXYCOMPARE_SESSION=1 setsid "$0" "$@" &
		child=$!
		trap 'kill -TERM "$child" 2>/dev/null' INT TERM
		wait "$child" || { rc=$?; wait "$child" 2>/dev/null; exit "$rc"; }
		exit 0
	fi
	if echo "$NICE" >/proc/self/autogroup 2>/dev/null; then AUTOGROUP_NICE=1; fi
fi

need() {
	local missing=()
	for t in wrk nginx taskset curl go; do command -v "$t" >/dev/null || missing+=("$t"); done
	[ ${#missing[@]} -eq 0 ] && return
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing wrk nginx-light (missing: ${missing[*]})" >&2
		apt-get update -qq >/dev/null && apt-get install -y -qq wrk nginx-light >/dev/null
	else
		echo "missing: ${missing[*]} (apt-get install -y wrk nginx-light)" >&2
		exit 1
	fi
}
need

TMP=$(mktemp -d /tmp/proxycompare.XXXXXX)
OUT=${OUT:-$TMP/results.md}
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Command prefixes that pin to the load and the proxy cores. They are arrays,
# not functions, so a server started in the background with one is the
# background job itself ($! is its pid: taskset execs into the program) and
# the trap's kill reaches it.
PIN_LOAD=() PIN_PROXY=()
if [ "$NICE" != 0 ] && [ "$AUTOGROUP_NICE" != 1 ]; then
	PIN_LOAD=(nice -n "$NICE")
	PIN_PROXY=(nice -n "$NICE")
fi
if [ "$PIN" = 1 ]; then
	PIN_LOAD+=(taskset -c "$LOAD_CPUS")
	PIN_PROXY+=(taskset -c "$PROXY_CPUS")
fi
ncpus() { # number of CPUs in a taskset list like 0 or 1-3 or 0,2
	if [ "$PIN" != 1 ]; then nproc; return; fi
	local n=0 part
	IFS=, read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		if [[ $part == *-* ]]; then n=$((n + ${part#*-} - ${part%-*} + 1)); else n=$((n + 1)); fi
	done
	echo "$n"
}
PROXY_N=$(ncpus "$PROXY_CPUS")
LOAD_N=$(ncpus "$LOAD_CPUS")

# ---- build ------------------------------------------------------------------
echo "== build (in $TMP)" >&2
# The edge runs from a copy: bin/edge may be rebuilt while the bench runs,
# and perf needs the very binary it sampled to name its functions.
EDGE_BIN=$TMP/edge
if (cd "$ROOT" && make -s build >"$TMP/build.log" 2>&1); then
	cp "$ROOT/bin/edge" "$EDGE_BIN"
else
	echo "make build failed (see $TMP/build.log); building the edge alone" >&2
	(cd "$ROOT" && go build -o "$EDGE_BIN" ./edge/cmd/edge)
fi
(cd "$ROOT" && go build -o "$TMP/" ./bench/proxycompare/upstream ./bench/proxycompare/bareproxy ./bench/proxycompare/openloop)

# ---- start ------------------------------------------------------------------
wait_port() { # wait_port PORT NAME: until something listens on 127.0.0.1:PORT
	local i
	for i in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "$2 did not start on port $1; logs in $TMP" >&2
	exit 1
}
for p in $EDGE_PORT $UP_PORT $BARE_PORT $NGINX_PORT; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		echo "port $p is taken; set BASE_PORT" >&2
		exit 1
	fi
done

echo "== start: upstream :$UP_PORT, edge :$EDGE_PORT, bare proxy :$BARE_PORT, nginx :$NGINX_PORT" >&2
GOMAXPROCS=$LOAD_N "${PIN_LOAD[@]}" "$TMP/upstream" -addr "127.0.0.1:$UP_PORT" -key "$KEY" -secret "$SECRET" -token "$TOKEN" \
	>"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_port "$UP_PORT" upstream

# No broker here: the edge does not look for one (SLIP_KAFKA_ADDR=off; its
# auth records live their TTL, as with Kafka down). The nonce bounds are raised so a multi-second flood of signed requests from
# one branch is not refused (the default 400,000 per client would be full
# after ~10 s at 40k/s); each nonce stays in the store for its 5 minute window.
# The access log is off, as nginx's is (access_log off): ACCESS_LOG=1 turns
# both on, each to a file in the temp dir (nginx buffered, 64 KiB, as the
# edge writes in chunks).
EDGE_ACCESS=off
if [ "${ACCESS_LOG:-0}" = 1 ]; then EDGE_ACCESS=$TMP/edge-access.log; fi
GOMAXPROCS=$PROXY_N SLIP_EDGE_ADDR=127.0.0.1:$EDGE_PORT SLIP_CORE_ADDR=127.0.0.1:$UP_PORT SLIP_EDGE_TOKEN=$TOKEN SLIP_KAFKA_ADDR=off \
	SLIP_EDGE_NONCE_MAX=50000000 SLIP_EDGE_NONCE_PER_SERVICE=50000000 SLIP_EDGE_NONCE_PER_CLIENT=50000000 SLIP_EDGE_ACCESS_LOG=$EDGE_ACCESS \
	"${PIN_PROXY[@]}" "$EDGE_BIN" -metrics-addr= >"$TMP/edge.log" 2>&1 &
EDGE_PID=$!
PIDS+=("$EDGE_PID")
wait_port "$EDGE_PORT" edge

GOMAXPROCS=$PROXY_N "${PIN_PROXY[@]}" "$TMP/bareproxy" -addr "127.0.0.1:$BARE_PORT" -upstream "127.0.0.1:$UP_PORT" \
	>"$TMP/bareproxy.log" 2>&1 &
BARE_PID=$!
PIDS+=("$BARE_PID")
wait_port "$BARE_PORT" bareproxy

mkdir -p "$TMP/nginx/tmp"
NGINX_ACCESS="off"
if [ "${ACCESS_LOG:-0}" = 1 ]; then NGINX_ACCESS="$TMP/nginx/access.log buffer=64k flush=1s"; fi
sed -e "s#@PREFIX@#$TMP/nginx#g; s#@WORKERS@#$PROXY_N#; s#@LISTEN@#127.0.0.1:$NGINX_PORT#; s#@UPSTREAM@#127.0.0.1:$UP_PORT#; s#@ACCESS_LOG@#$NGINX_ACCESS#" \
	"$HERE/nginx/nginx.conf.tmpl" >"$TMP/nginx/nginx.conf"
"${PIN_PROXY[@]}" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" >"$TMP/nginx/stdout.log" 2>&1 &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_port "$NGINX_PORT" nginx

# Every target must answer 200 to the bench request before anything counts.
check() { # check NAME PORT [curl args]
	local name=$1 port=$2 code
	shift 2
	code=$(curl -s -o "$TMP/check-$name.body" -w '%{http_code}' -X POST "http://127.0.0.1:$port/v2/verify/bank" \
		-H 'Content-Type: application/json' --data '{"amount":1}' "$@")
	if [ "$code" != 200 ]; then
		echo "target $name answered $code: $(cat "$TMP/check-$name.body")" >&2
		exit 1
	fi
}
check edge "$EDGE_PORT" -H "Authorization: Bearer $KEY"
check bare "$BARE_PORT" -H "Authorization: Bearer $KEY"
check nginx "$NGINX_PORT" -H "Authorization: Bearer $KEY"
check upstream "$UP_PORT"

# ---- wrk --------------------------------------------------------------------
declare -A PORT=([a]=$EDGE_PORT [b]=$EDGE_PORT [c]=$BARE_PORT [d]=$NGINX_PORT)
declare -A SCRIPT=([a]=bearer.lua [b]=signed.lua [c]=bearer.lua [d]=bearer.lua)
declare -A LABEL=([a]="(a) edge, Bearer + rate limit" [b]="(b) edge, signed request"
	[c]="(c) bare fasthttp proxy" [d]="(d) nginx proxy_pass" [e]="(e) upstream direct")

proxy_pids() { # the processes doing target $1's proxying
	case $1 in
	a | b) echo "$EDGE_PID" ;;
	c) echo "$BARE_PID" ;;
	d) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID" || true) ;;
	e) echo "$UP_PID" ;;
	esac
}
proc_ticks() { # summed utime+stime of pids (and their threads)
	local t=0 pid
	for pid in "$@"; do
		[ -r "/proc/$pid/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
	done
	echo "$t"
}
cpu_busy_ticks() { # busy and total ticks of the CPUs in list $1 (or all)
	local list=$1
	awk -v list="$list" -v pin="$PIN" '
		BEGIN { n = split(list, parts, ","); for (i = 1; i <= n; i++) {
			if (split(parts[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; c++) want["cpu" c] = 1 } else want["cpu" parts[i]] = 1 } }
		/^cpu[0-9]/ && (pin != 1 || ($1 in want)) { tot = 0; for (i = 2; i <= 9; i++) tot += $i; busy += tot - $5 - $6; all += tot }
		END { print busy, all }' /proc/stat
}
task_ticks() { # user+nice+system+irq+softirq ticks of all CPUs (tick-based
	# accounting charges irq/softirq ticks to the interrupted process too)
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
}
to_ms() { # wrk duration (123.45us, 1.23ms, 1.02s, 2.00m) to ms
	awk -v v="$1" 'BEGIN {
		if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
		else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
		else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
		else { sub(/s$/, "", v); printf "%.3f", v * 1000 } }'
}
HZ=$(getconf CLK_TCK)

WRK_PIN=""
if [ "$PIN" = 1 ]; then WRK_PIN="taskset -c $LOAD_CPUS "; fi
WRK_CMD_A="${WRK_PIN}wrk -t$THREADS -c$CONNS -d$DURATION --latency -s lua/SCRIPT http://127.0.0.1:PORT/v2/verify/bank"
all_pids() { echo "${PIDS[@]}" $(pgrep -P "$NGINX_PID" || true); }
self_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; } # waited-for children (wrk, openloop)
pct() { awk -v a="$1" -v b="$2" -v hz="$HZ" -v s="$3" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / s }'; }
run_wrk() { # run_wrk TARGET DURATION OUTFILE [COMMAND...]: one wrk run, with
	# CPU accounting; COMMAND (a perf) runs alongside from when wrk sends
	local t=$1 d=$2 out=$3 pids p0 p1 u0 u1 o0 o1 s0 s1 l0 l1 w0 w1 a0 a1 secs pool=0 wpid winit=0 side=""
	pids=$(proxy_pids "$t")
	secs=$(awk -v d="$d" 'BEGIN { sub(/s$/, "", d); print d }')
	# signed.lua signs its requests before the run, enough for SIGNED_RATE
	# requests/s; the accounting starts once they are signed
	if [ "${SCRIPT[$t]}" = signed.lua ]; then
		pool=$(awk -v s="$secs" -v r="$SIGNED_RATE" -v n="$THREADS" 'BEGIN { printf "%d", s * r / n + 1000 }')
	fi
	rm -f "$TMP/wrk-ready"
	(cd "$HERE/lua" && BENCH_POOL=$pool BENCH_READY=$TMP/wrk-ready exec "${PIN_LOAD[@]}" wrk -t"$THREADS" -c"$CONNS" -d"$d" \
		--latency -s "${SCRIPT[$t]}" "http://127.0.0.1:${PORT[$t]}/v2/verify/bank") >"$out" 2>&1 &
	wpid=$!
	if [ "$pool" -gt 0 ]; then
		while kill -0 "$wpid" 2>/dev/null && [ "$(cat "$TMP/wrk-ready" 2>/dev/null | wc -l)" -lt "$THREADS" ]; do sleep 0.05; done
		winit=$(proc_ticks "$wpid")
	fi
	p0=$(proc_ticks $pids) u0=$(proc_ticks "$UP_PID") o0=$(proc_ticks $(all_pids)) s0=$(self_ticks)
	read -r l0 w0 < <(cpu_busy_ticks "$LOAD_CPUS")
	a0=$(task_ticks)
	if [ $# -gt 3 ]; then
		"${@:4}" &
		side=$!
	fi
	wait "$wpid" || true
	[ -z "$side" ] || wait "$side" || true
	s0=$((s0 + winit)) # wrk's signing, counted in s1 when it is reaped
	p1=$(proc_ticks $pids) u1=$(proc_ticks "$UP_PID") o1=$(proc_ticks $(all_pids)) s1=$(self_ticks)
	read -r l1 w1 < <(cpu_busy_ticks "$LOAD_CPUS")
	a1=$(task_ticks)
	{
		# CPU of the proxy, of the upstream and of every process not ours
		# (other users of the machine), each in % of one core; load cores
		# busy in % of their capacity
		echo "proxycpu=$(pct "$p0" "$p1" "$secs")"
		echo "upcpu=$(pct "$u0" "$u1" "$secs")"
		echo "othercpu=$(awk -v a0="$a0" -v a1="$a1" -v ours=$(((o1 - o0) + (s1 - s0))) -v hz="$HZ" -v s="$secs" \
			'BEGIN { x = 100 * ((a1 - a0) - ours) / hz / s; printf "%.0f", (x < 0) ? 0 : x }')"
		echo "loadbusy=$(awk -v a="$l0" -v b="$l1" -v x="$w0" -v y="$w1" 'BEGIN { printf "%.0f", (y > x) ? 100 * (b - a) / (y - x) : 0 }')"
	} >>"$out"
}
quiet() { "$@" >/dev/null 2>&1; }
parse_wrk() { # parse_wrk FILE: rps p50ms p99ms non2xx errors proxycpu loadbusy othercpu
	local f=$1 rps p50 p99 non2xx errs pc lb oc
	rps=$(awk '/^Requests\/sec:/ { print $2 }' "$f")
	p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$f")")
	p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$f")")
	non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")
	errs=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$f")
	pc=$(awk -F= '/^proxycpu=/ { print $2 }' "$f")
	lb=$(awk -F= '/^loadbusy=/ { print $2 }' "$f")
	oc=$(awk -F= '/^othercpu=/ { print $2 }' "$f")
	echo "${rps:-0} ${p50:-0} ${p99:-0} ${non2xx:-0} ${errs:-0} ${pc:-0} ${lb:-0} ${oc:-0}"
}
# median of the non-empty values ("" when none); OFMT keeps large means out
# of exponent form, which the key=value parsing would cut short
median() { printf '%s\n' "$@" | awk 'NF' | sort -g | awk -v OFMT='%.10g' '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== warm up ($WARMUP each)" >&2
for t in $TARGETS; do
	run_wrk "$t" "$WARMUP" "$TMP/warm-$t.txt"
	read -r rps _ _ non2xx errs _ _ < <(parse_wrk "$TMP/warm-$t.txt")
	echo "   $t: $rps req/s, non-2xx $non2xx, socket errors $errs" >&2
	if [ "$non2xx" != 0 ]; then
		echo "target $t answered non-2xx during warm-up; see $TMP/warm-$t.txt and $TMP/edge.log" >&2
		exit 1
	fi
done

BAD=0 LATE=""
for r in $(seq "$ROUNDS"); do
	for t in $TARGETS; do
		f=$TMP/round$r-$t.txt
		run_wrk "$t" "$DURATION" "$f"
		read -r rps p50 p99 non2xx errs pc lb oc < <(parse_wrk "$f")
		printf '   round %d %s: %8.0f req/s  p50 %6.3f ms  p99 %7.3f ms  non-2xx %s  errors %s  proxy cpu %s%%  load cores busy %s%%  other users %s%%\n' \
			"$r" "$t" "$rps" "$p50" "$p99" "$non2xx" "$errs" "$pc" "$lb" "$oc" >&2
		[ "$non2xx" = 0 ] && [ "$errs" = 0 ] || BAD=1
		late=$(awk '/^Signed during the run:/ { print $NF }' "$f")
		if [ "${late:-0}" -gt 0 ]; then
			echo "   round $r $t: $late requests signed during the run (the pool ran out: raise SIGNED_RATE)" >&2
			LATE="${LATE:+$LATE, }round $r ($late)"
		fi
	done
done

# medians over rounds (and the best round's requests/s); PERCORE is
# requests/s divided by the proxy's CPU use, the proxy's capacity per core
# when the load side, not the proxy, is what saturates
declare -A RPS BEST P50 P99 PC LB OC PERCORE
for t in $TARGETS; do
	rs=() a50=() a99=() apc=() alb=() aoc=() apk=()
	for r in $(seq "$ROUNDS"); do
		read -r rps p50 p99 _ _ pc lb oc < <(parse_wrk "$TMP/round$r-$t.txt")
		rs+=("$rps") a50+=("$p50") a99+=("$p99") apc+=("$pc") alb+=("$lb") aoc+=("$oc")
		apk+=("$(awk -v r="$rps" -v c="$pc" 'BEGIN { printf "%.0f", (c > 0) ? r * 100 / c : 0 }')")
	done
	RPS[$t]=$(median "${rs[@]}")
	BEST[$t]=$(printf '%s\n' "${rs[@]}" | sort -g | tail -1)
	P50[$t]=$(median "${a50[@]}")
	P99[$t]=$(median "${a99[@]}")
	PC[$t]=$(median "${apc[@]}")
	LB[$t]=$(median "${alb[@]}")
	OC[$t]=$(median "${aoc[@]}")
	PERCORE[$t]=$(median "${apk[@]}")
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# ---- open loop: added latency at half the edge's peak ------------------------
# OLR[k,r] is target k's result line in round r; OL[k] its fields' medians
# over the rounds (non-200 and errors summed).
declare -A OL=() OLR=()
OL_FIELDS="rate achieved p50 p90 p99 p999 max svc_p50 svc_p99 svc_p999 lag_p99 non200 errors cpu cpu_us othercpu"
ol() { # ol NAME PORT MODE RATE ROUND
	local line a0 a1 o0 o1 s0 s1 p0 p1 secs pids
	pids=$(proxy_pids "${1%%-*}")
	p0=$(proc_ticks $pids) o0=$(proc_ticks $(all_pids)) s0=$(self_ticks)
	a0=$(task_ticks)
	line=$("${PIN_LOAD[@]}" env GOMAXPROCS=$((LOAD_N + 1)) "$TMP/openloop" -name "$1" -addr "127.0.0.1:$2" -mode "$3" \
		-key "$KEY" -secret "$SECRET" -rate "$4" -conns "$CONNS" -duration "$OL_DURATION" -warmup "$OL_WARMUP" 2>&1) || BAD=1
	p1=$(proc_ticks $pids) o1=$(proc_ticks $(all_pids)) s1=$(self_ticks)
	a1=$(task_ticks)
	secs=$(awk -v d="$OL_DURATION" -v w="$OL_WARMUP" 'BEGIN { sub(/s$/, "", d); sub(/s$/, "", w); print d + w }')
	# the proxy's (for e, the upstream's) CPU over warm-up and measurement,
	# both at the same rate: % of a core and µs a request
	line="$line cpu=$(awk -v t=$((p1 - p0)) -v hz="$HZ" -v s="$secs" 'BEGIN { printf "%.0f", 100 * t / hz / s }')"
	line="$line cpu_us=$(awk -v t=$((p1 - p0)) -v hz="$HZ" -v s="$secs" -v r="$4" 'BEGIN { printf "%.1f", 1e6 * t / hz / (s * r) }')"
	line="$line othercpu=$(awk -v a0="$a0" -v a1="$a1" -v ours=$(((o1 - o0) + (s1 - s0))) -v hz="$HZ" -v s="$secs" \
		'BEGIN { x = 100 * ((a1 - a0) - ours) / hz / s; printf "%.0f", (x < 0) ? 0 : x }')"
	echo "   round $5: $line" >&2
	OLR[$1,$5]=$line
}
field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<"$1"; } # field LINE NAME: a key=value of a result line
olv() { field "${OL[$1]}" "$2"; }            # olv KEY FIELD: the median over the rounds
olr() { field "${OLR[$1,$2]:-}" "$3"; }      # olr KEY ROUND FIELD
RATE_A=$(awk -v p="${RPS[a]:-0}" -v f="$OL_FRACTION" 'BEGIN { printf "%d", p * f }')
RATE_B=$(awk -v p="${RPS[b]:-0}" -v f="$OL_FRACTION" 'BEGIN { printf "%d", p * f }')
for r in $(seq "$OL_ROUNDS"); do
	if [ "$RATE_A" -gt 0 ]; then
		echo "== open loop round $r of $OL_ROUNDS at $OL_FRACTION x peak of (a): $RATE_A req/s for $OL_DURATION" >&2
		ol e-a "$UP_PORT" bearer "$RATE_A" "$r"
		ol a "$EDGE_PORT" bearer "$RATE_A" "$r"
		[[ " $TARGETS " == *" c "* ]] && ol c "$BARE_PORT" bearer "$RATE_A" "$r"
		[[ " $TARGETS " == *" d "* ]] && ol d "$NGINX_PORT" bearer "$RATE_A" "$r"
	fi
	if [ "$RATE_B" -gt 0 ]; then
		echo "== open loop round $r of $OL_ROUNDS at $OL_FRACTION x peak of (b): $RATE_B req/s for $OL_DURATION" >&2
		ol e-b "$UP_PORT" signed "$RATE_B" "$r"
		ol b "$EDGE_PORT" signed "$RATE_B" "$r"
	fi
done
for k in e-a a c d e-b b; do
	[ -n "${OLR[$k,1]:-}" ] || continue
	line="target=$k"
	for f in $OL_FIELDS; do
		vals=()
		for r in $(seq "$OL_ROUNDS"); do vals+=("$(olr "$k" "$r" "$f")"); done
		case $f in
		non200 | errors) v=$(printf '%s\n' "${vals[@]}" | awk '{ n += $1 } END { print n + 0 }') ;;
		*) v=$(median "${vals[@]}") ;;
		esac
		line="$line $f=$v"
	done
	OL[$k]=$line
done

# ---- optional profile --------------------------------------------------------
# PROFILE=1: for every target, perf stat (CPU time, context switches and
# system calls of the proxy's processes) over 8 s of a 10 s wrk run, then a
# perf record (call graphs) over another such run; for the edge, the
# inclusive share of its main functions.
declare -A PROF=()
EDGE_FUNCS='gateway.\(\*Gateway\).serve$|gateway.\(\*Gateway\).forward$|HostClient\).Do$|gateway.\(\*Gateway\).bearer$|gateway.\(\*Gateway\).signed$|nonce.\(\*Store\).Use$|authn.\(\*Signer\).Verify$|authn.AppendStringToSign$|authcache.\(\*Cache\).Lookup$|ratelimit.\(\*Limiter\).Take$|ratelimit.\(\*Adaptive\).(Observe|Factor)$|gateway.\(\*Metrics\).observe$|gateway.\(\*Gateway\).clientIP$|gateway.setRateHeaders$|RequestHeader\).Del$|RequestHeader\).Set$|RequestHeader\).SetBytesV$|^time.Now$|setDeadlineImpl$|^syscall.write$|^syscall.read$|runtime.netpoll$|runtime.gcBgMarkWorker$|runtime.mallocgc$|Server\).serveConnCounted$'
if [ "$PROFILE" = 1 ]; then
	if ! command -v perf >/dev/null; then
		echo "PROFILE=1 needs perf (apt-get install linux-perf)" >&2
	else
		for t in $TARGETS; do
			echo "== perf stat and perf record of ($t)" >&2
			pids=$(proxy_pids "$t" | tr ' ' ',')
			# CPU and context switches (software counters, no overhead), then
			# system calls in a run of their own (a tracepoint slows them)
			run_wrk "$t" 10s "$TMP/perfstat-wrk-$t.txt" \
				perf stat -x, -e task-clock,context-switches -p "$pids" -o "$TMP/perfstat-$t.csv" -- sleep 8
			run_wrk "$t" 5s "$TMP/perfstat-sc-wrk-$t.txt" \
				perf stat -x, -e raw_syscalls:sys_enter -p "$pids" -o "$TMP/perfstat-sc-$t.csv" -- sleep 4
			rps=$(parse_wrk "$TMP/perfstat-wrk-$t.txt" | cut -d' ' -f1)
			rps2=$(parse_wrk "$TMP/perfstat-sc-wrk-$t.txt" | cut -d' ' -f1)
			sc=$(awk -F, -v rps="$rps2" '$3 == "raw_syscalls:sys_enter" && rps > 0 { printf "%.2f", $1 / (rps * 4) }' "$TMP/perfstat-sc-$t.csv")
			PROF[$t]=$(awk -F, -v rps="$rps" -v sc="${sc:-0}" '
				$3 == "task-clock" { cpu = $1 } # ms
				$3 == "context-switches" { cs = $1 }
				END { n = rps * 8; if (n > 0) printf "%.0f %.1f %s %.2f", rps, cpu * 1000 / n, sc, cs / n }' "$TMP/perfstat-$t.csv")
			echo "   req/s, CPU µs/request, syscalls/request, context switches/request: ${PROF[$t]}" >&2
			run_wrk "$t" 10s "$TMP/perf-wrk-$t.txt" quiet perf record -F 1999 -g -p "$pids" -o "$TMP/perf-$t.data" -- sleep 8
			perf report -i "$TMP/perf-$t.data" --no-children --sort symbol --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -60 >"$TMP/perf-$t-self.txt" || true
			perf report -i "$TMP/perf-$t.data" --children --sort symbol --stdio -g none 2>/dev/null |
				grep -v '^#' | grep -v '^$' | awk '{ printf "%8s %8s %s\n", $1, $2, $4 }' >"$TMP/perf-$t-children.txt" || true
			echo "   $TMP/perf-$t-self.txt, $TMP/perf-$t-children.txt (perf report -i $TMP/perf-$t.data)" >&2
		done
	fi
fi
END_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report -----------------------------------------------------------------
{
	echo "## proxycompare results ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo
	echo "$(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)); load average at start $START_LOAD, at end $END_LOAD."
	echo "Pinning: $([ "$PIN" = 1 ] && echo "proxy under test on CPU $PROXY_CPUS ($PROXY_N core(s): GOMAXPROCS=$PROXY_N, nginx worker_processes $PROXY_N); wrk, open-loop generator and upstream on CPU $LOAD_CPUS" || echo none)."
	echo "Priority: $([ "$NICE" = 0 ] && echo "normal" || { [ "$AUTOGROUP_NICE" = 1 ] && echo "own session, autogroup nice $NICE" || echo "nice $NICE"; })."
	echo "wrk: \`$WRK_CMD_A\` with SCRIPT bearer.lua for a, c, d and signed.lua for b (its requests signed before each run, $SIGNED_RATE per second of it); $ROUNDS rounds interleaved (${TARGETS// /,} then again), median of rounds; $WARMUP warm-up each."
	echo
	echo "| target | requests/s (median of $ROUNDS) | ratio to nginx | p50 ms | p99 ms | best round req/s | proxy CPU % of a core | req/s per proxy core | per-core ratio to nginx | load core busy % | other users' CPU % |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in $TARGETS; do
		printf '| %s | %.0f | %s | %.3f | %.3f | %.0f | %s | %s | %s | %s | %s |\n' "${LABEL[$t]}" "${RPS[$t]}" \
			"$(ratio "${RPS[$t]}" "${RPS[d]:-0}")" "${P50[$t]}" "${P99[$t]}" "${BEST[$t]}" "${PC[$t]}" "${PERCORE[$t]}" \
			"$(ratio "${PERCORE[$t]}" "${PERCORE[d]:-0}")" "${LB[$t]}" "${OC[$t]}"
	done
	echo
	if [ -n "${LATE:-}" ]; then
		echo "(b) outran its presigned requests in $LATE: wrk signed the rest during the run, which understates (b). Raise SIGNED_RATE."
		echo
	fi
	echo "Per round (requests/s):"
	echo
	echo "| target |$(for r in $(seq "$ROUNDS"); do printf ' round %d |' "$r"; done)"
	echo "|---|$(for r in $(seq "$ROUNDS"); do printf -- '---:|'; done)"
	for t in $TARGETS; do
		printf '| %s |' "$t"
		for r in $(seq "$ROUNDS"); do printf ' %.0f |' "$(parse_wrk "$TMP/round$r-$t.txt" | cut -d' ' -f1)"; done
		echo
	done
	echo
	if [ "$RATE_A" -gt 0 ] || [ "$RATE_B" -gt 0 ]; then
		echo "Open loop (\`${WRK_PIN}openloop -rate R -conns $CONNS -duration $OL_DURATION -warmup $OL_WARMUP\`), $OL_ROUNDS rounds interleaved, each column the median of the rounds (non-200 and errors their sum), µs; p50…max from each request's due time (includes the generator's lateness, lag), svc from the moment it was written:"
		echo
		echo "| target | rate req/s | achieved | p50 | p90 | p99 | p99.9 | max | svc p50 | svc p99 | svc p99.9 | lag p99 | non-200 | errors | its CPU % of a core | its CPU µs/request | other users' CPU % |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for k in e-a a c d e-b b; do
			[ -n "${OL[$k]:-}" ] || continue
			lbl=${LABEL[${k%%-*}]}
			[[ $k == e-* ]] && lbl="$lbl (${k#e-} mode)"
			printf '| %s |' "$lbl"
			for f in $OL_FIELDS; do
				printf ' %s |' "$(olv "$k" "$f")"
			done
			echo
		done
		echo
		echo "Per round: p99 from the due time, µs (the generator's lateness, lag p99, in brackets):"
		echo
		echo "| target |$(for r in $(seq "$OL_ROUNDS"); do printf ' round %d |' "$r"; done)"
		echo "|---|$(for r in $(seq "$OL_ROUNDS"); do printf -- '---:|'; done)"
		for k in e-a a c d e-b b; do
			[ -n "${OL[$k]:-}" ] || continue
			printf '| %s |' "$k"
			for r in $(seq "$OL_ROUNDS"); do printf ' %s (%s) |' "$(olr "$k" "$r" p99)" "$(olr "$k" "$r" lag_p99)"; done
			echo
		done
		echo
	fi
	if [ ${#PROF[@]} -gt 0 ]; then
		echo "Profile (PROFILE=1; perf stat of the proxy's processes over 8 s of a 10 s wrk run):"
		echo
		echo "| target | req/s | proxy CPU µs/request | syscalls/request | context switches/request |"
		echo "|---|---:|---:|---:|---:|"
		for t in $TARGETS; do
			[ -n "${PROF[$t]:-}" ] || continue
			read -r a1 a2 a3 a4 <<<"${PROF[$t]}"
			echo "| ${LABEL[$t]} | $a1 | $a2 | $a3 | $a4 |"
		done
		echo
		for t in a b; do
			[ -s "$TMP/perf-$t-children.txt" ] || continue
			cpu=$(cut -d' ' -f2 <<<"${PROF[$t]}")
			echo "Edge under ($t): inclusive share of its CPU samples, and µs/request (share × $cpu µs):"
			echo
			echo "| function | inclusive % | µs/request |"
			echo "|---|---:|---:|"
			awk -v re="$EDGE_FUNCS" -v cpu="$cpu" '{ f = $3; sub(/^github.com\/[^\/]+\/[^\/]+\//, "", f); sub(/^github.com\/valyala\/fasthttp./, "fasthttp.", f) }
				($3 ~ re || f ~ re) && !seen[$3]++ { p = $1; sub(/%/, "", p); printf "| %s | %.1f | %.2f |\n", f, p, p * cpu / 100 }' \
				"$TMP/perf-$t-children.txt"
			echo
		done
	fi
	echo "Targets:"
	echo
	if [ -n "${RPS[d]:-}" ]; then
		[ -n "${RPS[a]:-}" ] && echo "- (a) ≥ 0.90 × (d): $(ratio "${RPS[a]}" "${RPS[d]}") → $(awk -v a="${RPS[a]}" -v d="${RPS[d]}" 'BEGIN { print (a >= 0.9 * d) ? "met" : "NOT met" }')"
		[ -n "${RPS[b]:-}" ] && echo "- (b) ≥ 0.75 × (d): $(ratio "${RPS[b]}" "${RPS[d]}") → $(awk -v a="${RPS[b]}" -v d="${RPS[d]}" 'BEGIN { print (a >= 0.75 * d) ? "met" : "NOT met" }')"
		[ -n "${RPS[a]:-}" ] && echo "- per proxy core, (a) ≥ 0.90 × (d): $(ratio "${PERCORE[a]}" "${PERCORE[d]}") → $(awk -v a="${PERCORE[a]}" -v d="${PERCORE[d]}" 'BEGIN { print (a >= 0.9 * d) ? "met" : "NOT met" }')"
		[ -n "${RPS[b]:-}" ] && echo "- per proxy core, (b) ≥ 0.75 × (d): $(ratio "${PERCORE[b]}" "${PERCORE[d]}") → $(awk -v a="${PERCORE[b]}" -v d="${PERCORE[d]}" 'BEGIN { print (a >= 0.75 * d) ? "met" : "NOT met" }')"
	fi
	for k in a b; do
		[ -n "${OL[$k]:-}" ] && [ -n "${OL[e-$k]:-}" ] || continue
		# A generator late by more than the target at p99 against the upstream
		# alone (it shares the load core with it) cannot tell the edge's tail
		# from its own. Its lateness against the edge may be larger: a request
		# also waits there for one of the CONNS connections the edge still
		# holds, which is the edge's doing and counts against it.
		# So a round counts only where the generator kept up with the upstream
		# alone, and the result is the median of those rounds' differences.
		for f in p99 svc_p99; do
			diffs=() lags=()
			for r in $(seq "$OL_ROUNDS"); do
				lag=$(olr "e-$k" "$r" lag_p99) x=$(olr "$k" "$r" $f) y=$(olr "e-$k" "$r" $f)
				lags+=("${lag:-n/a}")
				# a round whose openloop failed has no values: it does not count
				if [ -n "$lag" ] && [ -n "$x" ] && [ -n "$y" ] && awk -v l="$lag" 'BEGIN { exit !(l <= 1000) }'; then
					diffs+=("$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.0f", x - y }')")
				fi
			done
			if [ ${#diffs[@]} -eq 0 ]; then
				echo "- ($k) added $f at $OL_FRACTION × its peak, vs the upstream direct: not measurable (no round where the generator kept up with the upstream alone and both ran; its lag p99 per round: ${lags[*]} µs)"
			else
				d=$(median "${diffs[@]}")
				echo "- ($k) added $f at $OL_FRACTION × its peak, vs the upstream direct in the same round: median $(printf '%.0f' "$d") µs over ${#diffs[@]} measurable round(s) of $OL_ROUNDS (${diffs[*]} µs) → $(awk -v d="$d" 'BEGIN { print (d < 1000) ? "met (< 1 ms)" : "NOT met" }') (the edge at $(olv "$k" cpu) % of its core)"
			fi
		done
	done
	[ "$BAD" = 0 ] || echo "- WARNING: some run had non-2xx answers or socket errors; see $TMP"
} >"$OUT"
# A target met by a run with errors is not met: an error answers fast, and
# wrk counts non-2xx answers in its requests/s.
[ "$BAD" = 0 ] || sed -i -E 's/→ met( \(< 1 ms\))?/→ not counted: a run had non-2xx answers or socket errors/' "$OUT"
cat "$OUT"
echo >&2
echo "raw wrk output, logs and this table: $TMP (table: $OUT)" >&2
