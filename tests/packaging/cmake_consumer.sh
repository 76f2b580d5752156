#!/usr/bin/env bash
# Packaging test: configure, build and run an out-of-tree CMake project that
# does find_package(circuit REQUIRED) against the installed prefix and links
# TARGET (circuit::circuit or circuit::circuit_static). It must print "open".
# usage: cmake_consumer.sh CMAKE GENERATOR CC PREFIX SRC WORKDIR TARGET
#        environment: CONSUMER_CFLAGS, CONSUMER_LDFLAGS (sanitizer flags)
set -euo pipefail
cmake=$1 generator=$2 cc=$3 prefix=$4 src=$5 work=$6 target=$7
cflags=${CONSUMER_CFLAGS-} ldflags=${CONSUMER_LDFLAGS-}

rm -rf "$work"
# Only the test prefix may provide the package (no user or system registry).
"$cmake" -S "$src" -B "$work" -G "$generator" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_FLAGS="$cflags" \
    -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
    -DCIRCUIT_TARGET="$target"

found=$(sed -n 's/^circuit_DIR:PATH=//p' "$work/CMakeCache.txt")
case "$found" in
    "$prefix"/*) ;;
    *) echo "find_package(circuit) found '$found', not the package in $prefix"; exit 1 ;;
esac

"$cmake" --build "$work"
out=$("$work/app")
echo "app printed: $out"
if [[ "$out" != "open" ]]; then
    echo "expected: open"
    exit 1
fi
