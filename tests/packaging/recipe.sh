#!/usr/bin/env bash
# Packaging test: the README's recipe "Use the library in your project",
# run as written. The README marks each of its blocks with a comment
# `<!-- recipe:NAME -->` on the line before the fence; this script
#
#   1. checks that the blocks hello.c and CMakeLists.txt are the files in
#      tests/packaging/recipe/ (the recipe copies that folder);
#   2. copies the source tree (what git tracks, as it is on disk) to a
#      scratch folder, sets HOME to another one, and runs there, in one bash
#      (-e), the blocks build, pkg-config and cmake verbatim: configure with
#      the tests and benchmarks off, build, install to $HOME/circuit, then
#      build hello.c with pkg-config and with find_package and run it. While
#      it builds hello, pkg-config sees circuit.pc only (ck's and liburcu's
#      .pc files hidden), and LD_LIBRARY_PATH is unset: the program must
#      start through its rpath;
#   3. checks that both programs print the block `output`.
# The block `apt` (the packages to install) is not run; .ci/run installs
# those and more.
#
# usage: recipe.sh CC SOURCE_DIR WORKDIR
set -euo pipefail
cc=$1 src=$2 work=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readme="$src/README.md"

rm -rf "$work"
mkdir -p "$work/blocks" "$work/src" "$work/home" "$work/no-pc"

# The block after `<!-- recipe:NAME -->`, without its fences.
block() {
    awk -v name="$1" '
        $0 == "<!-- recipe:" name " -->" { want = 1; next }
        want && /^```/ { if (inside) exit; inside = 1; next }
        want && inside { print }
    ' "$readme" >"$work/blocks/$1"
    if [[ ! -s "$work/blocks/$1" ]]; then
        echo "README.md has no block marked <!-- recipe:$1 -->"
        exit 1
    fi
}
for b in apt build hello.c pkg-config output CMakeLists.txt cmake; do
    block "$b"
done

for f in hello.c CMakeLists.txt; do
    if ! diff -u "$here/recipe/$f" "$work/blocks/$f"; then
        echo "README.md's $f differs from tests/packaging/recipe/$f (diff above)"
        exit 1
    fi
done
echo "README.md shows tests/packaging/recipe/{hello.c,CMakeLists.txt} as they are"
if ! grep -q -- '-DCIRCUIT_BUILD_TESTS=OFF' "$work/blocks/build" ||
   ! grep -q -- '-DCIRCUIT_BUILD_BENCH=OFF' "$work/blocks/build"; then
    echo "the recipe's build block must turn the tests and benchmarks off"
    exit 1
fi

# The source tree as a fresh clone would have it (plus uncommitted edits).
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$work/src" -xf -
else
    tar -C "$src" --exclude='./build*' -cf - . | tar -C "$work/src" -xf -
fi

{
    echo 'set -euo pipefail'
    echo 'unset LD_LIBRARY_PATH PKG_CONFIG_PATH PKG_CONFIG_LIBDIR'
    cat "$work/blocks/build"
    echo "export PKG_CONFIG_LIBDIR='$work/no-pc'   # (test) hide ck's and liburcu's .pc files"
    cat "$work/blocks/pkg-config"
    cat "$work/blocks/cmake"
} >"$work/recipe.bash"
echo "---- running, in $work/src with HOME=$work/home:"
cat "$work/recipe.bash"
echo "----"
(cd "$work/src" && HOME="$work/home" bash -x "$work/recipe.bash")

want=$(cat "$work/blocks/output")
for prog in "$work/home/hello/hello" "$work/home/hello/build/hello"; do
    got=$(env -u LD_LIBRARY_PATH "$prog")
    if [[ "$got" != "$want" ]]; then
        echo "$prog printed:"
        echo "$got"
        echo "README.md says it prints:"
        echo "$want"
        exit 1
    fi
done
echo "both programs print what README.md shows"

# The program is also clean C11 under strict warnings.
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
    -I"$work/home/circuit/include" "$here/recipe/hello.c"
echo "recipe: ok"
