#!/usr/bin/env bash
# Fails if a function of the shipped library loses a memory-ordering
# instruction on aarch64, so that a later edit cannot quietly drop a barrier
# or move it from the function that needs it to another one.
#
#   .ci/check-aarch64-ordering.sh [--update] [--show] [BUILD_DIR...]
#
# BUILD_DIR is an aarch64 cross build (cmake/toolchains/aarch64-linux-gnu-*.cmake;
# .ci/aarch64-test.sh makes build/aarch64-gcc and build/aarch64-clang, which
# are the default when no BUILD_DIR is given). Its src/libcircuit.a (the
# static library, the same sources and flags as the shared one) is
# disassembled with aarch64-linux-gnu-objdump and, PER FUNCTION, each ordering
# instruction is counted:
#
#   acquire loads      ldar*, ldapr*, ldaxr*, ldaxp
#   release stores     stlr*, stlxr*, stlxp
#   fences             dmb <option>, dsb <option>
#   ordered LSE RMWs   cas/casp/swp/ldadd/ldclr/ldeor/ldset/ld[su]{max,min}
#                      with an a / al / l suffix (casal, caspal, ldaddal, swpl, ...)
#   outline atomics    calls to libgcc's __aarch64_<op><size>_{acq,rel,acq_rel,sync}
#                      (gcc's -moutline-atomics, the default on Debian: the
#                      helper picks LSE or an exclusive loop at run time, with
#                      the order in its name)
#
# Exclusive pairs without acquire/release (ldxr/stxr, ldxp/stxp), plain LSE
# ops and __aarch64_*_relax carry no order and are not counted.
#
# Functions are keyed by NAME, not by object file, so moving a function to
# another source file changes nothing here. gcc's clones of a function
# (f.constprop.0, f.isra.0, f.part.0, f.cold) count as f. Two static
# functions of the same name in different files are counted together (the
# script names them). What the check cannot see: an instruction moved
# within one function, and a function inlined into its callers (its
# instructions then count for the callers; if the function itself stays in
# the library as well, its own counts are checked too).
#
# The counts are compared with .ci/aarch64-ordering.baseline, one line per
# (compiler, function, instruction): a count below its baseline fails (as
# does a function or instruction that is gone), unless the same function has
# as many more of a stronger form beyond their own baseline (an acquire CAS
# made acq_rel: __aarch64_cas8_acq -> _acq_rel, casa -> casal, dmb ishld ->
# dmb ish, ldapr -> ldar); a count above its baseline is reported only.
#
# REGENERATING THE BASELINE, after a change that moves, renames or removes
# ordered code on purpose (review the printed diff like code: each line that
# goes down or disappears needs a reason in the commit message):
#
#   bash .ci/aarch64-test.sh --build-only       # build/aarch64-{gcc,clang}, no tests
#   .ci/check-aarch64-ordering.sh --update      # rewrites the baseline, prints the diff
#
# --update rewrites the lines of the compilers built (those of a compiler not
# built are kept). --show lists, per function, the ordering instructions found.
#
# The counts depend on the compiler versions and flags (Debian 12: gcc 12,
# clang 14, Release -O3, no -march), which the baseline file records.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
baseline=${CIRCUIT_ORDERING_BASELINE:-$here/aarch64-ordering.baseline}
objdump=${OBJDUMP:-aarch64-linux-gnu-objdump}

update=0
show=0
builds=()
for a in "$@"; do
    case "$a" in
        --update) update=1 ;;
        --show) show=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "check-aarch64-ordering: unknown option $a" >&2; exit 2 ;;
        *) builds+=("$a") ;;
    esac
