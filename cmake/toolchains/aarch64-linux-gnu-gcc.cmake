# Cross build for aarch64 (64-bit ARM, Linux) with Debian's GCC cross compiler
# (apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
# libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user) and the arm64
# sysroot of .ci/aarch64-sysroot.sh:
#
#   .ci/aarch64-sysroot.sh
#   cmake -S . -B build/aarch64-gcc -G Ninja \
#         --toolchain cmake/toolchains/aarch64-linux-gnu-gcc.cmake
#   cmake --build build/aarch64-gcc && ctest --test-dir build/aarch64-gcc
#
# ctest runs the programs under qemu-aarch64. .ci/aarch64-test.sh does all of
# this for gcc and clang, with the qemu skips explained.
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
include("${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu-common.cmake")
