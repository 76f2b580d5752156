# Dependencies, found with pkg-config. A missing one fails at configure time
# naming the Debian package that provides it.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config")
endif()

function(circuit_require_pkg var module debian_pkg)
  pkg_check_modules(${var} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${var}_FOUND)
    message(FATAL_ERROR "libcircuit needs '${module}' (pkg-config): apt-get install ${debian_pkg}")
  endif()
  # Remembered for packaging (cmake/CircuitInstall.cmake): the installed
  # package config and circuit.pc name every pkg-config module that the core
  # links as PkgConfig::<var>.
  set_property(GLOBAL PROPERTY CIRCUIT_PKG_MODULE_${var} "${module}")
  set_property(GLOBAL PROPERTY CIRCUIT_PKG_DEBIAN_${var} "${debian_pkg}")
endfunction()

# ConcurrencyKit: atomics (ck_pr) and backoff (ck_backoff) for the core.
circuit_require_pkg(CK ck libck-dev)
# liburcu: transitions are published on liburcu's lock-free stack (cds_lfs
# push + __cds_lfs_pop_all), which lives in liburcu-cds. Flavour: none is
# needed. Pop-all detaches the whole list with one exchange, so no reader ever
# dereferences a node another thread may recycle: there is no ABA and no grace
# period to wait for, hence no rcu_read_lock(), no rcu_register_thread() and no
# quiescent-state calls in the caller's threads (the requirement that rules out
# qsbr/mb/signal). Were a read-side section ever needed, urcu-bp (bulletproof)
# would be the flavour, the one that registers threads by itself.
circuit_require_pkg(URCU liburcu-cds liburcu-dev)

find_package(Threads REQUIRED)
