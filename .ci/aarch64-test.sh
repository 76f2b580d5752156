#!/usr/bin/env bash
# The aarch64 suite: cross-build libcircuit, its unit tests, the model
# differential and the stress programs for aarch64 with gcc and with clang
# (Release, CIRCUIT_WERROR=ON), check that the library's objects keep their
# memory-ordering instructions, and run the tests under qemu-user.
#
# What runs where (each build is complete and -Werror with both compilers):
#   gcc    every aarch64 test: unit (Criterion), model.*, stress.*
#   clang  the unit tests and model.selftest; NOT the stress programs (label
#          stress) nor model.differential{,.rates} (clang_reduced below):
#          the gcc run runs those same programs under qemu, the werror-clang
#          step runs them natively with clang's code generation, and under
#          qemu they were about half of the clang run (~130 of 245 s). The
#          clang-built library's aarch64 code is still run by the unit tests
#          (the race tests among them) and checked by the ordering check.
#   both   .ci/check-aarch64-ordering.sh on both builds' libcircuit.a
#
#   .ci/aarch64-test.sh [--build-only] [gcc] [clang]    (default: both)
#
# --build-only: configure and build only (no tests, no ordering check), e.g.
# before regenerating the ordering baseline:
#   bash .ci/aarch64-test.sh --build-only && .ci/check-aarch64-ordering.sh --update
#
# Builds in build/aarch64-gcc and build/aarch64-clang, on the arm64 sysroot of
# .ci/aarch64-sysroot.sh (build/aarch64-sysroot; nothing arm64 is installed
# with apt). Run as root on a machine without the cross tools, it installs
# them (apt-get install, amd64 packages only).
#
# Environment:
#   CIRCUIT_STRESS_SCALE   operation counts of the stress programs and the
#                          differential (default here 0.1: qemu runs them
#                          ~10 times slower than the host)
#   CTEST_PARALLEL_LEVEL   ctest jobs (default: the number of cores)
#
# qemu-user runs the aarch64 code on the host's memory ordering (x86-64 here):
# these runs prove that the code builds and behaves on aarch64, not that its
# ordering is right on real ARM hardware. The ordering comes from the C11
# orders in src/atomics.h (which the compilers map to ldar/stlr/dmb...),
# checked per function by .ci/check-aarch64-ordering.sh against its baseline
# (which .ci/check-aarch64-ordering-selftest.sh checks first), and from
# TSan running the same atomics on x86-64.
#
# Ends with "aarch64: N passed, M failed, K skipped" (ctest's counts of both
# compilers added up, plus the skips below) and exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
start=$SECONDS

compilers=()
build_only=0
for a in "$@"; do
    case "$a" in
        gcc|clang) compilers+=("$a") ;;
        --build-only) build_only=1 ;;
        *) echo "usage: $0 [--build-only] [gcc] [clang]" >&2; exit 2 ;;
    esac
