#!/usr/bin/env bash
# The emulator ctest runs the aarch64 tests with (.ci/aarch64-test.sh passes
# it as CIRCUIT_QEMU_AARCH64, which cmake/toolchains/aarch64-linux-gnu-common.cmake
# makes CMAKE_CROSSCOMPILING_EMULATOR): runs `qemu-aarch64 ARGS...` and
# watches it, so that a test that hangs is reported within about a minute,
# by name, with what its processes were waiting for, instead of silently
# using up ctest's timeout.
#
#   aarch64-qemu-run.sh [qemu arguments] PROGRAM [ARGS...]
#
# A STALL is the test's whole process tree (qemu, Criterion's workers, the
# children a test forks) using less than 1 s of CPU time in the last
# CIRCUIT_QEMU_STALL seconds: a program that works, however slowly on a
# loaded machine, keeps using CPU or waits for one (state R, which counts as
# progress); one stuck in a wait does not (a thread that wakes from a poll
# now and then uses a few milliseconds). The script then prints every process of the
# tree (state, what it waits in, each thread's system call) and the host-side
# stacks of the qemu processes (gdb, when installed), kills the tree, and
# runs the program ONCE more; a second stall fails the test (exit 124). Why a
# retry is sound: libcircuit never blocks (no lock, no wait: L1), so a stall
# with every process asleep is the harness's (Criterion's fork/stop/exec
# start-up of a worker under qemu-user, see .ci/aarch64-test.sh), and a test
# that really waits forever stalls again and fails. Each stall is appended to
# CIRCUIT_QEMU_HANG_LOG, which .ci/aarch64-test.sh counts in its summary, so
# a retried stall is never silent. A run past CIRCUIT_QEMU_LIMIT seconds of
# wall-clock time (a loop that spins) is reported the same way and fails at
# once (exit 124).
#
# Environment:
#   CIRCUIT_QEMU_REAL      the real qemu-aarch64 (default: the one on PATH)
#   CIRCUIT_QEMU_STALL     seconds without CPU progress that make a stall (default 60)
#   CIRCUIT_QEMU_LIMIT     wall-clock limit in seconds per attempt (default 900);
#                          aarch64-test.sh sets it per test from its normal time
#   CIRCUIT_QEMU_TEST      the test's name, for the report (set per test likewise)
#   CIRCUIT_QEMU_HANG_LOG  file the reports are appended to (optional)
#   CIRCUIT_QEMU_RETRIES   runs after a stall (default 1)
set -uo pipefail

qemu=${CIRCUIT_QEMU_REAL:-$(command -v qemu-aarch64)}
stall=${CIRCUIT_QEMU_STALL:-60}
limit=${CIRCUIT_QEMU_LIMIT:-900}
retries=${CIRCUIT_QEMU_RETRIES:-1}
name=${CIRCUIT_QEMU_TEST:-$(basename "${!#}")}
log=${CIRCUIT_QEMU_HANG_LOG:-}
tick=2
# less than this much CPU over `stall` seconds is a stall: 1 s (a working
# test under qemu uses several seconds a minute even on a machine with ten
# times more runnable threads than CPUs)
clk=$(getconf CLK_TCK 2>/dev/null || echo 100)
min_ticks=$clk
top=
state=$(mktemp)
trap 'rm -f "$state"' EXIT
trap '[[ -n "$top" ]] && kill -TERM "$top" 2>/dev/null; exit 143' TERM INT

# "pid ppid cpu" for every process: cpu = utime + stime (clock ticks; the
# process's own threads, not its reaped children).
all_procs() {
    awk '{ line = $0; sub(/^.*\) /, "", line); n = split(line, f, " ")
           if (n >= 13) print substr(FILENAME, 7, length(FILENAME) - 11), f[2], f[12] + f[13], f[1] }' \
        /proc/[0-9]*/stat 2>/dev/null
}

# "ticks running pid..." for $top and its descendants: running is 1 when one
# of them is runnable (state R: starved of CPU on a loaded machine, not
# stuck), and ticks is the CPU they used since
# the previous call (each process's own increase, a new process's whole
# time; a process that ended or left the tree takes nothing away) and their
# pids. The previous call's "pid cpu" lines are kept in $state.
tree() {
    all_procs | awk -v top="$top" -v state="$state" '
        FILENAME == state { before[$1] = $2; next }
        { ppid[$1] = $2; cpu[$1] = $3; st[$1] = $4 }
        END {
            in_tree[top] = 1; changed = 1
            while (changed) {
                changed = 0
                for (p in ppid) if (!(p in in_tree) && (ppid[p] in in_tree)) { in_tree[p] = 1; changed = 1 }
            }
            used = 0; running = 0; list = ""
            printf "" > state
            for (p in in_tree) if (p in cpu) {
                d = cpu[p] - ((p in before) ? before[p] : 0)
                if (d > 0) used += d
                if (st[p] == "R") running = 1
                list = list " " p
                print p, cpu[p] > state
            }
            print used, running list
        }' "$state" -
}

