#!/usr/bin/env bash
# circuit-e2e: the end-to-end scenario of libcircuit (bench/e2e, issue 6).
#
# SPDX-License-Identifier: MIT
#
# Starts nginx (the upstream) and circuit-proxy on 127.0.0.1, drives the proxy
# with wrk through six phases, twice (breaker on, then off, same load):
#
#   healthy -> http503 (nginx answers 503: new config, SIGHUP)
#           -> down    (nginx stopped: connection refused)
#           -> hung    (nginx started then SIGSTOPped: timeouts)
#           -> back    (hung nginx killed, healthy nginx started)
#           -> final   (healthy)
#
# and writes a report (markdown on stdout and in DIR/report.md), a JSON file
# (DIR/e2e.json) and a plot (DIR/e2e.png, DIR/e2e.svg). With --check it exits
# 1 unless the outcomes hold (see check_outcomes). Exit 77: a tool is missing.
#
# Needs bash, coreutils, awk, nginx, wrk; gnuplot for the plot (optional).
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
  --quick                shortened scenario (1-2 s phases, open 500 ms; about 25 s in all)
  --check                exit 1 unless the expected outcomes hold
  --runs "on off"        which runs to make (default both; the checks need both)
  --connections N        wrk connections (default 32)
  --wrk-threads N        wrk threads (default 2)
  --window N --probes N --min-results N --ratio R --close-after N
  --open-for-ms MS --probe-timeout-ms MS --upstream-timeout-ms MS
                         breaker and proxy settings (defaults: 100 2 20 0.5 3 1000 1000 300)
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
PROBE_TIMEOUT_MS=1000
UP_TIMEOUT_MS=300
BUCKET_MS=250
OPEN_FOR_SET=0

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
         PROBE_TIMEOUT_MS UP_TIMEOUT_MS BUCKET_MS; do
    if ! is_uint "${!v}" || [ "${!v}" -eq 0 ]; then
        die "--$(echo "$v" | tr 'A-Z_' 'a-z-') must be a positive integer"
    fi
done
for r in $RUNS; do
    case $r in on|off) ;; *) die "--runs takes 'on' and/or 'off'" ;; esac
done

# Phases: ids, titles, outage flag, durations (s).
PHASE_IDS=(healthy http503 down hung back final)
PHASE_TITLES=("healthy" "upstream 503" "upstream down" "upstream hung" "upstream back" "healthy (final)")
PHASE_OUTAGE=(0 1 1 1 0 0)
if [ "$QUICK" = 1 ]; then
    DUR=(1 2 2 2 2 1)
    [ "$OPEN_FOR_SET" = 1 ] || OPEN_FOR_MS=500
else
    DUR=("$PHASE_S" "$PHASE_S" "$PHASE_S" "$PHASE_S" "$PHASE_S" "$PHASE_S")
fi
NPHASES=${#PHASE_IDS[@]}
TOTAL_S=0
for d in "${DUR[@]}"; do TOTAL_S=$((TOTAL_S + d)); done

# ------------------------------------------------------------------ tools --
missing=""
command -v nginx >/dev/null 2>&1 || missing="$missing nginx (apt-get install nginx-light)"
command -v wrk >/dev/null 2>&1 || missing="$missing wrk (apt-get install wrk)"
command -v awk >/dev/null 2>&1 || missing="$missing awk"
if [ -n "$missing" ]; then
    echo "$PROG: SKIP: missing:$missing" >&2
    exit 77
fi
[ -x "$PROXY" ] || die "circuit-proxy not found at $PROXY (use --proxy)"
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

# http_get PORT PATH [TIMEOUT_S]: one HTTP/1.0 GET to 127.0.0.1:PORT; prints
# the response (CRs stripped). Fails when the connection is refused or the
# response does not start within the timeout.
http_get() (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    n=0
    while IFS= read -r -t "${3:-2}" -u 3 line || [ -n "${line:-}" ]; do
        printf '%s\n' "${line%$'\r'}"
        n=$((n + 1))
        line=""
    done
    [ "$n" -gt 0 ]
) 2>/dev/null

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
    healthy|final)
        return 0 ;;
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

