#!/usr/bin/env bash
# Packaging test: the installed tree is relocatable. Copy the prefix
# somewhere else; nothing in the copy may name the original prefix; then
# build and run the consumer against the COPY with pkg-config and with
# find_package (ck's and liburcu's .pc files hidden, as for any consumer of
# the shared library).
# usage: relocate.sh CMAKE GENERATOR CC READELF PREFIX LIBDIR SRC WORKDIR
set -euo pipefail
cmake=$1 generator=$2 cc=$3 readelf=$4 prefix=$5 libdir=$6 src=$7 work=$8
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

rm -rf "$work"
mkdir -p "$work"
moved="$work/elsewhere/circuit"
mkdir -p "$(dirname "$moved")"
cp -a "$prefix" "$moved"
echo "copied $prefix to $moved"

# Text files (the .pc, the CMake package) must not name the old prefix.
if grep -rIl -F "$prefix" "$moved"; then
    echo "^ these installed files name the install prefix $prefix: not relocatable"
    exit 1
fi

bash "$here/pkgconfig_consumer.sh" shared "$cc" "$readelf" "$moved" "$libdir" "$src" "$work/pkg-config"
bash "$here/cmake_consumer.sh" shared "$cmake" "$generator" "$cc" "$readelf" "$moved" "$src" "$work/cmake"
echo "relocated prefix: ok"
