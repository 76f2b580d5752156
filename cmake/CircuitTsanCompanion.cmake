# The TSan companion build, used by `cmake --workflow --preset test`.
#
# A workflow preset runs ONE configure preset, but the project's tests must
# pass under two incompatible sanitizer builds: ASan+UBSan and TSan. So the
# `test` configure preset is the ASan+UBSan build with CIRCUIT_TSAN_COMPANION
# on, which makes it build a second copy of the project, with
# CIRCUIT_SANITIZE=thread, in <build>/tsan (an ExternalProject step of the
# `all` target), and makes its ctest run that copy's tests too:
#
#   - every test of the TSan build is registered in this build as
#     "tsan/<name>", labelled "tsan" plus its own labels, and runs as
#     `ctest --test-dir <build>/tsan -R '^<name>$'`, so its own properties
#     (environment, timeout, working directory, skip codes) still apply;
#   - Criterion tests are left out: Criterion cannot start under TSan (see
#     STYLE.md); the TSan tests are plain executables. A Criterion test is one
#     labelled "criterion" (label every Criterion test so: the `tsan` preset
#     filters on it) or, as a safety net here, one whose program is linked
#     with libcriterion.
#
# One `ctest` then reports both suites in one summary, with a per-label time
# summary ("tsan" vs the rest). `ctest -LE tsan` runs only the ASan+UBSan
# suite, `ctest -L tsan` only the TSan one.

option(CIRCUIT_TSAN_COMPANION
  "Also build the project with TSan in <build>/tsan and run its tests from this build's ctest" OFF)

if(NOT CIRCUIT_TSAN_COMPANION)
  return()
endif()
if(CIRCUIT_SANITIZE_THREAD)
  message(FATAL_ERROR "CIRCUIT_TSAN_COMPANION is for a build that is not itself a TSan build")
endif()
if(NOT CIRCUIT_BUILD_TESTS)
  message(FATAL_ERROR "CIRCUIT_TSAN_COMPANION needs CIRCUIT_BUILD_TESTS=ON")
endif()

include(ExternalProject)

set(CIRCUIT_TSAN_DIR "${PROJECT_BINARY_DIR}/tsan")
set(_circuit_tsan_args
  -DCMAKE_BUILD_TYPE=Debug
  -DCIRCUIT_SANITIZE=thread
  -DCIRCUIT_TSAN_COMPANION=OFF
  -DCIRCUIT_BUILD_TESTS=ON
  -DCIRCUIT_BUILD_BENCH=OFF
  -DCIRCUIT_WERROR=${CIRCUIT_WERROR}
  -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER})
if(CMAKE_CXX_COMPILER)
  list(APPEND _circuit_tsan_args -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
endif()

ExternalProject_Add(circuit_tsan_build
  SOURCE_DIR "${PROJECT_SOURCE_DIR}"
  BINARY_DIR "${CIRCUIT_TSAN_DIR}"
  PREFIX "${PROJECT_BINARY_DIR}/tsan-companion"
  CMAKE_GENERATOR "${CMAKE_GENERATOR}"
  CMAKE_ARGS ${_circuit_tsan_args}
  BUILD_ALWAYS ON
  INSTALL_COMMAND ""
  TEST_COMMAND ""
  USES_TERMINAL_CONFIGURE ON
  USES_TERMINAL_BUILD ON)

# Registered when ctest reads this build's CTestTestfile.cmake (that is, after
# the TSan build exists): list its tests, and add one wrapper per test. Done
# in a directory of its own, added last, so that ctest lists (and runs) the
# ASan+UBSan suite first and the TSan suite after it.
add_subdirectory("${CMAKE_CURRENT_LIST_DIR}/tsan-tests" "${PROJECT_BINARY_DIR}/tsan-tests")
