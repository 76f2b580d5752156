#!/usr/bin/env bash
# Packaging test: build consumer/main.c against the installed prefix with
# pkg-config, run it, expect "open"; and check what circuit.pc says.
#
#   shared  `cc main.c $(pkg-config --cflags --libs circuit)` while pkg-config
#           sees circuit.pc ONLY (ck's and liburcu's .pc files hidden): a
#           consumer of libcircuit.so needs no -dev package of theirs. The
#           cflags are exactly -I<includedir> (none of ck's: -D__x86_64__);
#           circuit.pc has no Requires(.private).
#   static  `pkg-config --static`, with the dependencies visible, linking
#           libcircuit.a (-l:libcircuit.a): Libs.private is enough
#           for the link, and the program does not need libcircuit.so.
#
# usage: pkgconfig_consumer.sh MODE CC READELF PREFIX LIBDIR SRC WORKDIR
#        environment: CONSUMER_CFLAGS, CONSUMER_LDFLAGS (sanitizer flags)
set -euo pipefail
mode=$1 cc=$2 readelf=$3 prefix=$4 libdir=$5 src=$6 work=$7
cflags=${CONSUMER_CFLAGS-} ldflags=${CONSUMER_LDFLAGS-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

rm -rf "$work"
mkdir -p "$work"
pcdir="$prefix/$libdir/pkgconfig"

case "$mode" in
shared)
    hide_deps "$pcdir"
    pc_cflags=$(pkg-config --cflags circuit | xargs)
    pc_libs=$(pkg-config --libs circuit)
    echo "pkg-config --cflags: $pc_cflags"
    echo "pkg-config --libs:   $pc_libs"
    no_dep_cflags "$pc_cflags" "pkg-config --cflags circuit"
    no_dep_cflags "$(pkg-config --static --cflags circuit)" "pkg-config --static --cflags circuit"
    # The only cflag is the include directory, inside the prefix.
    inc=$(pkg-config --variable=includedir circuit)
    if [[ "$pc_cflags" != "-I$inc" ]]; then
        echo "pkg-config --cflags circuit is '$pc_cflags', expected '-I$inc' alone"
        exit 1
    fi
    for var in includedir libdir; do
        got=$(pkg-config --variable=$var circuit)
        case $var in includedir) want=$prefix/include ;; libdir) want=$prefix/$libdir ;; esac
        if [[ "$(cd "$got" && pwd -P)" != "$(cd "$want" && pwd -P)" ]]; then
            echo "circuit.pc: $var is $got, expected $want"
            exit 1
        fi
    done
    requires="$(pkg-config --print-requires circuit)$(pkg-config --print-requires-private circuit)"
    if [[ -n "$requires" ]]; then
        echo "circuit.pc requires modules ($requires): their cflags reach every consumer"
        exit 1
    fi
    # shellcheck disable=SC2086  # word splitting is the point here
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags \
        -o "$work/app" "$src/main.c" $pc_cflags $pc_libs $ldflags
    if ! needs_libcircuit_so "$readelf" "$work/app"; then
        echo "the program does not use libcircuit.so"
        exit 1
    fi
    LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        expect_output open "$work/app"
    ;;
static)
    export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    pc_cflags=$(pkg-config --static --cflags circuit)
    pc_libs=$(pkg-config --static --libs circuit)
    echo "pkg-config --static --cflags: $pc_cflags"
    echo "pkg-config --static --libs:   $pc_libs"
    no_dep_cflags "$pc_cflags" "pkg-config --static --cflags circuit"
    for lib in -lck -lurcu-cds; do
        if [[ " $pc_libs " != *" $lib "* ]]; then
            echo "pkg-config --static --libs circuit lacks $lib"
            exit 1
        fi
    done
    # libcircuit.a in place of libcircuit.so, as README.md shows it; the
    # rest as pkg-config says.
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags \
        -o "$work/app" "$src/main.c" $pc_cflags \
        $(pkg-config --cflags --libs --static circuit | sed 's/-lcircuit/-l:libcircuit.a/') $ldflags
    if needs_libcircuit_so "$readelf" "$work/app"; then
        echo "the program needs libcircuit.so; it should hold libcircuit.a"
        exit 1
    fi
    expect_output open "$work/app"
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
