#!/usr/bin/env bash
# circuit-e2e: the end-to-end scenario of libcircuit (bench/e2e, issue 6).
#
# SPDX-License-Identifier: MIT
#
# Starts nginx (the upstream) and circuit-proxy on 127.0.0.1, drives the proxy
# with wrk through eight phases, twice (breaker on, then off, same load):
#
#   healthy -> http503  (nginx answers 503: new config, SIGHUP)
#           -> down     (nginx stopped: connection refused)
#           -> hung     (nginx started then SIGSTOPped: timeouts)
#           -> back     (hung nginx killed, healthy nginx started)
#           -> final    (healthy)
#           -> isolated (healthy; POST /admin/isolate on the proxy's admin port)
#           -> reset    (healthy; POST /admin/reset)
#
# then scrapes the proxy's /metrics. This script only orchestrates: the raw
# data goes to DIR/run-on and DIR/run-off, and e2e_report.py (next to it)
# parses it, writes the report (markdown on stdout and in DIR/report.md), a
# JSON file (DIR/e2e.json) and the plot (DIR/e2e.png, DIR/e2e.svg), and with
# --check exits 1 unless the outcomes hold. Exit 77: a tool is missing.
#
# Needs bash, coreutils, awk, python3, nginx, wrk; promtool (Debian package
# prometheus) for --check; gnuplot for the plot (optional).
# Every server binds 127.0.0.1 only; every load targets 127.0.0.1 only; every
# process started here is stopped by its pid when the script exits.

set -u -o pipefail

PROG=circuit-e2e
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATH=$PATH:/usr/sbin:/sbin

usage() {
    cat <<EOF
usage: $PROG [options]
  --out DIR              output directory (default ./e2e-out)
  --proxy PATH           circuit-proxy binary (default: next to this script)
  --phase-s S            seconds per phase, integer (default 4: about 55 s for both runs)
  --quick                shortened scenario (1-2 s phases, open 500..1500 ms; about 30 s)
  --check                exit 1 unless the expected outcomes hold
  --runs "on off"        which runs to make (default both; the checks need both)
  --connections N        wrk connections (default 32)
  --wrk-threads N        wrk threads (default 2)
  --window N --probes N --min-results N --ratio R --close-after N
  --open-for-ms MS --open-for-max-ms MS --backoff-jitter R --backoff-seed N
  --probe-timeout-ms MS --upstream-timeout-ms MS
                         breaker and proxy settings (defaults: 100 2 20 0.5 3
                         1000 3000 0.2 1 1000 300); open periods double at
                         each reopen from --open-for-ms up to --open-for-max-ms,
                         each cut by up to the jitter share (--quick: 500 1500)
  --bucket-ms MS         width of the proxy's rate intervals (default 250)
  --no-plot              do not run gnuplot
  --keep                 keep the temporary nginx directory
EOF
}

# ---------------------------------------------------------------- options --
OUT=./e2e-out
PROXY=$HERE/circuit-proxy
PHASE_S=4
QUICK=0
CHECK=0
KEEP=0
PLOT=1
RUNS="on off"
CONNS=32
WRK_THREADS=2
WINDOW=100
PROBES=2
MIN_RESULTS=20
RATIO=0.5
CLOSE_AFTER=3
OPEN_FOR_MS=1000
OPEN_FOR_MAX_MS=3000
BACKOFF_SEED=1
BACKOFF_JITTER=0.2
PROBE_TIMEOUT_MS=1000
UP_TIMEOUT_MS=300
BUCKET_MS=250
OPEN_FOR_SET=0
OPEN_FOR_MAX_SET=0

