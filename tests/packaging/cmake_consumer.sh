#!/usr/bin/env bash
# Packaging test: configure, build and run consumer/, an out-of-tree CMake
# project that does find_package(circuit) against the installed prefix.
#
#   shared          find_package(circuit REQUIRED), circuit::circuit, with
#                   ck's and liburcu's .pc files hidden from pkg-config: the
#                   shared library needs neither. Prints "open".
#   static          find_package(circuit REQUIRED COMPONENTS static),
#                   circuit::circuit_static: the package config finds ck
#                   and liburcu again. Prints "open"; the program does not
#                   need libcircuit.so.
#   static-missing  the same with the dependencies hidden: find_package
#                   must fail, and its one message must name every missing
#                   dependency (ck and liburcu-cds, with their packages).
#   version         the package's version check (SameMinorVersion while the
#                   major version is 0): find_package(circuit X.Y) succeeds
#                   for the installed major.minor and for X.Y.0 of it, and
#                   fails for the minor before, the minor after and 1.0.
# In every mode the consumer's compile lines hold no cflag of ck's.
#
# usage: cmake_consumer.sh MODE CMAKE GENERATOR CC READELF PREFIX SRC WORKDIR
#        environment: CONSUMER_CFLAGS, CONSUMER_LDFLAGS (sanitizer flags)
set -euo pipefail
mode=$1 cmake=$2 generator=$3 cc=$4 readelf=$5 prefix=$6 src=$7 work=$8
cflags=${CONSUMER_CFLAGS-} ldflags=${CONSUMER_LDFLAGS-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

rm -rf "$work"
mkdir -p "$work"
case "$mode" in
shared) target=circuit::circuit components="" ; hide_deps "$work/no-pc" ;;
static) target=circuit::circuit_static components=static ;;
static-missing) target=circuit::circuit_static components=static ; hide_deps "$work/no-pc" ;;
version) target=circuit::circuit components="" ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac

# Only the test prefix may provide the package (no user or system registry).
configure() {
    "$cmake" -S "$src" -B "$work/build" -G "$generator" "$@" \
        -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
        -DCMAKE_C_FLAGS="$cflags" \
        -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
        -DCIRCUIT_TARGET="$target" \
        -DCIRCUIT_COMPONENTS="$components"
}

if [[ "$mode" == static-missing ]]; then
    if configure >"$work/configure.log" 2>&1; then
        cat "$work/configure.log"
        echo "find_package(circuit COMPONENTS static) succeeded without ck and liburcu"
        exit 1
    fi
    cat "$work/configure.log"
    # One message (cmake may wrap it over lines): every missing dependency.
    msg=$(tr -s ' \n' '  ' <"$work/configure.log")
    for want in "'ck' (libck-dev)" "'liburcu-cds' (liburcu-dev)"; do
        if [[ "$msg" != *"$want"* ]]; then
            echo "the failure does not name $want"
            exit 1
        fi
    done
    echo "find_package failed, naming every missing dependency: ok"
    exit 0
fi

if [[ "$mode" == version ]]; then
    # The installed version, from the installed header.
    h="$prefix/include/circuit.h"
    major=$(sed -n 's/^#define CIRCUIT_VERSION_MAJOR \([0-9]*\)$/\1/p' "$h")
    minor=$(sed -n 's/^#define CIRCUIT_VERSION_MINOR \([0-9]*\)$/\1/p' "$h")
    [[ -n "$major" && -n "$minor" ]] || { echo "no CIRCUIT_VERSION_* in $h"; exit 1; }
    if [[ "$major" != 0 ]]; then
        echo "major version $major: this test checks the 0.x rule (SameMinorVersion)"
        exit 1
    fi
    ask() { rm -rf "$work/build"; configure "-DCIRCUIT_ASK_VERSION=$1" >"$work/configure-$1.log" 2>&1; }
    for ok in "$major.$minor" "$major.$minor.0"; do
        ask "$ok" || { cat "$work/configure-$ok.log"; echo "find_package(circuit $ok) refused $major.$minor"; exit 1; }
        echo "find_package(circuit $ok): accepted"
    done
    refuse=("$major.$((minor + 1))" "1.0")
    if [[ "$minor" -gt 0 ]]; then refuse+=("$major.$((minor - 1))"); fi
    for no in "${refuse[@]}"; do
        if ask "$no"; then
            cat "$work/configure-$no.log"
            echo "find_package(circuit $no) accepted $major.$minor: a new minor version is a breaking one while the major is 0"
            exit 1
        fi
        grep -q "version" "$work/configure-$no.log" || { cat "$work/configure-$no.log"; echo "the refusal does not mention the version"; exit 1; }
        echo "find_package(circuit $no): refused"
    done
    exit 0
fi

configure
found=$(sed -n 's/^circuit_DIR:PATH=//p' "$work/build/CMakeCache.txt")
case "$found" in
    "$prefix"/*) ;;
    *) echo "find_package(circuit) found '$found', not the package in $prefix"; exit 1 ;;
esac
"$cmake" --build "$work/build"

commands=$(grep '"command"' "$work/build/compile_commands.json")
echo "compile line: $commands"
no_dep_cflags "$commands" "the consumer's compile line"

if [[ "$mode" == shared ]]; then
    needs_libcircuit_so "$readelf" "$work/build/app" || { echo "app does not use libcircuit.so"; exit 1; }
else
    ! needs_libcircuit_so "$readelf" "$work/build/app" || { echo "app needs libcircuit.so"; exit 1; }
fi
# CMake gives a program in its build tree a RUNPATH to the libraries it links.
expect_output open "$work/build/app"
