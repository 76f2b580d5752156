# The core's dependencies, found with pkg-config. A missing one stops the
# configure step, which names EVERY missing module at once with the Debian
# package that provides it.
#
# Defines, for src/ and cmake/CircuitInstall.cmake:
#   PkgConfig::CK, PkgConfig::URCU  imported targets (GLOBAL)
#   Threads::Threads
#   CIRCUIT_DEPS_VARS / _MODULES / _DEBIAN   the pkg-config dependencies, as
#                        three parallel lists (target suffix, module, Debian
#                        package); circuitConfig.cmake finds the same ones
#                        again for circuit::circuit_static
#   CIRCUIT_DEPS_LIBS_PRIVATE  what a static link of libcircuit.a adds
#                        (circuit.pc's Libs.private), e.g.
#                        -lck -lurcu-common -lurcu-cds -pthread
#
# ConcurrencyKit: atomics (ck_pr) and backoff (ck_backoff) for the core.
# liburcu: transitions are published on liburcu's lock-free stack (cds_lfs
# push + __cds_lfs_pop_all), which lives in liburcu-cds. Flavour: none is
# needed. Pop-all detaches the whole list with one exchange, so no reader ever
# dereferences a node another thread may recycle: there is no ABA and no grace
# period to wait for, hence no rcu_read_lock(), no rcu_register_thread() and no
# quiescent-state calls in the caller's threads (the requirement that rules out
# qsbr/mb/signal). Were a read-side section ever needed, urcu-bp (bulletproof)
# would be the flavour, the one that registers threads by itself.
set(CIRCUIT_DEPS_VARS    CK        URCU)
set(CIRCUIT_DEPS_MODULES ck        liburcu-cds)
set(CIRCUIT_DEPS_DEBIAN  libck-dev liburcu-dev)

find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "libcircuit needs pkg-config to find ${CIRCUIT_DEPS_MODULES}: "
                      "apt-get install pkg-config")
endif()

set(_circuit_missing "")
set(_circuit_debian "")
set(CIRCUIT_DEPS_LIBS_PRIVATE "")
foreach(var module debian IN ZIP_LISTS CIRCUIT_DEPS_VARS CIRCUIT_DEPS_MODULES CIRCUIT_DEPS_DEBIAN)
  pkg_check_modules(${var} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(${var}_FOUND)
    # What `pkg-config --static --libs MODULE` says (-L only when not a
    # system directory). Only link flags: the consumer of circuit.h never
    # needs a dependency's cflags, the header includes none of their headers.
    list(APPEND CIRCUIT_DEPS_LIBS_PRIVATE ${${var}_STATIC_LDFLAGS})
  else()
    list(APPEND _circuit_missing "'${module}' (${debian})")
    list(APPEND _circuit_debian ${debian})
  endif()
endforeach()
if(_circuit_missing)
  list(JOIN _circuit_missing ", " _circuit_missing)
  list(JOIN _circuit_debian " " _circuit_debian)
  message(FATAL_ERROR "libcircuit needs the pkg-config module(s) ${_circuit_missing}: "
                      "apt-get install ${_circuit_debian}")
endif()
unset(_circuit_missing)
unset(_circuit_debian)

find_package(Threads REQUIRED)
# glibc 2.34 and later need nothing for threads; -pthread is right everywhere.
list(APPEND CIRCUIT_DEPS_LIBS_PRIVATE -pthread)
list(REMOVE_DUPLICATES CIRCUIT_DEPS_LIBS_PRIVATE)