done
((${#compilers[@]})) || compilers=(gcc clang)

# ---- tests skipped under qemu-user, by name, with the reason ---------------------
# Criterion tests ("suite/test"): left out through CRITERION_TEST_PATTERN.
criterion_skips=(
    "tickets/T5_done_racing_release_settles_once_and_frees_the_slot_once|forks the (multi-threaded) Criterion worker and starts threads in the child; qemu-user 7.2 aborts at that clone (plugins/core.c: qemu_plugin_vcpu_init_hook: assertion failed, then cpu-exec.c: cpu == current_cpu)"
    "closed/T5_probe_ticket_done_racing_release_settles_once|the same qemu-user abort: a thread started in a child forked from the Criterion worker (the child exits 127)"
)
# Whole ctest tests (plain programs): left out with ctest -E. None now:
# stress.nolock was, until its TM1 check waited for a joined thread to leave
# /proc/self/task (qemu-user keeps it listed a while after pthread_join).
ctest_skips=()
# Not aarch64 code at all, run by the x86-64 steps; left out with ctest -LE,
# not counted as skipped: "rules" (Python checks of the sources) and "spin"
# (SPIN models, whose verifier would be built with the cross compiler).
host_only_labels=(rules spin)
# Left out of the clang run only when the gcc run is made too (see the top
# of this file; `aarch64-test.sh clang` alone runs everything): label
# stress, and these tests by name.
clang_reduced_labels=(stress)
clang_reduced_tests=(model.differential model.differential.rates)

# ---- tools -------------------------------------------------------------------------
tools=(aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ aarch64-linux-gnu-objdump qemu-aarch64 clang
       cmake ninja pkg-config)
packages=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
          binutils-aarch64-linux-gnu qemu-user clang cmake ninja-build pkg-config)
missing=()
for t in "${tools[@]}"; do
    command -v "$t" >/dev/null || missing+=("$t")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "== installing the cross tools (missing: ${missing[*]})"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${packages[@]}"
    else
        echo "aarch64-test: missing ${missing[*]}; as root: apt-get install ${packages[*]}" >&2
        exit 2
    fi
fi

# ---- sysroot -------------------------------------------------------------------------
sysroot=$root/build/aarch64-sysroot
bash .ci/aarch64-sysroot.sh "$sysroot"
export CIRCUIT_AARCH64_SYSROOT=$sysroot

# ---- the exec helper: Criterion re-executes its own program for every test ----------
# (see .ci/aarch64-qemu-exec.c); without a binfmt_misc handler that exec needs
# to go through qemu-aarch64 again.
# The preload path holds $LIB, which the guest's ld.so expands to
# lib/aarch64-linux-gnu and the host's to lib/<host multiarch>: host programs
# that a test starts (sh, promtool) inherit the variable and load an empty
# host library instead of printing an error about the aarch64 one.
qemu=$(command -v qemu-aarch64)
helper_dir=$root/build/aarch64-qemu-exec
host_multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
mkdir -p "$helper_dir/lib/aarch64-linux-gnu" "$helper_dir/lib/$host_multiarch"
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -shared -fPIC \
    -o "$helper_dir/lib/aarch64-linux-gnu/libcircuit-qemu-exec.so" .ci/aarch64-qemu-exec.c
echo 'int circuit_qemu_exec_host_placeholder;' |
    gcc -x c -shared -fPIC -o "$helper_dir/lib/$host_multiarch/libcircuit-qemu-exec.so" -

export QEMU_LD_PREFIX=$sysroot
export QEMU_SET_ENV="LD_PRELOAD=$helper_dir/\$LIB/libcircuit-qemu-exec.so"
# THE HANG OF A CRITERION PROGRAM UNDER QEMU (seen as unit_presets and
# unit_config printing nothing until a timeout): qemu-user 7.2 is linked
# with GLib 2.74, whose slice allocator (g_slice) keeps its own mutexes,
# which fork() does not make consistent. Criterion forks each test's worker
# from a process with several qemu threads (BoxFort ends and starts a thread
# around each fork; qemu frees an ended thread's state from its RCU thread);
# if the fork lands while another qemu thread holds the slice mutex, the
# child blocks forever in its first code translation (host stack of the
# stuck child, caught in unit_config: futex <- g_slice_alloc <-
# tcg_tb_insert <- tb_gen_code <- cpu_exec), and the runner waits for it
# forever. G_SLICE=always-malloc makes g_slice use malloc, which glibc's fork
# does make consistent. (GLib 2.76 and later always do this; qemu reads the
# variable, the aarch64 programs ignore it.)
export G_SLICE=always-malloc
export CIRCUIT_QEMU_AARCH64=$qemu   # read by the exec helper (in the guest)
export CIRCUIT_QEMU_REAL=$qemu      # read by .ci/aarch64-qemu-run.sh
export CIRCUIT_STRESS_SCALE=${CIRCUIT_STRESS_SCALE:-0.1}
export CRITERION_JOBS=1            # one test at a time per program; ctest runs programs in parallel
export CIRCUIT_QEMU_STALL=60        # .ci/aarch64-qemu-run.sh: a hang is reported after 60 s without CPU
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$(nproc)}
ulimit -c 0                         # qemu writes a core file for every expected abort otherwise

pattern=""
for s in "${criterion_skips[@]}"; do
    pattern+="${pattern:+|}${s%%|*}"
done
[[ -n "$pattern" ]] && export CRITERION_TEST_PATTERN="!($pattern)"
exclude=""
for s in "${ctest_skips[@]}"; do
    name=${s%%|*}
    exclude+="${exclude:+|}^${name//./\\.}\$"
done

# ---- time limits under qemu ------------------------------------------------------------
# ctest runs every program through .ci/aarch64-qemu-run.sh (the build's
# CMAKE_CROSSCOMPILING_EMULATOR, via CIRCUIT_QEMU_AARCH64 below), which reports
# a STALL when the test's processes use less than 1 s of CPU in 60 s (a
# hang: it prints what each process waits in, runs the program once more,
# and fails it if it stalls again), and stops a test that runs past its
# LIMIT here (a spin). The limit is 4 x the test's normal time under qemu,
# and at least 120 s. Normal times: `ctest -j2` of this script on the 2-core
# CI machine while other builds ran (load 12 to 19), the longest of the
# runs, rounded up; a test not listed took at most 30 s. A new slow test
# gets a line here (its LIMIT report names it).
qemu_normal_s=(
    # name (bash regex)                 normal seconds under qemu, loaded
    "^stress\\.handoff\\.               120"
    "^stress\\.mixed\\.                 90"
    "^stress\\.signals\\.               60"
    "^unit_memory$                      90"
    "^model\\.differential$             90"
    "^unit_compat$                      70"
    "^unit_closed$                      90"
    "^unit_(presets|concurrency|config)$ 60"
)
qemu_limit_of() { # TEST -> limit in seconds
    local entry normal=30
    for entry in "${qemu_normal_s[@]}"; do
        read -r re n <<<"$entry"
        if [[ $1 =~ $re ]]; then normal=$n; break; fi
    done
    local l=$((4 * normal))
    echo $((l < 120 ? 120 : l))
}
# ctest reads the build's tests through this overlay, which only sets each
# test's limit (CIRCUIT_QEMU_LIMIT for the wrapper, ctest's TIMEOUT 60 s
# above it as a backstop) and its name for the wrapper's report.
write_limits_overlay() { # BUILD_DIR OVERLAY_DIR
    local b=$1 o=$2 t lim
    mkdir -p "$o"
    {
        echo "# Generated by .ci/aarch64-test.sh: the tests of $b with their limits under qemu."
        echo "subdirs(\"$root/$b\")"
        ctest --test-dir "$b" -N | sed -n 's/^ *Test *#[0-9]*: *//p' | while read -r t; do
            lim=$(qemu_limit_of "$t")
            echo "set_tests_properties($t PROPERTIES TIMEOUT $((lim + 60)) ENVIRONMENT_MODIFICATION \"CIRCUIT_QEMU_LIMIT=set:$lim;CIRCUIT_QEMU_TEST=set:$t\")"
        done
    } >"$o/CTestTestfile.cmake"
}

echo "== aarch64: qemu $("$qemu" --version | head -n1 | sed 's/.*version //'), sysroot $sysroot"
echo "== CIRCUIT_STRESS_SCALE=$CIRCUIT_STRESS_SCALE, ctest -j$CTEST_PARALLEL_LEVEL, CRITERION_JOBS=1"

declare -A result=()
clang_reduced_applied=0
stalls=()
passed=0
failed=0
skipped=0
builds=()
for cc in "${compilers[@]}"; do
    b=build/aarch64-$cc
    echo
    echo "== aarch64 $cc: configure + build ($b)"
    t0=$SECONDS
    if ! cmake -S . -B "$b" -G Ninja \
            --toolchain "cmake/toolchains/aarch64-linux-gnu-$cc.cmake" \
            -DCMAKE_BUILD_TYPE=Release -DCIRCUIT_WERROR=ON \
            -DCIRCUIT_BUILD_BENCH=OFF -DCIRCUIT_INSTALL=OFF \
            -DCIRCUIT_AARCH64_SYSROOT="$sysroot" \
            -DCIRCUIT_QEMU_AARCH64="$root/.ci/aarch64-qemu-run.sh" >"$b.configure.log" 2>&1; then
        cat "$b.configure.log"
        echo "== aarch64 $cc: configure FAILED"
        result[$cc]="configure FAILED"
        failed=$((failed + 1))
        continue
    fi
    # -k 0: build every target that can be built, so that the tests of the
    # others still run (a test whose program is missing fails in ctest).
    build_status=ok
    if ! cmake --build "$b" -- -k 0; then
        build_status=FAILED
        failed=$((failed + 1))
    fi
    echo "== aarch64 $cc: build $build_status in $((SECONDS - t0)) s"
    [[ -f "$b/src/libcircuit.a" ]] && builds+=("$b")
    if ((build_only)); then
        result[$cc]="build $build_status (--build-only: no tests)"
        continue
    fi

    # every skip names a test that exists
    for s in "${ctest_skips[@]}"; do
        name=${s%%|*}
        if ! ctest --test-dir "$b" -N -R "^${name//./\\.}\$" | grep -q 'Total Tests: 1'; then
            echo "aarch64-test: note: the skipped test $name does not exist (any more) in $b"
        fi
    done

    echo "== aarch64 $cc: ctest under qemu-aarch64 (limits: $b-qemu/CTestTestfile.cmake)"
    write_limits_overlay "$b" "$b-qemu"
    t0=$SECONDS
    log=$b.ctest.log
    export CIRCUIT_QEMU_HANG_LOG=$root/$b.qemu-stalls.log
    rm -f "$CIRCUIT_QEMU_HANG_LOG"
    cc_exclude=$exclude
    cc_labels=("${host_only_labels[@]}")
    if [[ $cc == clang && " ${compilers[*]} " == *" gcc "* ]]; then
        clang_reduced_applied=1
        cc_labels+=("${clang_reduced_labels[@]}")
        for name in "${clang_reduced_tests[@]}"; do
            cc_exclude+="${cc_exclude:+|}^${name//./\\.}\$"
        done
    fi
    set +e
    ctest --test-dir "$b-qemu" --output-on-failure ${cc_exclude:+-E "$cc_exclude"} \
        -LE "^($(IFS='|'; echo "${cc_labels[*]}"))\$" 2>&1 | tee "$log"
    set -e
    # every stall, also one a retry got past, is named in the summary
    if [[ -s "$CIRCUIT_QEMU_HANG_LOG" ]]; then
        while read -r l; do
            stalls+=("$cc: ${l#aarch64-qemu-run: }")
        done < <(grep -E '^aarch64-qemu-run: (STALL|LIMIT):' "$CIRCUIT_QEMU_HANG_LOG" | cut -d';' -f1)
    fi
    line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n1 || true)
    if [[ -z "$line" ]]; then
        result[$cc]="build $build_status; no ctest summary"
        failed=$((failed + 1))
        continue
    fi
    n_failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    n_total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
    passed=$((passed + n_total - n_failed))
    failed=$((failed + n_failed))
    skipped=$((skipped + ${#ctest_skips[@]} + ${#criterion_skips[@]}))
    result[$cc]="$line (ctest, $((SECONDS - t0)) s)"
    [[ $build_status == ok ]] || result[$cc]="build FAILED; ${result[$cc]}"
done

# ---- ordering instructions ----------------------------------------------------------
echo
echo "== aarch64: ordering instructions of src/libcircuit.a against .ci/aarch64-ordering.baseline"
ordering=ok
if ((build_only)); then
    ordering="not run (--build-only)"
elif ! bash .ci/check-aarch64-ordering-selftest.sh; then
    ordering="FAILED (its self-test)"
    failed=$((failed + 1))
elif ((${#builds[@]})); then
    if ! bash .ci/check-aarch64-ordering.sh "${builds[@]}"; then
        ordering=FAILED
        failed=$((failed + 1))
    fi
else
    ordering="not run (no build)"
fi

echo
echo "== aarch64 summary ($((SECONDS - start)) s)"
echo "skipped under qemu-user (each counted once per compiler):"
for s in "${criterion_skips[@]}" "${ctest_skips[@]}"; do
    echo "  ${s%%|*}: ${s#*|}"
done
echo "not run here (not aarch64 code; the x86-64 steps run them): label ${host_only_labels[*]}"
((clang_reduced_applied)) &&
    echo "not run in the clang build (the gcc build's run has them): label ${clang_reduced_labels[*]}, ${clang_reduced_tests[*]}"
for cc in "${compilers[@]}"; do
    echo "$cc: ${result[$cc]}"
done
echo "ordering check: $ordering"
if ((${#stalls[@]})); then
    echo "qemu stalls and limits (.ci/aarch64-qemu-run.sh; a stalled program is run once more, and fails if it stalls again; details in build/aarch64-*.qemu-stalls.log):"
    printf '  %s\n' "${stalls[@]}"
else
    echo "qemu stalls: none"
fi
echo "aarch64: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
