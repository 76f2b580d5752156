#!/usr/bin/env bash
# Packaging test: a project that embeds libcircuit with add_subdirectory()
# gets the library and nothing else. CIRCUIT_BUILD_TESTS and
# CIRCUIT_BUILD_BENCH default to PROJECT_IS_TOP_LEVEL, so the parent's ctest
# must list 0 tests, and the parent's program must build and link
# circuit::circuit.
# usage: subproject.sh CMAKE CTEST GENERATOR C_COMPILER SOURCE_DIR WORK_DIR
set -euo pipefail
cmake=$1 ctest=$2 generator=$3 cc=$4 src=$5 work=$6

rm -rf "$work"
mkdir -p "$work/parent"
cat > "$work/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(parent C)
enable_testing()
add_subdirectory("$src" libcircuit)
add_executable(parent_app main.c)
target_link_libraries(parent_app PRIVATE circuit::circuit)
add_test(NAME parent_own_test COMMAND parent_app)
CMAKE
cat > "$work/parent/main.c" <<'C'
#include <circuit.h>
#include <stdio.h>
int main(void)
{
    return puts(circuit_state_name(CIRCUIT_OPEN)) < 0;
}
C

"$cmake" -S "$work/parent" -B "$work/build" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || {
    cat "$work/configure.log"; echo "the parent project does not configure"; exit 1; }

# The parent's own test is the only one: libcircuit registered none.
listed=$("$ctest" --test-dir "$work/build" -N)
echo "$listed"
total=$(sed -n 's/^Total Tests: \([0-9]*\)$/\1/p' <<<"$listed")
if [[ "$total" != 1 ]] || ! grep -q 'parent_own_test' <<<"$listed"; then
    echo "expected the parent's one test and none of libcircuit's, got $total"
    exit 1
fi
for opt in CIRCUIT_BUILD_TESTS CIRCUIT_BUILD_BENCH; do
    if ! grep -q "^$opt:BOOL=OFF$" "$work/build/CMakeCache.txt"; then
        echo "$opt is not OFF in a subproject: $(grep "^$opt:" "$work/build/CMakeCache.txt")"
        exit 1
    fi
done

"$cmake" --build "$work/build" --target parent_app >"$work/build.log" 2>&1 || {
    cat "$work/build.log"; echo "the parent's program does not build"; exit 1; }
"$ctest" --test-dir "$work/build" --output-on-failure
echo "subproject: 0 tests of libcircuit registered, circuit::circuit links"
