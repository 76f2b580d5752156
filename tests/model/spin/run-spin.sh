#!/usr/bin/env bash
# Run one SPIN model exhaustively and judge pan's verdict (tests/model/spin).
#
#   run-spin.sh [options] MODEL.pml
#     -D NAME[=VALUE]    a preprocessor define for the model (repeatable)
#     --expect ok        (default) pass when pan finds no error and the search
#                        was complete (not cut short by the depth bound or
#                        the memory limit)
#     --expect error     pass only when pan DOES find an error (a planted bug);
#                        with --match, its error line must match the regex
#     --match REGEX      extended regex for pan's error line
#     --np               look for non-progress cycles (cc -DNP, pan -l)
#                        instead of safety (cc -DSAFETY)
#     --depth N          pan's depth bound (-m), default 100000
#     --memlim MB        pan's memory limit, default 2048
#     --cc CC            compiler for pan.c (default $CC, else cc)
#     --spin PATH        the spin executable (default: spin on PATH)
#     --workdir DIR      where pan is generated and built (default: a fresh
#                        temporary directory, removed at the end)
#     --unreached        list every statement pan never reached (default: the
#                        count per process)
#
# Exit 0 = the verdict is the expected one, 1 = it is not (or pan failed to
# run to a verdict, or spin is missing while CI=true), 77 = spin is not
# installed outside CI (ctest shows a skip).
set -euo pipefail

defines=()
expect=ok
match=
mode=safety
depth=100000
memlim=2048
cc=${CC:-cc}
spin=spin
workdir=
model=
unreached=counts

while (($#)); do
    case $1 in
        -D) defines+=("-D$2"); shift 2 ;;
        -D*) defines+=("$1"); shift ;;
        --expect) expect=$2; shift 2 ;;
        --match) match=$2; shift 2 ;;
        --np) mode=np; shift ;;
        --depth) depth=$2; shift 2 ;;
        --memlim) memlim=$2; shift 2 ;;
        --cc) cc=$2; shift 2 ;;
        --spin) spin=$2; shift 2 ;;
        --workdir) workdir=$2; shift 2 ;;
        --unreached) unreached=all; shift ;;
        -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "run-spin: unknown option $1" >&2; exit 1 ;;
        *) model=$1; shift ;;
    esac
done
case $expect in ok | error) ;; *) echo "run-spin: --expect ok|error" >&2; exit 1 ;; esac
[[ -n $model && -f $model ]] || { echo "run-spin: no model file given (or not found): '$model'" >&2; exit 1; }
if ! command -v "$spin" >/dev/null 2>&1; then
    # CI (CI=true, as .ci/run sets it) must run the models: there a missing
    # spin is a failure, not a skip.
    case ${CI:-} in
        "" | false | 0) ;;
        *) echo "run-spin: FAIL: '$spin' not found and CI=$CI: CI must run the SPIN models (Debian: apt-get install spin)"
           exit 1 ;;
    esac
    echo "run-spin: SKIP: '$spin' not found (Debian: apt-get install spin; under CI=true this is a failure)"
    exit 77
fi

model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
if [[ -z $workdir ]]; then
    workdir=$(mktemp -d "${TMPDIR:-/tmp}/run-spin.XXXXXX")
    trap 'rm -rf "$workdir"' EXIT
else
    rm -rf "$workdir"
    mkdir -p "$workdir"
fi
cd "$workdir"
name=$(basename "$model")
cp "$model" "$name"

if [[ $mode == np ]]; then
    ccflags=(-DNP) panflags=(-l)
else
    ccflags=(-DSAFETY) panflags=()
fi
echo "run-spin: $name ${defines[*]} ($mode, expect $expect)"

"$spin" -a "${defines[@]}" "$name" >spin.log 2>&1 || { cat spin.log; echo "run-spin: FAIL: spin -a failed"; exit 1; }
# pan.c is generated code: its warnings are spin's, not the project's (-w).
# A planted bug is found in a few thousand states: compiling pan.c costs more
# than searching, so those builds skip the optimiser.
opt=-O2 hash=()
[[ $expect == error ]] && opt=-O0 hash=(-w20)
"$cc" "$opt" -w "${ccflags[@]}" -DCOLLAPSE -DMEMLIM="$memlim" -o pan pan.c ||
    { echo "run-spin: FAIL: could not compile pan.c with $cc"; exit 1; }

start=$(date +%s%N)
set +e
./pan -m"$depth" "${hash[@]}" "${panflags[@]}" >pan.out 2>&1
pan_rc=$?
set -e
end=$(date +%s%N)

# What a reader wants from pan's report: the verdict, the size of the search,
# its cost, and which statements were never reached.
grep -E 'error|assertion violated|non-progress|State-vector|states, stored|states, matched|transitions|total actual memory|elapsed time' pan.out || true
if [[ $unreached == all ]]; then
    awk '/^unreached in/ { show = 1 } show' pan.out | grep -vE '^pan: (elapsed|rate)' || true
else
    awk '/^unreached in/ { p = $0 } /^\t\([0-9]+ of [0-9]+ states\)/ { print p ":" $0 }' pan.out
fi
ms=$(((end - start) / 1000000))
printf 'run-spin: pan ran %d.%03d s wall (exit %d)\n' $((ms / 1000)) $((ms % 1000)) "$pan_rc"

errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' pan.out | tail -n1)
truncated=no
grep -q 'max search depth too small' pan.out && truncated=depth
# pan stops at -DMEMLIM and still reports 'errors: 0': not exhaustive either
grep -qE 'reached -DMEMLIM bound|out of memory' pan.out && truncated=memory
if [[ -z $errors ]]; then
    tail -n 20 pan.out
    echo "run-spin: FAIL: pan gave no verdict (no 'errors: N' line)"
    exit 1
fi

# The counterexample, one line per step that did something (spin -t -p without
# its bookkeeping lines), the last 80 of them.
replay() {
    if [[ -f $name.trail ]]; then
        echo "run-spin: the counterexample (spin -t -p: step, process, line, statement; last 80):"
        "$spin" -t -p "${defines[@]}" "$name" 2>&1 |
            grep -E '^ *[0-9]+:[[:space:]]+proc' | grep -vE '\[(\(1\)|skip|else|break)\]' |
            sed -E 's/[[:space:]]+/ /g; s/ \(state [0-9]+\)//' | cut -c1-160 | tail -n 80 || true
    fi
}

if [[ $expect == ok ]]; then
    if ((errors != 0)); then
        replay
        echo "run-spin: FAIL: pan found $errors error(s)"
        exit 1
    fi
    if [[ $truncated == depth ]]; then
        echo "run-spin: FAIL: the search was cut short by the depth bound (-m$depth): not exhaustive"
        exit 1
    fi
    if [[ $truncated == memory ]]; then
        echo "run-spin: FAIL: the search was cut short by the memory limit (--memlim $memlim MB): not exhaustive"
        exit 1
    fi
    echo "run-spin: PASS: no error in the whole state space"
    exit 0
fi

# --expect error: a planted bug must be found, and be the one expected.
if ((errors == 0)); then
    echo "run-spin: FAIL: the planted bug was NOT caught (pan found no error)"
    exit 1
fi
line=$(grep -m1 -E 'assertion violated|non-progress cycle|acceptance cycle|invalid end state' pan.out || true)
if [[ -n $match ]] && ! grep -qE -- "$match" <<<"$line"; then
    replay
    echo "run-spin: FAIL: pan found an error, but not the expected one (/$match/): $line"
    exit 1
fi
replay
echo "run-spin: PASS: the planted bug was caught: $line"