die() { echo "$PROG: $*" >&2; exit 2; }
need_arg() { [ $# -ge 2 ] || die "$1 needs a value"; }

while [ $# -gt 0 ]; do
    case $1 in
    --out) need_arg "$@"; OUT=$2; shift 2 ;;
    --proxy) need_arg "$@"; PROXY=$2; shift 2 ;;
    --phase-s) need_arg "$@"; PHASE_S=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --check) CHECK=1; shift ;;
    --runs) need_arg "$@"; RUNS=$2; shift 2 ;;
    --connections) need_arg "$@"; CONNS=$2; shift 2 ;;
    --wrk-threads) need_arg "$@"; WRK_THREADS=$2; shift 2 ;;
    --window) need_arg "$@"; WINDOW=$2; shift 2 ;;
    --probes) need_arg "$@"; PROBES=$2; shift 2 ;;
    --min-results) need_arg "$@"; MIN_RESULTS=$2; shift 2 ;;
    --ratio) need_arg "$@"; RATIO=$2; shift 2 ;;
    --close-after) need_arg "$@"; CLOSE_AFTER=$2; shift 2 ;;
    --open-for-ms) need_arg "$@"; OPEN_FOR_MS=$2; OPEN_FOR_SET=1; shift 2 ;;
    --open-for-max-ms) need_arg "$@"; OPEN_FOR_MAX_MS=$2; OPEN_FOR_MAX_SET=1; shift 2 ;;
    --backoff-seed) need_arg "$@"; BACKOFF_SEED=$2; shift 2 ;;
    --backoff-jitter) need_arg "$@"; BACKOFF_JITTER=$2; shift 2 ;;
    --probe-timeout-ms) need_arg "$@"; PROBE_TIMEOUT_MS=$2; shift 2 ;;
    --upstream-timeout-ms) need_arg "$@"; UP_TIMEOUT_MS=$2; shift 2 ;;
    --bucket-ms) need_arg "$@"; BUCKET_MS=$2; shift 2 ;;
    --no-plot) PLOT=0; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option '$1'" ;;
    esac
done

is_uint() { case $1 in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }
for v in PHASE_S CONNS WRK_THREADS WINDOW PROBES MIN_RESULTS CLOSE_AFTER OPEN_FOR_MS \
         OPEN_FOR_MAX_MS PROBE_TIMEOUT_MS UP_TIMEOUT_MS BUCKET_MS; do
    if ! is_uint "${!v}" || [ "${!v}" -eq 0 ]; then
        die "--$(echo "$v" | tr 'A-Z_' 'a-z-') must be a positive integer"
    fi
done
is_uint "$BACKOFF_SEED" || die "--backoff-seed must be a non-negative integer"
for r in $RUNS; do
    case $r in on|off) ;; *) die "--runs takes 'on' and/or 'off'" ;; esac
done

# Phases: ids (titles and roles are e2e_report.py's), whether the script
# fetches one reply itself during the phase (probe_rejection), durations (s).
PHASE_IDS=(healthy http503 down hung back final isolated reset)
PHASE_PROBE=(0 1 1 1 0 0 1 0)
if [ "$QUICK" = 1 ]; then
    DUR=(1 2 2 2 2 1 1 1)
    [ "$OPEN_FOR_SET" = 1 ] || OPEN_FOR_MS=500
    [ "$OPEN_FOR_MAX_SET" = 1 ] || OPEN_FOR_MAX_MS=1500
else
    DUR=()
    for _ in "${PHASE_IDS[@]}"; do DUR+=("$PHASE_S"); done
fi
# The cap stays below a phase's length minus a probe's round trip, so the
# breaker still reopens (and is seen opening) in every outage phase.
[ "$OPEN_FOR_MAX_MS" -ge "$OPEN_FOR_MS" ] || die "--open-for-max-ms must be >= --open-for-ms"
NPHASES=${#PHASE_IDS[@]}
TOTAL_S=0
for d in "${DUR[@]}"; do TOTAL_S=$((TOTAL_S + d)); done

# ------------------------------------------------------------------ tools --
missing=""
command -v nginx >/dev/null 2>&1 || missing="$missing nginx (apt-get install nginx-light)"
command -v wrk >/dev/null 2>&1 || missing="$missing wrk (apt-get install wrk)"
command -v awk >/dev/null 2>&1 || missing="$missing awk"
command -v python3 >/dev/null 2>&1 || missing="$missing python3 (apt-get install python3)"
if [ "$CHECK" = 1 ] && ! command -v promtool >/dev/null 2>&1; then
    missing="$missing promtool, for --check (apt-get install prometheus)"
fi
if [ -n "$missing" ]; then
    echo "$PROG: SKIP: missing:$missing" >&2
    exit 77
fi
[ -x "$PROXY" ] || die "circuit-proxy not found at $PROXY (use --proxy)"
REPORT_PY=$HERE/e2e_report.py
[ -r "$REPORT_PY" ] || die "e2e_report.py not found next to $0"
if [ "$PLOT" = 1 ] && ! command -v gnuplot >/dev/null 2>&1; then
    echo "$PROG: gnuplot not found (apt-get install gnuplot-nox): no plot" >&2
    PLOT=0
fi

mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/circuit-e2e.XXXXXX") || die "mktemp failed"

NGINX_PID=""
PROXY_PID=""
WRK_PID=""
PROBE_PID=""

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }

