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
    "$includedir/circuit_presets.h" \
    "$libdir/libcircuit.so" \
    "$libdir/libcircuit.so.2" \
    "$libdir/libcircuit.a" \
    "$libdir/cmake/circuit/circuitConfig.cmake" \
    "$libdir/cmake/circuit/circuitConfigVersion.cmake" \
    "$libdir/cmake/circuit/circuitTargets.cmake" \
    "$libdir/cmake/circuit/circuitStaticTargets.cmake" \
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
# circuit.pc is the only .pc file: the tests that hide ck's and liburcu's
# .pc files point PKG_CONFIG_LIBDIR at this directory.
others=$(find "$prefix/$libdir/pkgconfig" -type f ! -name circuit.pc)
if [[ -n "$others" ]]; then
    echo "unexpected files beside circuit.pc: $others"
    missing=1
fi
echo "installed into $prefix:"
(cd "$prefix" && find . -type f -o -type l | sort | sed 's|^\./|  |')
echo "circuit.pc:"
sed 's/^/  /' "$prefix/$libdir/pkgconfig/circuit.pc"
exit "$missing"