done
if ((${#builds[@]} == 0)); then
    for b in "$here/../build/aarch64-gcc" "$here/../build/aarch64-clang"; do
        [[ -f "$b/src/libcircuit.a" ]] && builds+=("$(cd "$b" && pwd)")
    done
    if ((${#builds[@]} == 0)); then
        echo "usage: $0 [--update] [--show] [BUILD_DIR...]" >&2
        echo "  (no BUILD_DIR given and no build/aarch64-gcc or build/aarch64-clang:" >&2
        echo "   bash .ci/aarch64-test.sh --build-only makes them)" >&2
        exit 2
    fi
fi
command -v "$objdump" >/dev/null || {
    echo "check-aarch64-ordering: $objdump not found (apt-get install binutils-aarch64-linux-gnu)" >&2
    exit 2
}

# The disassembly of an archive, reduced to "object<TAB>function<TAB>key"
# per ordering instruction; a gcc clone suffix (.constprop.N, .isra.N,
# .part.N, .cold, ...) is dropped from the function name.
ordering_of() {
    "$objdump" -dr --no-show-raw-insn "$1" | awk '
        function emit(key) { printf "%s\t%s\t%s\n", obj, fn, key }
        /file format elf64-littleaarch64/ { obj = $1; sub(/:$/, "", obj); next }
        /^[0-9a-f]+ <.*>:$/ {
            fn = $2; gsub(/[<>:]/, "", fn)
            while (fn ~ /\.(constprop|isra|part|cold|lto_priv|localalias)(\.[0-9]+)?$/)
                sub(/\.(constprop|isra|part|cold|lto_priv|localalias)(\.[0-9]+)?$/, "", fn)
            next
        }
        /R_AARCH64_(CALL26|JUMP26)[[:space:]]+__aarch64_/ {
            # outline atomics: the relocation names the helper
            t = $3
            if (t ~ /_(acq|rel|acq_rel|sync)$/) emit("call:" t)
            next
        }
        /^[[:space:]]+[0-9a-f]+:[[:space:]]/ {
            m = $2
            if (m ~ /^(ldar|ldapr|ldaxr|ldaxp|ldlar)[bh]?$/ || m ~ /^ldapur/) { emit(m); next }
            if (m ~ /^(stlr|stlxr|stlxp|stllr)[bh]?$/ || m ~ /^stlur/) { emit(m); next }
            if (m == "dmb" || m == "dsb") { emit(m " " $3); next }
            if (m ~ /^(casp?|swp|ldadd|ldclr|ldeor|ldset|ldsmax|ldsmin|ldumax|ldumin)(a|al|l)[bh]?$/) { emit(m); next }
            if (m ~ /^(st)(add|clr|eor|set|smax|smin|umax|umin)l[bh]?$/) { emit(m); next }
        }'
}

compiler_of() {
    local cache=$1/CMakeCache.txt id
    id=$(sed -n 's/^CMAKE_C_COMPILER_ID:[A-Z]*=//p' "$cache" 2>/dev/null || true)
    if [[ -z "$id" ]]; then
        # the compiler id lives in CMakeFiles/<version>/CMakeCCompiler.cmake
        id=$(sed -n 's/^set(CMAKE_C_COMPILER_ID "\(.*\)")$/\1/p' "$1"/CMakeFiles/*/CMakeCCompiler.cmake 2>/dev/null | head -n1)
    fi
    case "$id" in
        GNU) echo gcc ;;
        Clang) echo clang ;;
        *) echo "check-aarch64-ordering: unknown compiler '$id' in $1" >&2; return 1 ;;
    esac
}

compiler_version_of() {
    sed -n 's/^set(CMAKE_C_COMPILER_VERSION "\(.*\)")$/\1/p' "$1"/CMakeFiles/*/CMakeCCompiler.cmake 2>/dev/null | head -n1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/counts"
declare -A versions=()
for b in "${builds[@]}"; do
    lib=$b/src/libcircuit.a
    if [[ ! -f "$lib" ]]; then
        echo "check-aarch64-ordering: $lib not found (build $b first)" >&2
        exit 2
    fi
    if ! "$objdump" -f "$lib" | grep -q 'elf64-littleaarch64'; then
        echo "check-aarch64-ordering: $lib is not an aarch64 library" >&2
        exit 2
    fi
    cc=$(compiler_of "$b")
    versions[$cc]=$(compiler_version_of "$b")
    ordering_of "$lib" >"$tmp/$cc.insns"
    # "compiler function key count" (a key may contain a space: "dmb ish")
    awk -F'\t' -v cc="$cc" '{ n[$2 " " $3]++ } END { for (k in n) print cc, k, n[k] }' \
        "$tmp/$cc.insns" >>"$tmp/counts"
    # a function name with ordered code in more than one object (two statics)
    awk -F'\t' '{ if (!(($2 SUBSEP $1) in seen)) { seen[$2 SUBSEP $1] = 1; objs[$2] = objs[$2] " " $1; n[$2]++ } }
                END { for (f in n) if (n[f] > 1) print f ":" objs[f] }' "$tmp/$cc.insns" | sort |
        while read -r line; do
            echo "check-aarch64-ordering: note: $cc: function ${line%%:*} is defined in${line#*:}; counted together"
        done
    if ((show)); then
        echo "== $cc: ordering instructions per function ($lib)"
        awk -F'\t' '{ k = $1 " " $2; c[k] = c[k] (c[k] ? ", " : "") $3 }
                    END { for (k in c) print "  " k ": " c[k] }' "$tmp/$cc.insns" | sort
    fi
done

if ((update)); then
    {
        echo "# Ordering instructions per FUNCTION of src/libcircuit.a, aarch64 (see"
        echo "# .ci/check-aarch64-ordering.sh). A count may only go down with a reason"
        echo "# given in the commit that lowers it. Regenerate with:"
        echo "#   bash .ci/aarch64-test.sh --build-only"
        echo "#   .ci/check-aarch64-ordering.sh --update"
        for cc in $(printf '%s\n' "${!versions[@]}" | sort); do
            echo "# $cc ${versions[$cc]}: generated from $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$here/.." diff --quiet HEAD -- 'src/*.c' 'src/*.h' 2>/dev/null || echo ' + uncommitted changes in src/')"
        done
        if [[ -f "$baseline" ]]; then
            # keep the compilers not rebuilt now (their comment lines too)
            for cc in $(grep -v '^#' "$baseline" | awk '{print $1}' | sort -u); do
                [[ -n "${versions[$cc]:-}" ]] && continue
                grep "^# $cc " "$baseline" || true
            done
        fi
        echo "# compiler function instruction count"
        {
            if [[ -f "$baseline" ]]; then
                grep -v '^#' "$baseline" | while read -r cc rest; do
                    [[ -n "${versions[$cc]:-}" ]] || echo "$cc $rest"
                done
            fi
            cat "$tmp/counts"
        } | LC_ALL=C sort
    } >"$tmp/new"
    if [[ -f "$baseline" ]]; then
        echo "check-aarch64-ordering: changes to the baseline (- old, + new; each line that goes down needs a reason):"
        changes=$(diff -U0 <(grep -v '^#' "$baseline") <(grep -v '^#' "$tmp/new") | grep -E '^[-+][^-+]' || true)
        sed 's/^/  /' <<<"${changes:-(none)}"
    fi
    mv "$tmp/new" "$baseline"
    echo "check-aarch64-ordering: baseline written: $baseline ($(grep -vc '^#' "$baseline") lines)"
    exit 0
fi

if [[ ! -f "$baseline" ]]; then
    echo "check-aarch64-ordering: no baseline ($baseline); create it with --update" >&2
    exit 1
fi

fail=0
for cc in "${!versions[@]}"; do
    recorded=$(sed -n "s/^# $cc \([^:]*\):.*/\1/p" "$baseline" | head -n1)
    if [[ -n "$recorded" && "$recorded" != "${versions[$cc]}" ]]; then
        echo "check-aarch64-ordering: note: the baseline was made with $cc $recorded, this build uses ${versions[$cc]}"
    fi
done
# Lines are "cc function key... count"; compared for the compilers built now.
# The old per-object format ("breaker.c.o") is refused rather than misread.
if grep -v '^#' "$baseline" | awk '$2 ~ /\.o$/ { bad = 1 } END { exit !bad }'; then
    echo "check-aarch64-ordering: $baseline is in the old per-object format; regenerate it with --update" >&2
    exit 1
fi
awk -v ccs=" ${!versions[*]} " -v report="$tmp/report" '
    function split_line(line,   f, n) {
        n = split(line, f, " ")
        cnt = f[n]; key = f[1]
        for (i = 2; i < n; i++) key = key " " f[i]
    }
    function split_key(k,   f, n, i) { # "cc function insn..." -> pre = "cc function", insn
        n = split(k, f, " ")
        pre = f[1] " " f[2]; insn = f[3]
        for (i = 4; i <= n; i++) insn = insn " " f[i]
    }
    # The instructions that order at least what `insn` orders, space-separated.
    function stronger(insn,   ops, n, i, op, rest, b) {
        if (insn ~ /^call:__aarch64_.*_acq_rel$/) { b = insn; sub(/_acq_rel$/, "", b); return b "_sync" }
        if (insn ~ /^call:__aarch64_.*_(acq|rel)$/) { b = insn; sub(/_(acq|rel)$/, "", b); return b "_acq_rel " b "_sync" }
        if (insn == "dmb ishld" || insn == "dmb ishst") return "dmb ish"
        if (insn ~ /^ldapr[bh]?$/) return "ldar" substr(insn, 6)
        n = split("casp cas swp ldadd ldclr ldeor ldset ldsmax ldsmin ldumax ldumin", ops, " ")
        for (i = 1; i <= n; i++) {
            op = ops[i]
            if (index(insn, op) != 1) continue
            rest = substr(insn, length(op) + 1)
            if (rest ~ /^(a|l)[bh]?$/) return op "al" substr(rest, 2)
            return ""
        }
        return ""
    }
    FNR == 1 { file++ }
    /^#/ || NF < 4 { next }
    index(ccs, " " $1 " ") == 0 { next }
    file == 1 { split_line($0); want[key] = cnt; next }
    { split_line($0); have[key] = cnt }
    END {
        for (k in want) {
            checked++
            h = (k in have) ? have[k] : 0
            if (h < want[k]) {
                # A stronger form of the instruction in the same function, beyond
                # its own baseline, stands in for a missing one (an acquire CAS
                # made acq_rel is no loss).
                need = want[k] - h
                split_key(k)
                ns = split(stronger(insn), st, " ")
                by = ""
                for (j = 1; j <= ns && need > 0; j++) {
                    k2 = pre " " st[j]
                    spare = ((k2 in have) ? have[k2] : 0) - ((k2 in want) ? want[k2] : 0) - used[k2]
                    if (spare <= 0) continue
                    take = spare < need ? spare : need
                    used[k2] += take; need -= take
                    by = by (by ? ", " : "") take " " st[j]
                }
                if (need > 0) {
                    printf "check-aarch64-ordering: FAIL: %s: %d, baseline %d\n", k, h, want[k] > report
                    bad = 1
                } else
                    printf "check-aarch64-ordering: %s: %d, baseline %d, made up by the stronger %s (--update to record it)\n", k, h, want[k], by > report
            } else if (h > want[k])
                printf "check-aarch64-ordering: %s: %d, above the baseline %d (--update to raise it)\n", k, h, want[k] > report
        }
        for (k in have)
            if (!(k in want))
                printf "check-aarch64-ordering: %s: %d, not in the baseline (--update to add it)\n", k, have[k] > report
        print checked + 0
        exit bad
    }' "$baseline" "$tmp/counts" >"$tmp/checked" || fail=1
[[ -f "$tmp/report" ]] && sort "$tmp/report"
checked=$(cat "$tmp/checked")
total=$(awk '{ s += $NF } END { print s + 0 }' "$tmp/counts")
if ((fail)); then
    echo "check-aarch64-ordering: FAILED: ordering instructions went below the baseline ($baseline)."
    echo "  If the change means to remove them (each one: which pair no longer needs ordering, and why),"
    echo "  regenerate the baseline and commit it with that reason:"
    echo "  bash .ci/aarch64-test.sh --build-only && .ci/check-aarch64-ordering.sh --update"
    exit 1
fi
echo "check-aarch64-ordering: ok: $checked baseline counts held (${!versions[*]}; $total ordering instructions now)"
