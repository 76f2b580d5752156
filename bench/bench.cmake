# circuit-bench: the microbenchmarks (bench/circuit_bench.c) and their smoke
# test. Included by bench/CMakeLists.txt, so only when CIRCUIT_BUILD_BENCH=ON.
#
# The binary measures the installed-style shared library (target `circuit`),
# never a static or test build of the core, next to the reference model
# (target `circuit_model`, the mutex_breaker baseline).

if(NOT TARGET circuit_model)
  message(FATAL_ERROR
    "circuit-bench needs the reference model (target 'circuit_model', "
    "tests/model/) as its mutex_breaker baseline, and no such target is defined. "
    "The model is built with the tests: configure with -DCIRCUIT_BUILD_TESTS=ON, "
    "or leave the benchmarks out with -DCIRCUIT_BUILD_BENCH=OFF.")
endif()

# A model that brings a static build of the core along would put a second copy
# of circuit_* into the binary, shadowing libcircuit.so: refuse it here rather
# than measure the wrong library.
get_target_property(_circuit_bench_model_links circuit_model INTERFACE_LINK_LIBRARIES)
if(_circuit_bench_model_links)
  foreach(_lib IN LISTS _circuit_bench_model_links)
    if(_lib MATCHES "circuit_testable|circuit_static")
      message(FATAL_ERROR
        "circuit-bench: target circuit_model links '${_lib}'; the bench must link "
        "the shared library 'circuit' only. The model needs circuit.h, not the core.")
    endif()
  endforeach()
endif()

if(NOT CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
  message(STATUS "circuit-bench: build type is '${CMAKE_BUILD_TYPE}'; its figures mean "
                 "something only with -DCMAKE_BUILD_TYPE=Release")
endif()

add_executable(circuit-bench circuit_bench.c)
target_compile_definitions(circuit-bench PRIVATE _GNU_SOURCE)
target_compile_options(circuit-bench PRIVATE ${CIRCUIT_WARNING_FLAGS})
target_link_libraries(circuit-bench PRIVATE circuit::circuit circuit_model Threads::Threads
                                            ${CMAKE_DL_LIBS})
if(CIRCUIT_SANITIZE)
  # The bench counts allocations by defining malloc & co.; a sanitizer's
  # runtime owns those, so the counting is compiled out there.
  target_compile_definitions(circuit-bench PRIVATE CIRCUIT_BENCH_NO_MALLOC_HOOKS=1)
endif()

# ---- the benchmark job (label "bench": `cmake --workflow --preset bench`) --
# The full run: every case and baseline at 1, 2, CPUs and 2x CPUs threads,
# median of 5 x 0.5 s; the table on stdout, one JSON line per figure in
# circuit-bench.json. A few minutes on 2 CPUs.
add_test(NAME bench.circuit
  COMMAND circuit-bench --json ${CMAKE_CURRENT_BINARY_DIR}/circuit-bench.json)
set_tests_properties(bench.circuit PROPERTIES LABELS "bench" TIMEOUT 1500 RUN_SERIAL TRUE)

# ---- smoke test ------------------------------------------------------------
# Runs `circuit-bench --quick --case closed_success --json F` and checks F with
# a cmake -P script (python is not guaranteed on CI): every line parses, has
# the required keys, and every figure is > 0. No timing threshold decides
# pass or fail. The bench exits non-zero when a case did not measure what it
# claims (e.g. a closed_success breaker that tripped), which fails it too.
set(_circuit_bench_check ${CMAKE_CURRENT_SOURCE_DIR}/check_bench_json.cmake)
add_test(NAME bench-smoke
  COMMAND ${CMAKE_COMMAND}
          -DBENCH=$<TARGET_FILE:circuit-bench>
          -DCASE=closed_success
          -DJSON=${CMAKE_CURRENT_BINARY_DIR}/bench-smoke.json
          -P ${_circuit_bench_check})
set_tests_properties(bench-smoke PROPERTIES
  LABELS "bench-smoke"
  TIMEOUT 300
  RUN_SERIAL TRUE)  # nothing else running: fewer disturbed figures, and none disturbed by it

# The checker must reject bad output: one broken file per rule, each expected
# to fail.
set(_circuit_bench_good_line
  [[{"case":"closed_success","variant":"circuit","threads":1,"window":64,"probes":1,"ns_per_op":10.0,"mops":100.0,"min_ns":9.0,"max_ns":11.0,"reps":5}]])
set(_circuit_bench_bad_not_json [[{"case":"closed_success","variant":"circuit",]])
string(REPLACE [["reps":5]] [["rep":5]] _circuit_bench_bad_missing_key "${_circuit_bench_good_line}")
string(REPLACE [["mops":100.0]] [["mops":0]] _circuit_bench_bad_zero "${_circuit_bench_good_line}")
string(REPLACE [["min_ns":9.0]] [["min_ns":-1]] _circuit_bench_bad_negative "${_circuit_bench_good_line}")
string(REPLACE [["variant":"circuit"]] [["variant":"other"]] _circuit_bench_bad_variant
       "${_circuit_bench_good_line}")
foreach(_kind not_json missing_key zero negative variant)
  set(_file ${CMAKE_CURRENT_BINARY_DIR}/bench-smoke-bad-${_kind}.json)
  file(WRITE ${_file} "${_circuit_bench_good_line}\n${_circuit_bench_bad_${_kind}}\n")
  add_test(NAME bench-smoke-checker-rejects-${_kind}
    COMMAND ${CMAKE_COMMAND} -DJSON=${_file} -DREQUIRE=NONE -P ${_circuit_bench_check})
  set_tests_properties(bench-smoke-checker-rejects-${_kind} PROPERTIES
    LABELS "bench-smoke" WILL_FAIL TRUE)
endforeach()
set(_file ${CMAKE_CURRENT_BINARY_DIR}/bench-smoke-good.json)
file(WRITE ${_file} "${_circuit_bench_good_line}\n")
add_test(NAME bench-smoke-checker-accepts
  COMMAND ${CMAKE_COMMAND} -DJSON=${_file} -DREQUIRE=NONE -P ${_circuit_bench_check})
set_tests_properties(bench-smoke-checker-accepts PROPERTIES LABELS "bench-smoke")
