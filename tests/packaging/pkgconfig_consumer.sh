#!/usr/bin/env bash
# Packaging test: build a program with `cc ... $(pkg-config --cflags --libs
# circuit)` against the installed prefix, run it, expect "open". Also checks
# what circuit.pc says about the dependencies.
# usage: pkgconfig_consumer.sh CC PREFIX LIBDIR SRC WORKDIR [MODULE...]
#        MODULE: a pkg-config module the core links (Requires.private)
#        environment: CONSUMER_CFLAGS, CONSUMER_LDFLAGS (sanitizer flags)
set -euo pipefail
cc=$1 prefix=$2 libdir=$3 src=$4 work=$5
shift 5
modules="$*"
cflags=${CONSUMER_CFLAGS-} ldflags=${CONSUMER_LDFLAGS-}

export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
rm -rf "$work"
mkdir -p "$work"

echo "pkg-config --modversion circuit: $(pkg-config --modversion circuit)"
echo "pkg-config --cflags --libs circuit: $(pkg-config --cflags --libs circuit)"

# The .pc must point into the prefix the files were installed under.
pc_libdir=$(pkg-config --variable=libdir circuit)
if [[ "$(cd "$pc_libdir" && pwd -P)" != "$(cd "$prefix/$libdir" && pwd -P)" ]]; then
    echo "circuit.pc libdir is $pc_libdir, expected $prefix/$libdir"
    exit 1
fi
# Requires.private names every module the core links.
requires=$(pkg-config --print-requires-private circuit)
for m in $modules; do
    if ! grep -qx "$m\( .*\)\?" <<<"$requires"; then
        echo "circuit.pc: Requires.private lacks $m (has: $(echo $requires))"
        exit 1
    fi
done
pkg-config --static --libs circuit >/dev/null

# shellcheck disable=SC2046,SC2086  # word splitting is the point here
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags \
    -o "$work/app" "$src/main.c" $(pkg-config --cflags --libs circuit) $ldflags

out=$(LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/app")
echo "app printed: $out"
if [[ "$out" != "open" ]]; then
    echo "expected: open"
    exit 1
fi