# ---------------------------------------------------------- process helpers --
# alive PID: the process exists and is not a zombie.
alive() {
    local st
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    st=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

# wait_gone PID TIMEOUT_DS: waits up to TIMEOUT_DS tenths of a second.
wait_gone() {
    local i=0
    while alive "$1"; do
        [ "$i" -ge "$2" ] && return 1
        sleep 0.1
        i=$((i + 1))
    done
    wait "$1" 2>/dev/null
    return 0
}

# http_request METHOD PORT PATH [TIMEOUT_S]: one HTTP/1.0 request without a
# body to 127.0.0.1:PORT; prints the response (CRs stripped). Fails when the
# connection is refused or the response does not start within the timeout.
http_request() (
    exec 3<>"/dev/tcp/127.0.0.1/$2" || exit 1
    printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n' "$1" "$3" >&3
    n=0
    while IFS= read -r -t "${4:-2}" -u 3 line || [ -n "${line:-}" ]; do
        printf '%s\n' "${line%$'\r'}"
        n=$((n + 1))
        line=""
    done
    [ "$n" -gt 0 ]
) 2>/dev/null

http_get() { http_request GET "$@"; }

# http_status PORT PATH [TIMEOUT_S]: prints the status code, or nothing.
http_status() {
    http_get "$@" | awk 'NR == 1 { print $2 }'
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# random_upstream_port: a port OUTSIDE the kernel's ephemeral range. While the
# upstream is down the proxy makes tens of thousands of connection attempts to
# its port; were that port ephemeral, one attempt could be given it as its own
# source port and connect to itself (TCP simultaneous open), which would both
# fake an upstream and keep nginx from binding the port again.
random_upstream_port() {
    local lo=32768 hi=60999 a b
    { read -r lo hi </proc/sys/net/ipv4/ip_local_port_range; } 2>/dev/null
    if [ "$lo" -gt 12000 ]; then
        a=10000 b=$((lo - 1))
    elif [ "$hi" -lt 63000 ]; then
        a=$((hi + 1)) b=65535
    else
        a=1024 b=$((lo - 1))
        log "warning: the ephemeral port range $lo-$hi leaves little room for the upstream port"
    fi
    echo $((a + RANDOM % (b - a + 1)))
}

# ------------------------------------------------------------------ nginx --
# The upstream: nginx in its own process group (setsid), master + 1 worker,
# every path under $NG. nginx_conf MODE writes $NG/nginx.conf, MODE is
# healthy (200) or failing (503).
nginx_conf() {
    local body status
    if [ "$1" = failing ]; then status=503; body="upstream failing"; else status=200; body="ok"; fi
    cat >"$NG/nginx.conf" <<EOF
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/error.log notice;
events { worker_connections 4096; }
http {
    log_format e2e '\$msec \$status';
    access_log $NG/access.log e2e;
    client_body_temp_path $NG/tmp/body;
    proxy_temp_path $NG/tmp/proxy;
    fastcgi_temp_path $NG/tmp/fastcgi;
    uwsgi_temp_path $NG/tmp/uwsgi;
    scgi_temp_path $NG/tmp/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 60s;
    server {
        listen 127.0.0.1:$UP_PORT;
        location / {
            default_type text/plain;
            return $status "$body\n";
        }
        location = /ready {
            access_log off;
            default_type text/plain;
            return $status "$body\n";
        }
    }
}
EOF
}

# nginx_launch: starts nginx on the current config; sets NGINX_PID once its
# pid file exists (written after the listening socket is open). Does not
# wait for the worker.
nginx_launch() {
    rm -f "$NG/nginx.pid"
    setsid nginx -p "$NG" -c "$NG/nginx.conf" -e "$NG/error.log" -g 'daemon off;' \
        </dev/null >>"$NG/stdout.log" 2>&1 &
    local launched=$! i=0
    disown "$launched"   # no job notices when it is killed; bash still reaps it
    NGINX_PID=""
    while [ "$i" -lt 500 ]; do
        if [ -s "$NG/nginx.pid" ]; then
            NGINX_PID=$(cat "$NG/nginx.pid")
            return 0
        fi
        alive "$launched" || break
        sleep 0.01
        i=$((i + 1))
    done
    wait "$launched" 2>/dev/null
    return 1
}

# nginx_ready WANT: waits until nginx answers status WANT directly.
nginx_ready() {
    local i=0
    while [ "$i" -lt 100 ]; do
        [ "$(http_status "$UP_PORT" /ready 1)" = "$1" ] && return 0
        alive "$NGINX_PID" || return 1
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# nginx_start_healthy: picks a free port if none yet, starts a healthy nginx.
nginx_start_healthy() {
    local tries=0
    while [ "$tries" -lt 8 ]; do
        if [ -z "${UP_PORT:-}" ]; then
            UP_PORT=$(random_upstream_port)
            port_in_use "$UP_PORT" && { UP_PORT=""; continue; }
        fi
        nginx_conf healthy
        if nginx_launch && nginx_ready 200; then
            return 0
        fi
        nginx_kill
        log "nginx did not start on port $UP_PORT; see $NG/error.log"
        [ "$PORT_FIXED" = 1 ] && return 1
        UP_PORT=""
        tries=$((tries + 1))
    done
    return 1
}

# nginx_group_size: processes in nginx's process group (master included).
nginx_group_size() {
    local f st n=0
    for f in /proc/[0-9]*/stat; do
        { read -r st <"$f"; } 2>/dev/null || continue
        # shellcheck disable=SC2086 # split on purpose: state ppid pgrp ...
        set -- ${st##*) }
        [ "${3:-}" = "$NGINX_PID" ] && [ "$1" != Z ] && n=$((n + 1))
    done
    echo "$n"
}

# nginx_wait_old_workers: after a reload, waits (at most 3 s) until the old
# worker has exited, so that no keep-alive connection still gets the old
# config's answers.
nginx_wait_old_workers() {
    local i=0
    while [ "$(nginx_group_size)" -gt 2 ]; do
        [ "$i" -ge 60 ] && { log "old nginx worker still running after 3 s"; return 0; }
        sleep 0.05
        i=$((i + 1))
    done
    return 0
}

nginx_stop() {  # graceful enough: TERM (fast shutdown), then KILL
    [ -n "$NGINX_PID" ] || return 0
    kill -TERM "$NGINX_PID" 2>/dev/null
    wait_gone "$NGINX_PID" 50 || nginx_kill
    NGINX_PID=""
}

nginx_kill() {  # the whole process group, stopped or not
    [ -n "$NGINX_PID" ] || return 0
    kill -KILL -- "-$NGINX_PID" 2>/dev/null
    kill -CONT -- "-$NGINX_PID" 2>/dev/null
    wait_gone "$NGINX_PID" 50
    NGINX_PID=""
}

# ------------------------------------------------------------ the phases ---
# phase_enter I: makes the upstream condition of phase I true (before its
# mark and before any load of the phase starts).
phase_enter() {
    case ${PHASE_IDS[$1]} in
    healthy|final|isolated|reset)
        return 0 ;;  # the operator phases act after their mark (phase_operator)
    http503)
        nginx_conf failing
        kill -HUP "$NGINX_PID" || return 1
        nginx_ready 503 || return 1
        nginx_wait_old_workers ;;
    down)
        nginx_stop
        ! port_in_use "$UP_PORT" ;;
    hung)
        # Started healthy, then stopped (master and worker) as soon as its
        # listening socket exists: the kernel accepts connections into the
        # backlog and nobody ever answers.
        nginx_conf healthy
        nginx_launch || return 1
        kill -STOP -- "-$NGINX_PID" ;;
    back)
        nginx_kill
        nginx_start_healthy ;;
    *)
        return 1 ;;
    esac
}

