# Unit tests named by SPEC rule id (issue 3). Included by tests/CMakeLists.txt.
#
# One executable per file, each registered as `unit_<file>` with label
# "unit". The Criterion ones are labelled "criterion" too: Criterion cannot
# start under TSan (STYLE.md), so a TSan build leaves them out and the `tsan`
# presets filter that label. tests/test_l3_race.c is a plain program: it is
# the unit test that a TSan build runs (SPEC L3).
#
# The C test executables are linked with --wrap for the allocation functions:
# calls made by the static circuit_testable library then go through the
# counting (and failing) wrappers of tests/helpers.h (SPEC CFG3, T7, L5).

if(NOT TARGET circuit_testable)
  return()
endif()

set(CIRCUIT_UNIT_WRAP
  "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=aligned_alloc")

# ---- the plain program (runs in every build, TSan included) --------------------
add_executable(test_l3_race ${CMAKE_CURRENT_LIST_DIR}/test_l3_race.c)
target_compile_definitions(test_l3_race PRIVATE _GNU_SOURCE)
target_compile_options(test_l3_race PRIVATE ${CIRCUIT_WARNING_FLAGS} -fexceptions)
target_link_libraries(test_l3_race PRIVATE circuit_testable Threads::Threads)
add_test(NAME unit_L3_race COMMAND test_l3_race)
set_tests_properties(unit_L3_race PROPERTIES LABELS "unit" TIMEOUT 120)

if(CIRCUIT_SANITIZE_THREAD)
  return() # Criterion cannot start under TSan
endif()

# ---- Criterion tests -------------------------------------------------------------
set(CIRCUIT_UNIT_SUITES
  test_config        # CFG1-CFG4
  test_states        # S1-S5
  test_counts        # C1-C5
  test_tickets       # T1-T7
  test_probes        # P1-P3, TM1-TM3
  test_observe       # O1-O6
  test_concurrency   # L1-L5
  test_seeds         # the scenarios of the seed documents
  test_regressions   # bugs found by review, pinned
)

foreach(suite IN LISTS CIRCUIT_UNIT_SUITES)
  add_executable(${suite} ${CMAKE_CURRENT_LIST_DIR}/${suite}.c)
  target_compile_definitions(${suite} PRIVATE _GNU_SOURCE)
  # -fexceptions: CIRCUIT_TICKET_GUARD must run when pthread_exit or
  # pthread_cancel unwinds the test's own frames (SPEC P3, O5).
  target_compile_options(${suite} PRIVATE ${CIRCUIT_WARNING_FLAGS} -fexceptions)
  target_link_libraries(${suite} PRIVATE circuit_testable PkgConfig::CRITERION Threads::Threads)
  target_link_options(${suite} PRIVATE ${CIRCUIT_UNIT_WRAP})
  string(REPLACE "test_" "unit_" name ${suite})
  add_test(NAME ${name} COMMAND ${suite})
  set_tests_properties(${name} PROPERTIES LABELS "unit;criterion" TIMEOUT 300)
endforeach()

# ---- C++: exceptions thrown through the core (SPEC O5, P3) ---------------------------
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  set(CIRCUIT_UNIT_CXX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion)
  add_executable(test_unwind_cxx ${CMAKE_CURRENT_LIST_DIR}/test_unwind_cxx.cpp)
  target_compile_definitions(test_unwind_cxx PRIVATE _GNU_SOURCE)
  target_compile_options(test_unwind_cxx PRIVATE ${CIRCUIT_UNIT_CXX_WARNINGS})
  if(CIRCUIT_WERROR)
    target_compile_options(test_unwind_cxx PRIVATE -Werror)
  endif()
  set_target_properties(test_unwind_cxx PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                   CXX_EXTENSIONS OFF)
  target_link_libraries(test_unwind_cxx PRIVATE circuit_testable PkgConfig::CRITERION Threads::Threads)
  add_test(NAME unit_unwind_cxx COMMAND test_unwind_cxx)
  set_tests_properties(unit_unwind_cxx PROPERTIES LABELS "unit;criterion" TIMEOUT 300)
else()
  message(STATUS "libcircuit: no C++ compiler, tests/test_unwind_cxx.cpp is not built")
endif()
