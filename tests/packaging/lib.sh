# Shared by the packaging test scripts (sourced).

# hide_deps DIR: from now on pkg-config sees only the .pc files in DIR (an
# empty directory hides everything, the install prefix's lib/pkgconfig shows
# only circuit.pc); in particular not ck's nor liburcu's. Checks that it
# worked.
hide_deps() {
    mkdir -p "$1"
    export PKG_CONFIG_LIBDIR="$1"
    unset PKG_CONFIG_PATH
    local m
    for m in ck liburcu-cds liburcu-common; do
        if pkg-config --exists "$m"; then
            echo "could not hide the pkg-config module $m from pkg-config"
            exit 1
        fi
    done
    echo "pkg-config sees only: $(ls "$1" | tr '\n' ' ')(PKG_CONFIG_LIBDIR=$1)"
}

# no_dep_cflags TEXT WHAT: fails when TEXT holds a flag that only a
# dependency's .pc file would have added.
no_dep_cflags() {
    local flag
    for flag in -D__x86_64__ -D__aarch64__ -I/usr/include/x86_64-linux-gnu \
                -I/usr/include/aarch64-linux-gnu; do
        if [[ " $1 " == *" $flag "* ]]; then
            echo "$2 holds $flag, a dependency's cflag that circuit.h does not need: $1"
            exit 1
        fi
    done
}

# needs_libcircuit_so READELF PROGRAM: true when PROGRAM has a NEEDED entry
# for libcircuit.so.
needs_libcircuit_so() {
    "$1" -d "$2" | grep -q 'NEEDED.*\[libcircuit\.so'
}

# expect_output WANT COMMAND...: runs COMMAND, compares what it prints.
expect_output() {
    local want=$1 out
    shift
    out=$("$@")
    echo "$* printed: $out"
    if [[ "$out" != "$want" ]]; then
        echo "expected: $want"
        exit 1
    fi
}
