#!/usr/bin/env bash
# The aarch64 suite: cross-build libcircuit, its unit tests, the model
# differential and the stress programs for aarch64 with gcc and with clang
# (Release, CIRCUIT_WERROR=ON), check that the library's objects keep their
# memory-ordering instructions, and run the tests under qemu-user.
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
    "l6/T5_probe_ticket_done_racing_release_settles_once|the same qemu-user abort: a thread started in a child forked from the Criterion worker (the child exits 127)"
)
# Whole ctest tests (plain programs): left out with ctest -E.
ctest_skips=(
    "stress.nolock|its TM1 check compares /proc/self/task before and after; qemu-user keeps a joined thread listed there for a while after pthread_join returns (about one run in two fails here 2 -> 3)"
)
# Not aarch64 code at all, run by the x86-64 steps; left out with ctest -LE,
# not counted as skipped: "rules" (Python checks of the sources) and "spin"
# (SPIN models, whose verifier would be built with the cross compiler).
host_only_labels=(rules spin)

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
export CIRCUIT_QEMU_AARCH64=$qemu
export CIRCUIT_STRESS_SCALE=${CIRCUIT_STRESS_SCALE:-0.1}
export CRITERION_JOBS=1            # one test at a time per program; ctest runs programs in parallel
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

echo "== aarch64: qemu $("$qemu" --version | head -n1 | sed 's/.*version //'), sysroot $sysroot"
echo "== CIRCUIT_STRESS_SCALE=$CIRCUIT_STRESS_SCALE, ctest -j$CTEST_PARALLEL_LEVEL, CRITERION_JOBS=1"

declare -A result=()
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
            -DCIRCUIT_AARCH64_SYSROOT="$sysroot" >"$b.configure.log" 2>&1; then
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

    echo "== aarch64 $cc: ctest under qemu-aarch64"
    t0=$SECONDS
    log=$b.ctest.log
    set +e
    ctest --test-dir "$b" --output-on-failure --timeout 600 ${exclude:+-E "$exclude"} \
        -LE "^($(IFS='|'; echo "${host_only_labels[*]}"))\$" 2>&1 | tee "$log"
    set -e
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
for cc in "${compilers[@]}"; do
    echo "$cc: ${result[$cc]}"
done
echo "ordering check: $ordering"
echo "aarch64: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
