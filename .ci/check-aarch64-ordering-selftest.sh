#!/usr/bin/env bash
# Self-test of .ci/check-aarch64-ordering.sh: the check must fail when a
# barrier moves from one function to another of the SAME object file (a
# per-object count cannot see that), must fail when a barrier is dropped or
# a CAS made weaker, and must pass when functions move to another file
# unchanged (the baseline is keyed by function name) and when a CAS is made
# stronger (acquire -> acq_rel).
#
#   .ci/check-aarch64-ordering-selftest.sh
#
# Builds tiny aarch64 archives with aarch64-linux-gnu-gcc in a temporary
# folder laid out like a build (src/libcircuit.a, CMakeCache.txt), and runs
# the check on them against a temporary baseline. Run by .ci/aarch64-test.sh
# before the real check. Exit 0: every case behaved; 1: one did not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/check-aarch64-ordering.sh
cc=${CC_AARCH64:-aarch64-linux-gnu-gcc}
command -v "$cc" >/dev/null || { echo "ordering-selftest: $cc not found" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CIRCUIT_ORDERING_BASELINE=$tmp/baseline

# A fake build dir whose library holds the given C sources, one object each.
# Usage: lib NAME FILE.c...
lib() {
    local d=$tmp/$1
    shift
    mkdir -p "$d/src" "$d/CMakeFiles/0"
    echo "CMAKE_C_COMPILER_ID:STRING=GNU" >"$d/CMakeCache.txt"
    echo "set(CMAKE_C_COMPILER_VERSION \"$("$cc" -dumpfullversion)\")" \
        >"$d/CMakeFiles/0/CMakeCCompiler.cmake"
    local objs=()
    for c in "$@"; do
        "$cc" -std=c11 -O2 -c "$tmp/$c" -o "$d/src/$(basename "$c").o"
        objs+=("$d/src/$(basename "$c").o")
    done
    rm -f "$d/src/libcircuit.a"
    ar rcs "$d/src/libcircuit.a" "${objs[@]}"
    echo "$d"
}

# The two functions of one file; FENCE_IN says which holds the seq_cst fence.
write_pair() { # FILE FENCE_IN(f|g|none)
    local fence_f="" fence_g=""
    [[ $2 == f ]] && fence_f="__atomic_thread_fence(__ATOMIC_SEQ_CST);"
    [[ $2 == g ]] && fence_g="__atomic_thread_fence(__ATOMIC_SEQ_CST);"
    cat >"$tmp/$1" <<EOF
#include <stdint.h>
uint64_t selftest_f(uint64_t *a, uint64_t *b);
uint64_t selftest_g(uint64_t *a, uint64_t *b);
uint64_t selftest_f(uint64_t *a, uint64_t *b)
{
    __atomic_store_n(a, 1, __ATOMIC_RELEASE);
    $fence_f
    return __atomic_load_n(b, __ATOMIC_ACQUIRE);
}
uint64_t selftest_g(uint64_t *a, uint64_t *b)
{
    __atomic_store_n(b, 2, __ATOMIC_RELAXED);
    $fence_g
    return __atomic_load_n(a, __ATOMIC_RELAXED);
}
EOF
}

fails=0
expect() { # WANT(pass|fail) WHAT BUILD_DIR [PATTERN that the output must hold]
    local want=$1 what=$2 dir=$3 pattern=${4:-} out rc=0
    out=$(bash "$check" "$dir" 2>&1) || rc=$?
    local got=pass
    ((rc == 0)) || got=fail
    if [[ $got != "$want" ]] || { [[ -n "$pattern" ]] && ! grep -qE "$pattern" <<<"$out"; }; then
        echo "ordering-selftest: FAIL: $what: the check gave $got (rc $rc), expected $want${pattern:+ with /$pattern/}"
        sed 's/^/    /' <<<"$out"
        fails=$((fails + 1))
    else
        echo "ordering-selftest: ok: $what: $got"
    fi
}

dmb_in_object() { # BUILD_DIR -> number of "dmb" in the archive, all functions together
    aarch64-linux-gnu-objdump -d "$1/src/libcircuit.a" | grep -cE '\sdmb\s' || true
}

# 1. the baseline: the fence in selftest_f
write_pair one.c f
base=$(lib base one.c)
bash "$check" --update "$base" >/dev/null
grep -q '^gcc selftest_f dmb ish 1$' "$CIRCUIT_ORDERING_BASELINE" || {
    echo "ordering-selftest: FAIL: the baseline has no 'gcc selftest_f dmb ish 1' line:"
    sed 's/^/    /' "$CIRCUIT_ORDERING_BASELINE"
    exit 1
}
expect pass "the code of the baseline" "$base"

# 2. the planted move: the fence goes from selftest_f to selftest_g, same file
write_pair one.c g
moved=$(lib moved one.c)
if [[ $(dmb_in_object "$base") != "$(dmb_in_object "$moved")" ]]; then
    echo "ordering-selftest: FAIL: the planted move changed the object's dmb count; the case proves nothing"
    fails=$((fails + 1))
fi
expect fail "a fence moved between two functions of one object file (same count per object)" \
    "$moved" 'FAIL: gcc selftest_f dmb ish: 0, baseline 1'

# 3. the fence dropped
write_pair one.c none
dropped=$(lib dropped one.c)
expect fail "a fence dropped" "$dropped" 'FAIL: gcc selftest_f dmb ish: 0, baseline 1'

# 4. the functions moved, unchanged, into two other files
write_pair one.c f
sed -n '1,3p; /^uint64_t selftest_f(uint64_t \*a, uint64_t \*b)$/,/^}$/p' "$tmp/one.c" >"$tmp/two_f.c"
sed -n '1,3p; /^uint64_t selftest_g(uint64_t \*a, uint64_t \*b)$/,/^}$/p' "$tmp/one.c" >"$tmp/two_g.c"
split=$(lib split two_f.c two_g.c)
expect pass "the same functions moved to other files" "$split"

# 5.-6. a CAS: made stronger (acquire -> acq_rel) passes, made weaker fails
write_cas() { # ORDER FAILURE_ORDER
    cat >"$tmp/cas.c" <<EOF
#include <stdbool.h>
#include <stdint.h>
bool selftest_cas(uint64_t *p, uint64_t *e, uint64_t d);
bool selftest_cas(uint64_t *p, uint64_t *e, uint64_t d)
{
    return __atomic_compare_exchange_n(p, e, d, false, $1, $2);
}
EOF
}
write_cas __ATOMIC_ACQUIRE __ATOMIC_ACQUIRE
cas_acq=$(lib cas_acq cas.c)
bash "$check" --update "$cas_acq" >/dev/null
write_cas __ATOMIC_ACQ_REL __ATOMIC_ACQUIRE
cas_acq_rel=$(lib cas_acq_rel cas.c)
expect pass "an acquire CAS made acq_rel (stronger)" "$cas_acq_rel" 'made up by the stronger'
bash "$check" --update "$cas_acq_rel" >/dev/null
expect fail "an acq_rel CAS made acquire (weaker)" "$cas_acq" 'FAIL: gcc selftest_cas '

if ((fails)); then
    echo "ordering-selftest: $fails case(s) failed"
    exit 1
fi
echo "ordering-selftest: ok (6 cases)"