# probe_rejection PORT FILE START_MS END_MS: during an outage, from START_MS
# to END_MS after now, asks the proxy directly (not through wrk), 150 ms
# apart, until it is rejected while OPEN. FILE gets that reply, else the last
# reply that had a Retry-After, else the last reply.
probe_rejection() {
    local resp t0 end got=0
    t0=$(now_ms)
    end=$((t0 + $4))
    sleep_ms "$3"
    while [ "$(now_ms)" -lt "$end" ]; do
        resp=$(http_get "$1" /probe 1)
        if printf '%s\n' "$resp" | grep -qi '^retry-after:'; then
            printf '%s\n' "$resp" >"$2"
            got=1
            printf '%s\n' "$resp" | grep -qi '^x-circuit-state: *open' && return 0
        elif [ "$got" = 0 ]; then
            printf '%s\n' "$resp" >"$2"
        fi
        sleep 0.15
    done
    return 0
}

# ------------------------------------------------------------- one run -----
# run_scenario on|off: the six phases against a fresh nginx and proxy; leaves
# its raw data in $OUT/run-RUN.
run_scenario() {
    local run=$1 R=$OUT/run-$1 i id pp
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
        --probe-timeout-ms "$PROBE_TIMEOUT_MS")
    [ "$run" = off ] && breaker_args=(--no-breaker)
    "$PROXY" --port 0 --port-file "$R/proxy.port" --upstream-port "$UP_PORT" \
        --upstream-timeout-ms "$UP_TIMEOUT_MS" --bucket-ms "$BUCKET_MS" \
        --stats-file "$R/stats.jsonl" --max-seconds $((TOTAL_S + 120)) --verbose \
        "${breaker_args[@]}" </dev/null 2>"$R/proxy.log" &
    PROXY_PID=$!
    i=0
    while [ ! -s "$R/proxy.port" ]; do
        if ! alive "$PROXY_PID" || [ "$i" -ge 100 ]; then
            log "proxy did not start: $(cat "$R/proxy.log")"
            return 1
        fi
        sleep 0.05
        i=$((i + 1))
    done
    pp=$(cat "$R/proxy.port")
    [ -n "$(http_status "$pp" /__state 2)" ] || { log "proxy does not answer"; return 1; }
    log "run '$run': nginx on 127.0.0.1:$UP_PORT, proxy on 127.0.0.1:$pp, phases ${DUR[*]} s"

    : >"$R/served.txt"
    for ((i = 0; i < NPHASES; i++)); do
        id=${PHASE_IDS[$i]}
        phase_enter "$i" || { log "run '$run': could not enter phase $id"; return 1; }
        http_get "$pp" "/__mark?phase=$id" 2 >/dev/null || { log "mark failed"; return 1; }
        wc -l <"$NG/access.log" >>"$R/served.txt"
        log "run '$run': phase $((i + 1))/$NPHASES $id (${DUR[$i]} s)"
        PROBE_PID=""
        if [ "${PHASE_OUTAGE[$i]}" = 1 ]; then
            probe_rejection "$pp" "$R/probe-$id.txt" $((DUR[i] * 400)) $((DUR[i] * 850)) &
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
    http_get "$pp" "/__mark?phase=end" 2 >/dev/null || { log "mark failed"; return 1; }
    wc -l <"$NG/access.log" >>"$R/served.txt"

    nginx_kill
    kill -TERM "$PROXY_PID"
    wait_gone "$PROXY_PID" 100 || { kill -KILL "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null; }
    PROXY_PID=""
    [ -s "$R/stats.jsonl" ] || { log "proxy wrote no stats"; return 1; }
    parse_run "$run"
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

# ----------------------------------------------------------- parsing --------
# parse_run RUN: turns the raw data of a run into two TSV files:
#   phases.tsv       one row per phase (columns: see the header line)
#   transitions.tsv  one row per transition: phase, seconds after the phase
#                    start, seconds after the scenario start, from, to, gen
#   rates.tsv        requests/s by kind per interval, t in s from the start
#   bands.tsv        breaker state intervals (start s, end s, state)
parse_run() {
    local run=$1 R=$OUT/run-$1 i id f
    : >"$R/wrk.tsv"
    : >"$R/probe.tsv"
    for ((i = 0; i < NPHASES; i++)); do
        id=${PHASE_IDS[$i]}
        f=$R/wrk-$id.txt
        awk -v id="$id" '
            function ms(v,   n, u) {
                n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
                if (u == "us") return n / 1000
                if (u == "s") return n * 1000
                if (u == "m") return n * 60000
                return n
            }
            /^ +50%/ { p50 = ms($2) }
            /^ +99%/ { p99 = ms($2) }
            / requests in / { reqs = $1 }
            /Non-2xx or 3xx/ { non2xx = $NF }
            /Socket errors/ { serr = $4 + $6 + $8 + $10 }
            /^Requests\/sec/ { rps = $2 }
            END {
                printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, (reqs == "" ? 0 : reqs),
                    (rps == "" ? 0 : rps), (p50 == "" ? "nan" : p50), (p99 == "" ? "nan" : p99),
                    (non2xx == "" ? 0 : non2xx), (serr == "" ? 0 : serr)
            }' "$f" >>"$R/wrk.tsv"
        f=$R/probe-$id.txt
        if [ -s "$f" ]; then
            awk -v id="$id" '
                NR == 1 { st = $2 }
                tolower($1) == "retry-after:" { ra = $2 }
                tolower($1) == "x-circuit-state:" { cs = $2 }
                /^circuit open: / { body = 1 }
                END { printf "%s\t%s\t%s\t%s\t%d\n", id, (st == "" ? "-" : st),
                      (ra == "" ? "-" : ra), (cs == "" ? "-" : cs), body }' "$f"
        else
            printf '%s\t-\t-\t-\t0\n' "$id"
        fi >>"$R/probe.tsv"
    done

    awk -F'\t' -v run="$run" -v bucket_ms="$BUCKET_MS" -v ids="${PHASE_IDS[*]}" \
        -v titles="$(IFS=';'; echo "${PHASE_TITLES[*]}")" -v outage="${PHASE_OUTAGE[*]}" \
        -v R="$R" '
        function val(line, key,   k, m) {
            k = "\"" key "\":"
            if (!match(line, k "(\"[^\"]*\"|[^,}]*)")) return ""
            m = substr(line, RSTART + length(k), RLENGTH - length(k))
            gsub(/"/, "", m)
            return m
        }
        BEGIN {
            nk = split("ok http_error conn_error timeout rejected cancelled local_error upstream", K, " ")
            np = split(ids, ID, " "); split(titles, TITLE, ";"); split(outage, OUT, " ")
        }
        FILENAME ~ /served.txt$/ { served[++ns] = $1 + 0; next }
        FILENAME ~ /wrk.tsv$/ { w[$1] = $0; next }
        FILENAME ~ /probe.tsv$/ { pr[$1] = $0; next }
        {
            t = val($0, "type")
            if (t == "mark") {
                nm++; mt[nm] = val($0, "t_ms") / 1000; mname[nm] = val($0, "phase")
                mstate[nm] = val($0, "state")
                for (k = 1; k <= nk; k++) mv[nm, K[k]] = val($0, K[k]) + 0
            } else if (t == "transition") {
                nt++; tt[nt] = val($0, "t_ms") / 1000; tf[nt] = val($0, "from")
                tto[nt] = val($0, "to"); tg[nt] = val($0, "generation")
            } else if (t == "bucket") {
                nb++; bt[nb] = val($0, "t_ms") / 1000
                for (k = 1; k <= nk; k++) bv[nb, K[k]] = val($0, K[k]) + 0
            }
        }
        END {
            if (nm < np + 1) { print "parse: expected " np + 1 " marks, got " nm > "/dev/stderr"; exit 1 }
            t0 = mt[1]
            ph = R "/phases.tsv"; tr = R "/transitions.tsv"
            printf "run\tidx\tid\ttitle\toutage\tstart_s\tdur_s" > ph
            for (k = 1; k <= nk; k++) printf "\t%s", K[k] > ph
            printf "\tserved\twrk_requests\twrk_rps\tp50_ms\tp99_ms\twrk_non2xx\twrk_socket_errors" > ph
            printf "\topened\tstate_at_end\tprobe_status\tretry_after\tprobe_circuit_state\tprobe_body_circuit\n" > ph
            printf "run\tidx\tid\tt_phase_s\tt_s\tfrom\tto\tgeneration\n" > tr
            for (p = 1; p <= np; p++) {
                opened = 0
                for (j = 1; j <= nt; j++)
                    if (tt[j] >= mt[p] && tt[j] < mt[p + 1] && tto[j] == "open") opened++
                printf "%s\t%d\t%s\t%s\t%d\t%.3f\t%.3f", run, p, ID[p], TITLE[p], OUT[p],
                    mt[p] - t0, mt[p + 1] - mt[p] > ph
                for (k = 1; k <= nk; k++) printf "\t%d", mv[p + 1, K[k]] - mv[p, K[k]] > ph
                split(w[ID[p]], W, "\t"); split(pr[ID[p]], P, "\t")
                printf "\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", served[p + 1] - served[p],
                    W[2], W[3], W[4], W[5], W[6], W[7], opened, mstate[p + 1], P[2], P[3], P[4], P[5] > ph
            }
            for (j = 1; j <= nt; j++) {
                for (p = np; p >= 1 && mt[p] > tt[j]; p--) ;
                if (p < 1) p = 1
                printf "%s\t%d\t%s\t%.3f\t%.3f\t%s\t%s\t%s\n", run, p, (tt[j] < mt[1] ? "before" : ID[p]),
                    tt[j] - mt[p], tt[j] - t0, tf[j], tto[j], tg[j] > tr
            }
            # Rates per second, per interval, within the scenario.
            rt = R "/rates.tsv"; bw = bucket_ms / 1000
            printf "t_s" > rt
            for (k = 1; k <= nk; k++) printf "\t%s", K[k] > rt
            printf "\n" > rt
            for (b = 1; b <= nb; b++) {
                if (bt[b] + bw <= t0 || bt[b] >= mt[np + 1]) continue
                printf "%.3f", bt[b] + bw / 2 - t0 > rt
                for (k = 1; k <= nk; k++) printf "\t%.1f", bv[b, K[k]] / bw > rt
                printf "\n" > rt
            }
            # Breaker state bands (breaker on only).
            bd = R "/bands.tsv"
            printf "" > bd
            if (mstate[1] != "off") {
                s = "closed"; from = 0
                for (j = 1; j <= nt; j++) {
                    if (tt[j] - t0 < 0) { s = tto[j]; continue }
                    printf "%.3f\t%.3f\t%s\n", from, tt[j] - t0, s > bd
                    s = tto[j]; from = tt[j] - t0
                }
                printf "%.3f\t%.3f\t%s\n", from, mt[np + 1] - t0, s > bd
            }
        }' "$R/served.txt" "$R/wrk.tsv" "$R/probe.tsv" "$R/stats.jsonl"
}

# ---------------------------------------------------------------- report ---
# report: markdown on stdout and in report.md, e2e.json; check results in
# checks.tsv (name, PASS/FAIL, detail).
report() {
    local on=$OUT/run-on off=$OUT/run-off
    local files=()
    [ -s "$on/phases.tsv" ] && files+=("$on/phases.tsv" "$on/transitions.tsv")
    [ -s "$off/phases.tsv" ] && files+=("$off/phases.tsv" "$off/transitions.tsv")
    awk -F'\t' -v out="$OUT" -v quick="$QUICK" -v conns="$CONNS" -v wthreads="$WRK_THREADS" \
        -v window="$WINDOW" -v probes="$PROBES" -v minr="$MIN_RESULTS" -v ratio="$RATIO" \
        -v closeafter="$CLOSE_AFTER" -v openfor="$OPEN_FOR_MS" -v ptimeout="$PROBE_TIMEOUT_MS" \
        -v utimeout="$UP_TIMEOUT_MS" -v bucket="$BUCKET_MS" -v durs="${DUR[*]}" '
        FNR == 1 { next }
        FILENAME ~ /phases.tsv$/ {
            r = $1; p = $2; np = (p > np ? p : np); has[r] = 1
            for (c = 1; c <= NF; c++) V[r, p, c] = $c
            next
        }
        FILENAME ~ /transitions.tsv$/ {
            r = $1; n = ++nt[r]
            for (c = 1; c <= NF; c++) T[r, n, c] = $c
            next
        }
        function num(x) { return (x == "" || x == "nan" || x == "-") ? "null" : x + 0 }
        function str(x) { return "\"" x "\"" }
        function fmtms(x) { return (x == "" || x == "nan") ? "-" : sprintf("%.2f", x) }
        function check(name, ok, detail) {
            nc++; CN[nc] = name; CO[nc] = ok; CD[nc] = detail
        }
        END {
            # Columns of phases.tsv.
            C_ID = 3; C_TITLE = 4; C_OUT = 5; C_START = 6; C_DUR = 7; C_OK = 8; C_HERR = 9
            C_CERR = 10; C_TMO = 11; C_REJ = 12; C_CAN = 13; C_LOC = 14; C_UP = 15; C_SERVED = 16
            C_WREQ = 17; C_WRPS = 18; C_P50 = 19; C_P99 = 20; C_N2XX = 21; C_SERR = 22
            C_OPENED = 23; C_STATE = 24; C_PST = 25; C_RA = 26; C_PCS = 27; C_PBODY = 28
            md = out "/report.md"
            split("on off", RUNS, " ")
            printf "## libcircuit end-to-end scenario%s\n\n", (quick ? " (quick)" : "") > md
            printf "Load: wrk -t%d -c%d per phase (closed loop), phases of %s s. ", wthreads, conns, durs > md
            printf "Breaker: window %d, probes %d, failure rate >= %s over >= %d results, close after %d probe successes, open %d ms, probe timeout %d ms. Upstream timeout %d ms.\n\n", window, probes, ratio, minr, closeafter, openfor, ptimeout, utimeout > md
            printf "### Requests per phase\n\n" > md
            printf "| phase | breaker | s | forwarded OK | upstream 5xx | conn error | timeout 504 | rejected 503 | client gone | sent upstream | served by nginx | p50 ms | p99 ms | breaker at end |\n" > md
            printf "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n" > md
            for (p = 1; p <= np; p++)
                for (ri = 1; ri <= 2; ri++) {
                    r = RUNS[ri]; if (!has[r]) continue
                    printf "| %d %s | %s | %.1f | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", p,
                        V[r, p, C_TITLE], r, V[r, p, C_DUR], V[r, p, C_OK], V[r, p, C_HERR], V[r, p, C_CERR],
                        V[r, p, C_TMO], V[r, p, C_REJ], V[r, p, C_CAN], V[r, p, C_UP], V[r, p, C_SERVED],
                        fmtms(V[r, p, C_P50]), fmtms(V[r, p, C_P99]), V[r, p, C_STATE] > md
                }
            printf "\n\"sent upstream\": requests the proxy sent or tried to send (connection attempts included); \"served by nginx\": lines in nginx'"'"'s access log; latencies: wrk, per phase.\n\n" > md

            if (has["on"]) {
                printf "### Breaker transitions (breaker on; seconds after the phase start)\n\n" > md
                printf "| phase | +s | transition | generation |\n|---|---:|---|---:|\n" > md
                for (j = 1; j <= nt["on"]; j++)
                    printf "| %s | %.3f | %s -> %s | %s |\n", T["on", j, 3], T["on", j, 4],
                        T["on", j, 6], T["on", j, 7], T["on", j, 8] > md
                printf "\n" > md
            }

            # Headline numbers.
            for (ri = 1; ri <= 2; ri++) {
                r = RUNS[ri]; load[r] = 0; served[r] = 0
                for (p = 1; p <= np; p++) {
                    if (V[r, p, C_ID] == "hung") { hp50[r] = V[r, p, C_P50]; hp99[r] = V[r, p, C_P99] }
                    if (V[r, p, C_OUT] == 1) { load[r] += V[r, p, C_UP]; served[r] += V[r, p, C_SERVED] }
                }
            }
            close_s = ""
            if (has["on"]) {
                for (p = 1; p <= np; p++) if (V["on", p, C_ID] == "back") bp = p
                for (j = 1; j <= nt["on"]; j++)
                    if (T["on", j, 2] >= bp && T["on", j, 7] == "closed" && close_s == "") {
                        close_s = T["on", j, 5] - V["on", bp, C_START]
                    }
            }
            printf "### Headline\n\n| | breaker on | breaker off |\n|---|---:|---:|\n" > md
            printf "| load on the upstream during the outages (requests sent upstream, phases 2-4) | %s | %s |\n",
                (has["on"] ? load["on"] : "-"), (has["off"] ? load["off"] : "-") > md
            printf "| ... of which served by nginx | %s | %s |\n",
                (has["on"] ? served["on"] : "-"), (has["off"] ? served["off"] : "-") > md
            printf "| client latency while the upstream hangs, p50 / p99 ms | %s / %s | %s / %s |\n",
                fmtms(hp50["on"]), fmtms(hp99["on"]), fmtms(hp50["off"]), fmtms(hp99["off"]) > md
            printf "| time from upstream back to breaker closed | %s | n/a |\n\n",
                (close_s == "" ? "never" : sprintf("%.3f s (it was %s then)", close_s, V["on", bp - 1, C_STATE])) > md
            printf "Latency percentiles are wrk'"'"'s, which it corrects for coordinated omission: with the breaker on, the few ~%d ms probes of the hung phase lift its p99 far above the fast rejections that make up the p50.\n\n", utimeout > md

            # Checks (they need both runs).
            if (has["on"] && has["off"]) {
                for (p = 1; p <= np; p++) {
                    if (V["on", p, C_OUT] != 1) continue
                    id = V["on", p, C_ID]
                    check("breaker opens in phase " id, V["on", p, C_OPENED] >= 1,
                          V["on", p, C_OPENED] " transition(s) to open")
                    # Retry-After: the time left open rounded up, so 1..ceil(open_for).
                    ok = V["on", p, C_PST] == 503 && V["on", p, C_PCS] == "open" && V["on", p, C_PBODY] == 1 &&
                         V["on", p, C_RA] ~ /^[0-9]+$/ && V["on", p, C_RA] >= 1 && V["on", p, C_RA] <= int((openfor + 999) / 1000)
                    check("503 with Retry-After while open, phase " id, ok,
                          "status " V["on", p, C_PST] ", Retry-After " V["on", p, C_RA] ", X-Circuit-State " V["on", p, C_PCS])
                    check("fewer upstream requests with the breaker, phase " id, V["on", p, C_UP] < V["off", p, C_UP],
                          V["on", p, C_UP] " on vs " V["off", p, C_UP] " off")
                    ok = V["off", p, C_RA] == "-"
                    check("no Retry-After without the breaker, phase " id, ok, "Retry-After " V["off", p, C_RA])
                }
                check("upstream load during outages on <= 20% of off", load["on"] * 5 <= load["off"],
                      load["on"] " on vs " load["off"] " off")
                check("breaker closed by the end of the final phase", V["on", np, C_STATE] == "closed",
                      "state " V["on", np, C_STATE] "; closed " (close_s == "" ? "never" : sprintf("%.3f s", close_s)) " after the upstream came back")
                rej = 0
                for (p = 1; p <= np; p++) rej += V["off", p, C_REJ]
                check("no rejections without the breaker", rej == 0, rej " rejected")
                fails = 0
                printf "### Checks\n\n" > md
                for (c = 1; c <= nc; c++) {
                    printf "- %s: %s (%s)\n", (CO[c] ? "PASS" : "FAIL"), CN[c], CD[c] > md
                    if (!CO[c]) fails++
                }
                printf "\n%d passed, %d failed\n", nc - fails, fails > md
            }
            close(md)

            # JSON.
            js = out "/e2e.json"
            durs_json = durs
            gsub(/ /, ", ", durs_json)
            printf "{\n  \"scenario\": {\"quick\": %s, \"phase_seconds\": [%s], \"wrk_threads\": %d, \"connections\": %d,\n", (quick ? "true" : "false"), durs_json, wthreads, conns > js
            printf "    \"breaker\": {\"window\": %d, \"probes\": %d, \"min_results\": %d, \"ratio\": %s, \"close_after\": %d, \"open_for_ms\": %d, \"probe_timeout_ms\": %d},\n", window, probes, minr, ratio, closeafter, openfor, ptimeout > js
            printf "    \"upstream_timeout_ms\": %d, \"bucket_ms\": %d},\n  \"runs\": {", utimeout, bucket > js
            sep = ""
            for (ri = 1; ri <= 2; ri++) {
                r = RUNS[ri]; if (!has[r]) continue
                printf "%s\n    \"%s\": {\n      \"phases\": [", sep, r > js; sep = ","
                for (p = 1; p <= np; p++) {
                    printf "%s\n        {\"id\": %s, \"title\": %s, \"outage\": %s, \"start_s\": %s, \"duration_s\": %s,", (p > 1 ? "," : ""),
                        str(V[r, p, C_ID]), str(V[r, p, C_TITLE]), (V[r, p, C_OUT] ? "true" : "false"), num(V[r, p, C_START]), num(V[r, p, C_DUR]) > js
                    printf " \"forwarded_ok\": %d, \"upstream_error\": %d, \"conn_error\": %d, \"timeout\": %d, \"rejected\": %d, \"client_gone\": %d, \"local_error\": %d,",
                        V[r, p, C_OK], V[r, p, C_HERR], V[r, p, C_CERR], V[r, p, C_TMO], V[r, p, C_REJ], V[r, p, C_CAN], V[r, p, C_LOC] > js
                    printf " \"sent_upstream\": %d, \"served_by_upstream\": %d, \"wrk_requests\": %s, \"wrk_rps\": %s, \"p50_ms\": %s, \"p99_ms\": %s, \"wrk_non2xx\": %s, \"wrk_socket_errors\": %s,",
                        V[r, p, C_UP], V[r, p, C_SERVED], num(V[r, p, C_WREQ]), num(V[r, p, C_WRPS]), num(V[r, p, C_P50]), num(V[r, p, C_P99]), num(V[r, p, C_N2XX]), num(V[r, p, C_SERR]) > js
                    printf " \"opened\": %d, \"breaker_at_end\": %s, \"probe\": {\"status\": %s, \"retry_after\": %s, \"circuit_state\": %s}}",
                        V[r, p, C_OPENED], str(V[r, p, C_STATE]), num(V[r, p, C_PST]), num(V[r, p, C_RA]), str(V[r, p, C_PCS]) > js
                }
                printf "\n      ],\n      \"transitions\": [" > js
                for (j = 1; j <= nt[r]; j++)
                    printf "%s\n        {\"phase\": %s, \"t_phase_s\": %s, \"t_s\": %s, \"from\": %s, \"to\": %s, \"generation\": %s}", (j > 1 ? "," : ""),
                        str(T[r, j, 3]), num(T[r, j, 4]), num(T[r, j, 5]), str(T[r, j, 6]), str(T[r, j, 7]), num(T[r, j, 8]) > js
                printf "\n      ]\n    }" > js
            }
            printf "\n  },\n  \"headline\": {\n" > js
            printf "    \"upstream_load_during_outages\": {\"on\": %s, \"off\": %s},\n", (has["on"] ? load["on"] : "null"), (has["off"] ? load["off"] : "null") > js
            printf "    \"served_during_outages\": {\"on\": %s, \"off\": %s},\n", (has["on"] ? served["on"] : "null"), (has["off"] ? served["off"] : "null") > js
            printf "    \"hung_latency_ms\": {\"on\": {\"p50\": %s, \"p99\": %s}, \"off\": {\"p50\": %s, \"p99\": %s}},\n", num(hp50["on"]), num(hp99["on"]), num(hp50["off"]), num(hp99["off"]) > js
            printf "    \"back_to_closed_s\": %s, \"state_when_back\": %s\n  },\n  \"checks\": [", (close_s == "" ? "null" : sprintf("%.3f", close_s)), (has["on"] ? str(V["on", bp - 1, C_STATE]) : "null") > js
            for (c = 1; c <= nc; c++)
                printf "%s\n    {\"name\": %s, \"pass\": %s, \"detail\": %s}", (c > 1 ? "," : ""), str(CN[c]), (CO[c] ? "true" : "false"), str(CD[c]) > js
            printf "\n  ]\n}\n" > js
            close(js)
            print (nc == 0 ? "NOCHECKS" : fails) > (out "/checks.result")
        }' "${files[@]}"
}

# ------------------------------------------------------------------ plot ---
plot() {
    local gp=$OUT/e2e.gp r fmt panels=0 first xmax phase_files=()
    for r in $RUNS; do
        if [ -s "$OUT/run-$r/rates.tsv" ]; then
            panels=$((panels + 1))
            phase_files+=("$OUT/run-$r/phases.tsv")
        fi
    done
    [ "$panels" -gt 0 ] || return 0
    xmax=$(awk -F'\t' 'FNR > 1 && $6 + $7 > m { m = $6 + $7 } END { printf "%.2f", m + 0.05 }' \
        "${phase_files[@]}")
    {
        echo "# generated by $PROG: requests/s by kind over time, breaker state as"
        echo "# bands, phase boundaries as dashed lines. Data: run-*/rates.tsv."
        echo "set datafile separator tab"
        echo "set logscale y"
        echo "set yrange [0.45:1000000]"
        echo "set ytics ('0' 0.6, '1' 1, '10' 10, '100' 100, '1k' 1000, '10k' 10000, '100k' 100000) nomirror"
        echo "set ylabel 'requests/s (log scale)'"
        echo "set grid ytics lc rgb '#d0d0d0' lw 0.5"
        echo "set border 3"
        echo "set xtics nomirror"
        echo "set xrange [0:$xmax]"
        echo "set lmargin 11"
        echo "set rmargin 27"
        echo "set style textbox opaque noborder"
        echo "set key at screen 0.995, screen 0.93 right top vertical Left reverse noenhanced samplen 2.5 spacing 1.3 box lc rgb '#bbbbbb'"
        # A kind's rate, or undefined when zero (log scale); 'sent upstream'
        # shows zero on the '0' line, so that the outages read as load, not gaps.
        echo "nz(c) = column(c) > 0 ? column(c) : 1/0"
        echo "z0(c) = column(c) > 0 ? column(c) : 0.6"
        for fmt in png svg; do
            if [ "$fmt" = png ]; then
                echo "set terminal pngcairo size 1500,$((380 * panels + 90)) font 'Sans,11'"
            else
                echo "set terminal svg size 1500,$((380 * panels + 90)) font 'Sans,11' background rgb 'white'"
            fi
            echo "set output '$OUT/e2e.$fmt'"
            echo "set multiplot layout $panels,1 title 'circuit-proxy in front of nginx: requests/s by kind, ${BUCKET_MS} ms intervals (wrk -t$WRK_THREADS -c$CONNS, closed loop)' font ',13'"
            first=1
            for r in $RUNS; do
                local R=$OUT/run-$r
                [ -s "$R/rates.tsv" ] || continue
                echo "unset object"
                echo "unset arrow"
                echo "unset label"
                # Breaker state bands, behind the curves.
                awk -F'\t' '{
                    c = ($3 == "open") ? "#f7c4c4" : ($3 == "half-open") ? "#fbe29a" : "#d4efd4"
                    printf "set object %d rect from %s, graph 0 to %s, graph 1 fc rgb \"%s\" fs solid 1.0 noborder behind\n", NR, $1, $2, c
                }' "$R/bands.tsv"
                # Phase boundaries and names; upstream load in the outages.
                awk -F'\t' '
                    NR > 1 {
                        if ($2 > 1)
                            printf "set arrow from %s, graph 0 to %s, graph 1 nohead dt 2 lw 1.5 lc rgb \"#333333\" front\n", $6, $6
                        printf "set label \"%s\" at %s, graph 0.955 center front boxed font \",10\"\n", $4, $6 + $7 / 2
                        if ($5 == 1) up += $15
                    }
                    END { printf "set label \"sent upstream during the outages (phases 2-4): %d\" at graph 0.01, graph 0.05 left front boxed font \",10\"\n", up }' "$R/phases.tsv"
                if [ "$r" = on ]; then
                    echo "set title 'breaker ON  (background: green closed, red open, yellow half-open)' font ',12'"
                else
                    echo "set title 'breaker OFF  (--no-breaker: every request is forwarded)' font ',12'"
                fi
                if [ "$first" = 1 ]; then echo "set key"; else echo "unset key"; fi
                echo "set xlabel 'seconds since the scenario start'"
                echo "plot '$R/rates.tsv' using 1:(nz(2)) every ::1 with linespoints lw 2 pt 7 ps 0.45 lc rgb '#1a9641' title 'forwarded OK', \\"
                echo "     '' using 1:(nz(3)) every ::1 with linespoints lw 2 pt 7 ps 0.45 lc rgb '#8e44ad' title 'upstream 5xx', \\"
                echo "     '' using 1:(nz(4)) every ::1 with linespoints lw 2 pt 7 ps 0.45 lc rgb '#8c510a' title 'conn error 502', \\"
                echo "     '' using 1:(nz(5)) every ::1 with linespoints lw 2 pt 7 ps 0.45 lc rgb '#e66101' title 'timeout 504', \\"
                echo "     '' using 1:(nz(6)) every ::1 with linespoints lw 2 pt 7 ps 0.45 lc rgb '#2166ac' title 'rejected 503 (fast)', \\"
                echo "     '' using 1:(z0(9)) every ::1 with histeps lw 1.5 lc rgb '#000000' title 'sent upstream'"
                first=0
            done
            echo "unset multiplot"
            echo "set output"
        done
    } >"$gp"
    if gnuplot "$gp" 2>"$OUT/gnuplot.log"; then
        log "plot: $OUT/e2e.png, $OUT/e2e.svg"
    else
        log "gnuplot failed: $(cat "$OUT/gnuplot.log")"
    fi
}

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
    report
    cat "$OUT/report.md"
    [ "$PLOT" = 1 ] && plot
    log "report: $OUT/report.md, $OUT/e2e.json"
    result=$(cat "$OUT/checks.result" 2>/dev/null)
    if [ "$CHECK" = 1 ]; then
        case $result in
        0) ;;
        NOCHECKS) log "--check needs both runs"; status=1 ;;
        *) log "$result check(s) failed"; status=1 ;;
        esac
    fi
fi
exit "$status"
