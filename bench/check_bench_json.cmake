# Checks the --json output of circuit-bench (run as `cmake -P`; needs CMake
# >= 3.19 for string(JSON), the project requires 3.25).
#
#   cmake [-DBENCH=<circuit-bench>] [-DCASE=<name>] -DJSON=<file> [-DREQUIRE=NONE]
#         -P check_bench_json.cmake
#
# BENCH given: first runs `BENCH --quick --case CASE --json JSON` and fails if
# it exits non-zero. Then every line of JSON must be a JSON object with
#   case, variant                      non-empty strings (variant: circuit,
#                                      mutex_breaker or baseline)
#   threads, reps                      integers >= 1
#   window, probes                     integers >= 0 (0 for baselines)
#   ns_per_op, mops, min_ns, max_ns    numbers > 0, min_ns <= ns_per_op <= max_ns
# and, unless REQUIRE is NONE, the file must hold figures for CASE (default
# closed_success) in both variants and for the atomic_floor baseline.
# No timing threshold: how fast is never pass/fail here.
cmake_minimum_required(VERSION 3.19)

if(NOT DEFINED JSON)
  message(FATAL_ERROR "check_bench_json: pass -DJSON=<file>")
endif()
if(NOT DEFINED CASE)
  set(CASE closed_success)
endif()

if(DEFINED BENCH)
  file(REMOVE "${JSON}")
  execute_process(
    COMMAND "${BENCH}" --quick --case "${CASE}" --json "${JSON}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_bench_json: '${BENCH}' exited with ${rc}:\n${err}")
  endif()
endif()

if(NOT EXISTS "${JSON}")
  message(FATAL_ERROR "check_bench_json: ${JSON} was not written")
endif()

function(fail msg)
  message(FATAL_ERROR "check_bench_json: ${JSON}:${lineno}: ${msg}\n  ${line}")
endfunction()

file(STRINGS "${JSON}" lines)
set(lineno 0)
set(seen "")
foreach(line IN LISTS lines)
  math(EXPR lineno "${lineno} + 1")
  string(JSON type ERROR_VARIABLE jerr TYPE "${line}")
  if(jerr)
    fail("not JSON: ${jerr}")
  endif()
  if(NOT type STREQUAL "OBJECT")
    fail("not a JSON object (${type})")
  endif()

  foreach(key case variant)
    string(JSON t ERROR_VARIABLE jerr TYPE "${line}" ${key})
    if(jerr OR NOT t STREQUAL "STRING")
      fail("'${key}' missing or not a string")
    endif()
    string(JSON ${key} GET "${line}" ${key})
    if("${${key}}" STREQUAL "")
      fail("'${key}' is empty")
    endif()
  endforeach()
  if(NOT variant MATCHES "^(circuit|mutex_breaker|baseline)$")
    fail("variant '${variant}' is not circuit, mutex_breaker or baseline")
  endif()

  foreach(key threads reps window probes ns_per_op mops min_ns max_ns)
    string(JSON t ERROR_VARIABLE jerr TYPE "${line}" ${key})
    if(jerr OR NOT t STREQUAL "NUMBER")
      fail("'${key}' missing or not a number")
    endif()
    string(JSON ${key} GET "${line}" ${key})
  endforeach()
  foreach(key threads reps window probes)
    if(NOT ${key} MATCHES "^[0-9]+$")
      fail("'${key}' = ${${key}} is not a non-negative integer")
    endif()
  endforeach()
  foreach(key threads reps)
    if(${key} LESS 1)
      fail("'${key}' = ${${key}} is not >= 1")
    endif()
  endforeach()
  foreach(key ns_per_op mops min_ns max_ns)
    if(NOT ${key} GREATER 0)
      fail("'${key}' = ${${key}} is not > 0")
    endif()
  endforeach()
  if(min_ns GREATER ns_per_op OR ns_per_op GREATER max_ns)
    fail("not min_ns <= ns_per_op <= max_ns")
  endif()
  list(APPEND seen "${case}/${variant}")
endforeach()

if(lineno EQUAL 0)
  message(FATAL_ERROR "check_bench_json: ${JSON} holds no figure")
endif()
if(NOT REQUIRE STREQUAL "NONE")
  foreach(want "${CASE}/circuit" "${CASE}/mutex_breaker" "atomic_floor/baseline")
    if(NOT want IN_LIST seen)
      message(FATAL_ERROR "check_bench_json: ${JSON} has no figure for ${want}")
    endif()
  endforeach()
endif()
message(STATUS "check_bench_json: ${lineno} figures in ${JSON} are well-formed and > 0")