# now_ms: wall-clock milliseconds (bash 5 EPOCHREALTIME).
now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

sleep_ms() { sleep "$(awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }')"; }

# probe_rejection PORT FILE START_MS END_MS WANT: from START_MS to END_MS
# after now, asks the proxy directly (not through wrk), 150 ms apart, until it
# is rejected with X-Circuit-State WANT (open, isolated). FILE gets that
# reply, else the last reply that had an X-Circuit-State, else the last reply.
probe_rejection() {
    local resp t0 end got=0
    t0=$(now_ms)
    end=$((t0 + $4))
    sleep_ms "$3"
    while [ "$(now_ms)" -lt "$end" ]; do
        resp=$(http_get "$1" /probe 1)
        if printf '%s\n' "$resp" | grep -qi '^x-circuit-state:'; then
            printf '%s\n' "$resp" >"$2"
            got=1
            printf '%s\n' "$resp" | grep -qi "^x-circuit-state: *$5\$" && return 0
        elif [ "$got" = 0 ]; then
            printf '%s\n' "$resp" >"$2"
        fi
        sleep 0.15
    done
    return 0
}

# phase_operator I R PORT ADMIN: the operator's call of phase I, made just
# after its mark, with no load running (run directory R). The admin port
# answers with a snapshot of the counters taken right after the call; nginx's
# access-log count is taken after the isolate call and before the reset call,
# so that what happened while isolated can be told exactly, whatever requests
# of the previous phase the proxy was still finishing. After reset, one
# request goes through the proxy at once (probe-reset.txt).
phase_operator() {
    case ${PHASE_IDS[$1]} in
    isolated)
        http_request POST "$4" /admin/isolate 2 >"$2/admin-isolated.txt"
        wc -l <"$NG/access.log" >"$2/served-isolated.txt" ;;
    reset)
        wc -l <"$NG/access.log" >"$2/served-reset.txt"
        http_request POST "$4" /admin/reset 2 >"$2/admin-reset.txt"
        http_get "$3" /probe 2 >"$2/probe-reset.txt" ;;
    esac
    return 0
}