# report WHY PIDS ARGS...: what each process waits in, to stderr and the log
report() {
    local why=$1 pids=$2
    shift 2
    {
        echo "aarch64-qemu-run: $why"
        echo "aarch64-qemu-run: command: $qemu $*"
        echo "aarch64-qemu-run: its processes (host view; syscall numbers are x86-64's):"
        ps -o pid,ppid,stat,etimes,time,nlwp,wchan:28,args -p "${pids// /,}" 2>/dev/null | sed 's/^/  /'
        for p in $pids; do
            for t in /proc/"$p"/task/*; do
                [[ -r $t/syscall ]] || continue
                echo "  pid $p thread ${t##*/}: wchan $(cat "$t/wchan" 2>/dev/null || echo '?'), syscall $(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null || echo '?')"
            done
        done
        if command -v gdb >/dev/null; then
            for p in $pids; do
                echo "aarch64-qemu-run: host stacks of pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)):"
                timeout 20 gdb -p "$p" -batch -nx -ex 'set pagination off' \
                    -ex 'thread apply all bt 12' 2>/dev/null |
                    grep -E '^(Thread|#)' | sed 's/^/    /'
            done
        fi
    } 2>&1 | if [[ -n "$log" ]]; then tee -a "$log" >&2; else cat >&2; fi
    kill_tree
}

# Stops the tree top-down until no new process appears (a process that is
# forking would otherwise leave children behind, reparented away from the
# tree, holding ctest's output pipe), then kills every process seen.
kill_tree() {
    local all="" prev="" now cpu running pids i
    for i in 1 2 3 4 5 6 7 8; do
        read -r cpu running pids < <(tree)
        now=$(tr ' ' '\n' <<<"$pids" | sort -u | tr '\n' ' ')
        # shellcheck disable=SC2086
        kill -STOP $pids 2>/dev/null
        all="$all $pids"
        [[ "$now" == "$prev" ]] && break
        prev=$now
    done
    # shellcheck disable=SC2086
    kill -KILL $all 2>/dev/null
}

# run_once ARGS...: 0..255 the program's status; 124 after a stall report,
# 125 after a limit report (both after killing the tree)
run_once() {
    # (stdin passed on explicitly: a background job would get /dev/null)
    exec 3<&0
    "$qemu" "$@" <&3 3<&- &
    top=$!
    exec 3<&-
    local start=$SECONDS ticks running pids used i sleeper ended rc
    local -a at=() got=()   # samples: time (s), CPU ticks the tree used since the previous one
    : >"$state"
    while :; do
        # a tick, cut short when the program ends (a plain `sleep $tick`
        # made every test last a whole number of ticks: up to 2 s more per
        # test, a minute over the aarch64 step's 120 runs)
        sleep "$tick" </dev/null >/dev/null 2>&1 &
        sleeper=$!
        ended=
        wait -n -p ended "$top" "$sleeper"
        rc=$?
        if [[ $ended == "$top" ]]; then
            kill "$sleeper" 2>/dev/null
            wait "$sleeper" 2>/dev/null
            return "$rc"
        fi
        kill -0 "$top" 2>/dev/null || break
        read -r ticks running pids < <(tree)
        # a runnable process is waiting for a CPU, not stuck: progress
        ((running && ticks < min_ticks)) && ticks=$min_ticks
        at+=("$SECONDS")
        got+=("$ticks")
        # the CPU the tree used over the last `stall` seconds; a waiting
        # thread that wakes now and then (a poll timeout) uses a few ticks,
        # a working program far more
        while ((${#at[@]} > 1 && SECONDS - at[1] >= stall)); do
            at=("${at[@]:1}")
            got=("${got[@]:1}")
        done
        used=0
        for ((i = 1; i < ${#got[@]}; i++)); do used=$((used + got[i])); done
        if ((SECONDS - at[0] >= stall && used < min_ticks)); then
            report "STALL: test $name: its processes used $((used * 1000 / clk)) ms of CPU in the last $((SECONDS - at[0])) s (after $((SECONDS - start)) s); killing it" "$pids" "$@"
            wait "$top" 2>/dev/null
            return 124
        fi
        if ((SECONDS - start >= limit)); then
            report "LIMIT: test $name: still running after $((SECONDS - start)) s, its limit under qemu (CIRCUIT_QEMU_LIMIT); killing it" "$pids" "$@"
            wait "$top" 2>/dev/null
            return 125
        fi
    done
    wait "$top"
}

attempt=1
while :; do
    run_once "$@"
    rc=$?
    if ((rc == 124 && attempt <= retries)); then
        attempt=$((attempt + 1))
        echo "aarch64-qemu-run: test $name: running it again after the stall (attempt $attempt)" |
            if [[ -n "$log" ]]; then tee -a "$log" >&2; else cat >&2; fi
        continue
    fi
    ((rc == 125)) && rc=124
    exit "$rc"
done
