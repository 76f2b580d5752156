#!/usr/bin/env bash
# Packaging test (fixture setup): install the current build tree into a
# fresh prefix with `cmake --install`, then check the installed file list.
# usage: install.sh CMAKE BUILD_DIR PREFIX LIBDIR INCLUDEDIR
#        environment: CIRCUIT_CONFIG (the build configuration, may be empty)
set -euo pipefail
cmake=$1 build=$2 prefix=$3 libdir=$4 includedir=$5
config=${CIRCUIT_CONFIG-}

rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" ${config:+--config "$config"}

missing=0
for f in \
    "$includedir/circuit.h" \
    "$libdir/libcircuit.so" \
    "$libdir/libcircuit.so.0" \
    "$libdir/libcircuit.a" \
    "$libdir/cmake/circuit/circuitConfig.cmake" \
    "$libdir/cmake/circuit/circuitConfigVersion.cmake" \
    "$libdir/cmake/circuit/circuitTargets.cmake" \
    "$libdir/pkgconfig/circuit.pc"; do
    if [[ ! -e "$prefix/$f" ]]; then
        echo "not installed: $f"
        missing=1
    fi
done
# The test seam and the internal headers stay in the source tree.
while IFS= read -r f; do
    echo "installed but private: ${f#"$prefix"/}"
    missing=1
done < <(find "$prefix" -name 'testing.h' -o -name 'internal.h' -o -name 'atomics.h' \
              -o -name '*testable*')
echo "installed into $prefix:"
(cd "$prefix" && find . -type f -o -type l | sort | sed 's|^\./|  |')
exit "$missing"