# ------------------------------------------------------------- one run -----
# run_scenario on|off: the phases against a fresh nginx and proxy; leaves its
# raw data in $OUT/run-RUN (e2e_report.py lists the files).
run_scenario() {
    local run=$1 R=$OUT/run-$1 i id pp ap want
    rm -rf "$R"
    mkdir -p "$R" || die "cannot create $R"
    NG=$TMP/nginx-$run
    mkdir -p "$NG/tmp" || die "cannot create $NG"
    UP_PORT=""
    PORT_FIXED=0
    nginx_start_healthy || { log "nginx would not start"; return 1; }
    PORT_FIXED=1

    local breaker_args=(--window "$WINDOW" --probes "$PROBES" --min-results "$MIN_RESULTS"
        --ratio "$RATIO" --close-after "$CLOSE_AFTER" --open-for-ms "$OPEN_FOR_MS"
        --open-for-max-ms "$OPEN_FOR_MAX_MS" --backoff-jitter "$BACKOFF_JITTER"
        --backoff-seed "$BACKOFF_SEED" --probe-timeout-ms "$PROBE_TIMEOUT_MS")
    [ "$run" = off ] && breaker_args=(--no-breaker)
    "$PROXY" --port 0 --port-file "$R/proxy.port" --admin-port 0 \
        --admin-port-file "$R/admin.port" --upstream-port "$UP_PORT" \
        --upstream-timeout-ms "$UP_TIMEOUT_MS" --bucket-ms "$BUCKET_MS" \
        --stats-file "$R/stats.jsonl" --max-seconds $((TOTAL_S + 120)) --verbose \
        "${breaker_args[@]}" </dev/null 2>"$R/proxy.log" &
    PROXY_PID=$!
    i=0
    while [ ! -s "$R/proxy.port" ] || [ ! -s "$R/admin.port" ]; do
        if ! alive "$PROXY_PID" || [ "$i" -ge 100 ]; then
            log "proxy did not start: $(cat "$R/proxy.log")"
            return 1
        fi
        sleep 0.05
        i=$((i + 1))
    done
    pp=$(cat "$R/proxy.port")
    ap=$(cat "$R/admin.port")
    [ -n "$(http_status "$ap" /__state 2)" ] || { log "proxy does not answer"; return 1; }
    log "run '$run': nginx on 127.0.0.1:$UP_PORT, proxy on 127.0.0.1:$pp (admin $ap)," \
        "phases ${DUR[*]} s"

    : >"$R/served.txt"
    for ((i = 0; i < NPHASES; i++)); do
        id=${PHASE_IDS[$i]}
        phase_enter "$i" || { log "run '$run': could not enter phase $id"; return 1; }
        http_get "$ap" "/__mark?phase=$id" 2 >/dev/null || { log "mark failed"; return 1; }
        wc -l <"$NG/access.log" >>"$R/served.txt"
        phase_operator "$i" "$R" "$pp" "$ap"
        log "run '$run': phase $((i + 1))/$NPHASES $id (${DUR[$i]} s)"
        PROBE_PID=""
        if [ "${PHASE_PROBE[$i]}" = 1 ]; then
            [ "$id" = isolated ] && want=isolated || want=open
            probe_rejection "$pp" "$R/probe-$id.txt" $((DUR[i] * 400)) $((DUR[i] * 850)) \
                "$want" &
            PROBE_PID=$!
        fi
        wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR[$i]}s" --timeout 5s --latency \
            "http://127.0.0.1:$pp/" >"$R/wrk-$id.txt" 2>&1 &
        WRK_PID=$!
        wait "$WRK_PID" || log "run '$run': wrk exited with $? in phase $id"
        WRK_PID=""
        if [ -n "$PROBE_PID" ]; then
            wait "$PROBE_PID"
            PROBE_PID=""
        fi
    done
    http_get "$ap" "/__mark?phase=end" 2 >/dev/null || { log "mark failed"; return 1; }
    wc -l <"$NG/access.log" >>"$R/served.txt"
    # /metrics, as a Prometheus server would scrape it (body only).
    http_get "$ap" /metrics 2 | sed '1,/^$/d' >"$R/metrics.txt" ||
        { log "run '$run': /metrics did not answer"; return 1; }

    nginx_kill
    kill -TERM "$PROXY_PID"
    wait_gone "$PROXY_PID" 100 || { kill -KILL "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null; }
    PROXY_PID=""
    [ -s "$R/stats.jsonl" ] || { log "proxy wrote no stats"; return 1; }
}

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
    local p
    for p in "$WRK_PID" "$PROBE_PID" "$PROXY_PID"; do
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
    done
    nginx_kill
    for p in "$WRK_PID" "$PROBE_PID" "$PROXY_PID"; do
        [ -n "$p" ] && wait_gone "$p" 30
    done
    if [ "$KEEP" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

# ------------------------------------------------------------------ main ---
status=0
for run in $RUNS; do
    if ! run_scenario "$run"; then
        log "run '$run' failed"
        status=1
        break
    fi
done
if [ "$status" = 0 ]; then
    report_args=(--out "$OUT" --runs "$RUNS" --phase-seconds "${DUR[*]}"
        --wrk-threads "$WRK_THREADS" --connections "$CONNS" --window "$WINDOW"
        --probes "$PROBES" --min-results "$MIN_RESULTS" --ratio "$RATIO"
        --close-after "$CLOSE_AFTER" --open-for-ms "$OPEN_FOR_MS"
        --open-for-max-ms "$OPEN_FOR_MAX_MS" --backoff-jitter "$BACKOFF_JITTER"
        --backoff-seed "$BACKOFF_SEED" --probe-timeout-ms "$PROBE_TIMEOUT_MS"
        --upstream-timeout-ms "$UP_TIMEOUT_MS"
        --bucket-ms "$BUCKET_MS")
    [ "$QUICK" = 1 ] && report_args+=(--quick)
    [ "$CHECK" = 1 ] && report_args+=(--check)
    [ "$PLOT" = 1 ] || report_args+=(--no-plot)
    # Kept in DIR, so that `python3 e2e_report.py @DIR/report.args` can redo
    # the report from the raw data.
    printf '%s\n' "${report_args[@]}" >"$OUT/report.args"
    python3 "$REPORT_PY" "@$OUT/report.args" || status=1
fi
exit "$status"
