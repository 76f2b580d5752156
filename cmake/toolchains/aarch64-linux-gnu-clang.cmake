# Cross build for aarch64 (64-bit ARM, Linux) with clang
# (--target=aarch64-linux-gnu), which uses the GNU cross binutils, libc and
# libstdc++ of Debian's cross packages (apt-get install clang
# gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
# binutils-aarch64-linux-gnu qemu-user) and the arm64 sysroot of
# .ci/aarch64-sysroot.sh. Used like aarch64-linux-gnu-gcc.cmake.
set(CMAKE_C_COMPILER clang)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
include("${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu-common.cmake")
