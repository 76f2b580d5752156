#!/usr/bin/env bash
# Packaging test: the shared library exports exactly the public API.
#   - its SONAME is libcircuit.so.2;
#   - `nm -D --defined-only` lists only circuit_* symbols (never the internal
#     circuit__* ones nor the test seam's circuit_test_*);
#   - every exported symbol is declared CIRCUIT_API in an installed header,
#     and every CIRCUIT_API declaration is exported.
# usage: check_exports.sh NM READELF LIBRARY HEADER...
set -euo pipefail
nm=$1 readelf=$2 lib=$3
shift 3

fail=0
soname=$("$readelf" -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [[ "$soname" != "libcircuit.so.2" ]]; then
    echo "SONAME is '$soname', expected libcircuit.so.2"
    fail=1
fi

exported=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)

# Names declared with CIRCUIT_API: drop comments and preprocessor lines, cut
# the rest into declarations at ';', and take the name of each declaration
# that carries CIRCUIT_API (the identifier before its first '(', or its last
# identifier for an object).
declared=$(awk '
    {
        line = $0; out = ""
        while (length(line) > 0) {
            if (incomment) {
                i = index(line, "*/")
                if (i == 0) line = ""; else { line = substr(line, i + 2); incomment = 0 }
            } else {
                i = index(line, "/*"); j = index(line, "//")
                if (j > 0 && (i == 0 || j < i)) { out = out substr(line, 1, j - 1); line = "" }
                else if (i == 0) { out = out line; line = "" }
                else { out = out substr(line, 1, i - 1) " "; line = substr(line, i + 2); incomment = 1 }
            }
        }
        if (inpp || out ~ /^[ \t]*#/) { inpp = (out ~ /\\[ \t]*$/); next }
        text = text " " out
    }
    END {
        n = split(text, decl, ";")
        for (k = 1; k <= n; k++) {
            p = index(decl[k], "CIRCUIT_API")
            if (p == 0) continue
            d = substr(decl[k], p + length("CIRCUIT_API"))
            if (match(d, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
                name = substr(d, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
            } else {
                sub(/[ \t]*(=.*|\[.*)$/, "", d); m = split(d, w, /[^A-Za-z0-9_]+/)
                name = w[m]; while (name == "" && m > 1) name = w[--m]
            }
            print name
        }
    }' "$@" | sort -u)

n_exported=$(grep -c . <<<"$exported" || true)
n_declared=$(grep -c . <<<"$declared" || true)
echo "$lib: $n_exported exported symbols; $n_declared CIRCUIT_API declarations in $*"

if [[ $n_declared -eq 0 ]]; then
    echo "no CIRCUIT_API declaration found in the headers"
    fail=1
fi
while IFS= read -r s; do
    [[ -z "$s" ]] && continue
    if [[ ! "$s" =~ ^circuit_[A-Za-z0-9_]+$ || "$s" == circuit__* || "$s" == circuit_test_* ]]; then
        echo "exported but not public API: $s"
        fail=1
    elif ! grep -qxF "$s" <<<"$declared"; then
        echo "exported but declared in no installed header with CIRCUIT_API: $s"
        fail=1
    fi
done <<<"$exported"
while IFS= read -r s; do
    [[ -z "$s" ]] && continue
    if ! grep -qxF "$s" <<<"$exported"; then
        echo "declared CIRCUIT_API but not exported: $s"
        fail=1
    fi
done <<<"$declared"

if [[ $fail -eq 0 ]]; then
    echo "exports OK: $(echo $exported)"
fi
exit "$fail"
