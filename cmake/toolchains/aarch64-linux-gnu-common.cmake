# Shared part of the aarch64 cross toolchain files (aarch64-linux-gnu-gcc.cmake,
# aarch64-linux-gnu-clang.cmake); not meant to be used on its own.
#
# The compilers are Debian's cross packages; the libraries (ck, liburcu,
# Criterion and their run-time dependencies, libc for qemu) come from the arm64
# sysroot that .ci/aarch64-sysroot.sh unpacks from the arm64 .debs (nothing
# arm64 is installed with apt). Its location, in this order:
#   -DCIRCUIT_AARCH64_SYSROOT=<dir>, $CIRCUIT_AARCH64_SYSROOT,
#   <source>/build/aarch64-sysroot (where the script puts it by default).
#
# Tests run under qemu-user: CMAKE_CROSSCOMPILING_EMULATOR makes every
# add_test(COMMAND <target>) run as `qemu-aarch64 -L <sysroot> <program>`.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT CIRCUIT_AARCH64_SYSROOT)
  if(DEFINED ENV{CIRCUIT_AARCH64_SYSROOT} AND NOT "$ENV{CIRCUIT_AARCH64_SYSROOT}" STREQUAL "")
    set(CIRCUIT_AARCH64_SYSROOT "$ENV{CIRCUIT_AARCH64_SYSROOT}")
  else()
    get_filename_component(CIRCUIT_AARCH64_SYSROOT
      "${CMAKE_CURRENT_LIST_DIR}/../../build/aarch64-sysroot" ABSOLUTE)
  endif()
endif()
set(CIRCUIT_AARCH64_SYSROOT "${CIRCUIT_AARCH64_SYSROOT}" CACHE PATH
  "arm64 sysroot unpacked by .ci/aarch64-sysroot.sh")
# try_compile projects (compiler checks, check_c_compiler_flag) load this file
# again and must see the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CIRCUIT_AARCH64_SYSROOT)
if(NOT EXISTS "${CIRCUIT_AARCH64_SYSROOT}/.complete")
  message(FATAL_ERROR
    "no arm64 sysroot at ${CIRCUIT_AARCH64_SYSROOT}: run .ci/aarch64-sysroot.sh "
    "(or pass -DCIRCUIT_AARCH64_SYSROOT=<dir>)")
endif()
set(_sr "${CIRCUIT_AARCH64_SYSROOT}")

# find_library / find_path / find_package look in the sysroot and in the cross
# libc (/usr/aarch64-linux-gnu), never in the host's /usr; programs (tools run
# at build time) come from the host.
set(CMAKE_FIND_ROOT_PATH "${_sr}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads only the sysroot's .pc files and prefixes their -I/-L paths
# with the sysroot. PKG_CONFIG_ALLOW_SYSTEM_*: keep -I<sysroot>/usr/include
# and -L<sysroot>/usr/lib/... (pkgconf would otherwise drop them as "system"
# directories, and the host's amd64 headers in /usr/include would be used).
set(ENV{PKG_CONFIG_LIBDIR}
  "${_sr}/usr/lib/aarch64-linux-gnu/pkgconfig:${_sr}/usr/lib/pkgconfig:${_sr}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_sr}")
set(ENV{PKG_CONFIG_ALLOW_SYSTEM_CFLAGS} 1)
set(ENV{PKG_CONFIG_ALLOW_SYSTEM_LIBS} 1)

# Both cross compilers search the host's /usr/include after their own libc
# headers; the sysroot's headers must come first for every target, including
# those that reach ck's headers through src/internal.h without linking
# PkgConfig::CK themselves (-isystem dirs are searched before the system ones).
foreach(_lang C CXX)
  set(CMAKE_${_lang}_STANDARD_INCLUDE_DIRECTORIES
    "${_sr}/usr/include/aarch64-linux-gnu" "${_sr}/usr/include")
endforeach()

# The linker resolves the DT_NEEDED entries of the sysroot's shared libraries
# (libcriterion.so.3 -> libgit2, libnanomsg, ...) through -rpath-link.
set(_rpl "-Wl,-rpath-link,${_sr}/usr/lib/aarch64-linux-gnu:${_sr}/lib/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_rpl}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_rpl}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_rpl}")

find_program(CIRCUIT_QEMU_AARCH64 qemu-aarch64)
if(CIRCUIT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${CIRCUIT_QEMU_AARCH64};-L;${_sr}")
endif()
unset(_sr)
unset(_rpl)
