# Unit tests of the presets (include/circuit_presets.h) and the "Coming from
# another breaker" compatibility tests (one test per README table row).
# Meant to be included from tests/unit.cmake:
#   include(${CMAKE_CURRENT_LIST_DIR}/presets.cmake)
# It needs circuit_testable and PkgConfig::CRITERION (tests/CMakeLists.txt).
# Registered as unit_presets and unit_compat, labels "unit;criterion" like the
# other Criterion suites; left out of TSan builds (Criterion cannot start
# under TSan, STYLE.md).

if(NOT TARGET circuit_testable OR CIRCUIT_SANITIZE_THREAD)
  return()
endif()

foreach(suite presets compat)
  add_executable(test_${suite} ${CMAKE_CURRENT_LIST_DIR}/${suite}.c)
  target_compile_definitions(test_${suite} PRIVATE _GNU_SOURCE)
  # -fexceptions: CIRCUIT_TICKET_GUARD must run when pthread_exit unwinds a
  # test's own frames (compat: gobreaker_execute_panic_is_guard_counts_nothing).
  target_compile_options(test_${suite} PRIVATE ${CIRCUIT_WARNING_FLAGS} -fexceptions)
  target_link_libraries(test_${suite} PRIVATE circuit_testable PkgConfig::CRITERION Threads::Threads m)
  add_test(NAME unit_${suite} COMMAND test_${suite})
  set_tests_properties(unit_${suite} PROPERTIES LABELS "unit;criterion" TIMEOUT 300)
endforeach()
