# The CPUs libcircuit supports, and the flags each one needs.
#
# The state word is 16 bytes, updated by a lock-free double-width
# compare-and-swap, and every shared access in src/ goes through src/atomics.h
# with an explicit memory order. A CPU is supported once both hold for it:
#
#   x86-64   cmpxchg16b; -mcx16 lets the compiler emit it (every x86-64 CPU
#            since the first Core 2 / K8 rev. F has it).
#   aarch64  ldxp/stxp (ARMv8.0) or casp (ARMv8.1 LSE); no flag is needed.
#
# Anything else stops the configure step: a port needs a lock-free 16-byte
# CAS on that CPU (not a libatomic call that may take a lock) and a review of
# src/atomics.h for that CPU's memory model.
#
# Sets CIRCUIT_ARCH (x86_64 or aarch64) and CIRCUIT_ARCH_FLAGS (compile
# options for the core's sources).

string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _circuit_cpu)
if(_circuit_cpu MATCHES "^(x86_64|amd64|x64)$")
  set(CIRCUIT_ARCH x86_64)
  set(CIRCUIT_ARCH_FLAGS -mcx16) # x86-64 only: cmpxchg16b
elseif(_circuit_cpu MATCHES "^(aarch64|arm64)$")
  set(CIRCUIT_ARCH aarch64)
  set(CIRCUIT_ARCH_FLAGS "")
else()
  message(FATAL_ERROR
    "libcircuit supports x86-64 and aarch64 only; the target processor is "
    "'${CMAKE_SYSTEM_PROCESSOR}' (CMAKE_SYSTEM_PROCESSOR). A port to it needs "
    "(1) a lock-free 16-byte compare-and-swap on that CPU for the state word "
    "(an instruction, not a libatomic call that may take a lock), and "
    "(2) the atomics in src/atomics.h reviewed against that CPU's memory "
    "model (every order and fence), then this check (cmake/CircuitArch.cmake) "
    "extended and the CPU added to CI.")
endif()
# The same name on a 32-bit ABI (x32, ILP32, -m32 on a 64-bit host) has no
# 16-byte CAS of two 64-bit words.
if(NOT CMAKE_SIZEOF_VOID_P EQUAL 8)
  message(FATAL_ERROR
    "libcircuit needs a 64-bit ABI (pointer size ${CMAKE_SIZEOF_VOID_P} on "
    "'${CMAKE_SYSTEM_PROCESSOR}'): the state word is two 64-bit words "
    "updated by one 16-byte compare-and-swap.")
endif()
message(STATUS "libcircuit: target CPU ${CIRCUIT_ARCH} (${CMAKE_SYSTEM_PROCESSOR}), "
               "core flags: ${CIRCUIT_ARCH_FLAGS}")
unset(_circuit_cpu)
