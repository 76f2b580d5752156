#!/usr/bin/env bash
# Builds the arm64 sysroot that the aarch64 cross builds link against and that
# qemu-aarch64 runs from (cmake/toolchains/aarch64-linux-gnu-*.cmake):
#
#   .ci/aarch64-sysroot.sh [DIR]        (default: build/aarch64-sysroot)
#
# The arm64 .debs are downloaded with `apt-get download` and unpacked with
# `dpkg-deb -x` into DIR. Nothing is installed for arm64: libck-dev:arm64 and
# libck-dev:amd64 cannot be installed together (installing one removes the
# other, and with it the x86-64 build), so `apt-get install <pkg>:arm64` must
# never be used here.
#
# What goes in:
#   - headers and pkg-config files (not followed further): ck, liburcu,
#     Criterion, and the modules criterion.pc names under Requires.private
#     (boxfort, libffi, libgit2, nanomsg; libgit2.pc in turn names libpcre2-8
#     and zlib), which pkg-config reads even for a shared link;
#   - run-time libraries with everything they depend on (Depends and
#     Pre-Depends, followed recursively with apt-cache depends): libck0,
#     liburcu8, libcriterion3, and libc6, libgcc-s1, libstdc++6 so that
#     `qemu-aarch64 -L DIR` finds the dynamic loader and the C/C++ runtime.
#
# The compilers themselves come from Debian's cross packages (installed as
# usual, amd64 packages): gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu,
# libc6-dev-arm64-cross, binutils-aarch64-linux-gnu; clang uses them with
# --target=aarch64-linux-gnu.
#
# Needs root only the first time on a machine (dpkg --add-architecture arm64
# and apt-get update); later runs reuse the downloaded .debs
# (DIR.debs/) when the versions apt offers have not changed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
sysroot=${1:-build/aarch64-sysroot}
mkdir -p "$(dirname "$sysroot")"
sysroot=$(cd "$(dirname "$sysroot")" && pwd)/$(basename "$sysroot")
debs=$sysroot.debs

dev_packages=(
    libck-dev liburcu-dev libcriterion-dev
    libboxfort-dev libffi-dev libgit2-dev libnanomsg-dev libpcre2-dev zlib1g-dev
)
runtime_roots=(libck0 liburcu8 libcriterion3 libc6 libgcc-s1 libstdc++6)

as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    else
        echo "aarch64-sysroot: needs root for: $*" >&2
        exit 1
    fi
}

# ---- apt knows arm64 -------------------------------------------------------------
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "== dpkg --add-architecture arm64"
    as_root dpkg --add-architecture arm64
fi
if [[ -z "$(apt-cache policy libck0:arm64 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]]; then
    echo "== apt-get update (arm64 package lists)"
    as_root apt-get update -q
fi

# ---- the package list: dev packages + the run-time closure -----------------------
# One apt-cache call per level of the dependency tree (each call reads the
# package lists, which takes a second or two).
declare -A seen=()
level=("${runtime_roots[@]}")
runtime=()
while ((${#level[@]})); do
    for p in "${level[@]}"; do seen[$p]=1; runtime+=("$p"); done
    # "Depends: foo:arm64" lines; of an alternative ("|Depends: a" then
    # "Depends: b") the first is taken; virtual packages (<name>) are
    # provided by a real one that is listed too.
    next=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
               --no-replaces --no-enhances "${level[@]/%/:arm64}" |
           awk '/^ *\|?(Pre)?Depends:/ {
                    if (!alt) print $2
                    alt = ($1 ~ /^\|/)
                }' |
           sed 's/:arm64$//' | grep -v '^<\|:' | sort -u)
    level=()
    for p in $next; do
        [[ -z "${seen[$p]:-}" ]] && level+=("$p")
    done
done
packages=()
for p in "${dev_packages[@]}" "${runtime[@]}"; do packages+=("$p"); done

# ---- download (again only if a version changed) --------------------------------
want=$(apt-cache policy "${packages[@]/%/:arm64}" |
       awk '/^[^ ].*:arm64:$/ { sub(/:arm64:$/, ""); p = $0 }
            /^ *Candidate:/    { print p "=" $2 }' | sort)
if [[ $(wc -l <<<"$want") -ne ${#packages[@]} ]]; then
    echo "aarch64-sysroot: apt-cache policy did not list every package:" >&2
    echo "$want" >&2
    exit 1
fi
if grep -q '=(none)$\|=$' <<<"$want"; then
    echo "aarch64-sysroot: apt has no arm64 candidate for:" >&2
    grep '=(none)$\|=$' <<<"$want" >&2
    exit 1
fi
if [[ -f "$debs/versions" && "$(cat "$debs/versions")" == "$want" && -f "$sysroot/.complete" ]]; then
    echo "== aarch64 sysroot up to date: $sysroot (${#packages[@]} packages)"
    exit 0
fi
echo "== downloading ${#packages[@]} arm64 packages into $debs"
rm -rf "$debs" "$sysroot"
mkdir -p "$debs" "$sysroot"
# apt-get download drops its privileges to _apt, which must be able to write
# the folder; otherwise it downloads unsandboxed with a warning.
chmod 0777 "$debs" 2>/dev/null || true
(cd "$debs" && apt-get download -q $(sed 's/=/:arm64=/' <<<"$want") >/dev/null)
echo "$want" >"$debs/versions"

echo "== unpacking into $sysroot"
for deb in "$debs"/*.deb; do
    dpkg-deb -x "$deb" "$sysroot"
done

# Absolute symlinks (/usr/lib/... -> /lib/...) would point at the host's
# files; make them relative so that they stay inside the sysroot.
while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ "$target" == /* ]]; then
        ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot$target")" "$link"
    fi
done < <(find "$sysroot" -type l -print0)

# The loader must be where the aarch64 binaries' PT_INTERP says.
test -e "$sysroot/lib/ld-linux-aarch64.so.1" || {
    echo "aarch64-sysroot: no lib/ld-linux-aarch64.so.1 in $sysroot" >&2
    exit 1
}
for pc in ck liburcu-cds criterion; do
    test -f "$sysroot/usr/lib/aarch64-linux-gnu/pkgconfig/$pc.pc" || {
        echo "aarch64-sysroot: $pc.pc missing from $sysroot" >&2
        exit 1
    }
done
touch "$sysroot/.complete"
echo "== aarch64 sysroot ready: $sysroot ($(du -sh "$sysroot" | cut -f1), ${#packages[@]} packages)"
