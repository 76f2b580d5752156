# The rule-id check (docs/CONTRACT.md). Included by
# tests/CMakeLists.txt.
#
#   rule_ids           every rule id cited in include/, src/, tests/ or
#                      README.md is defined in docs/CONTRACT.md, and every id
#                      defined there is named by a test (test name, ctest name
#                      or test file name)
#   rule_ids_selftest  the check itself fails on an undefined, an untested and
#                      a doubly defined id, and on a stale index
#   rule_index         docs/RULES-INDEX.md (rule -> tests) is what the check
#                      generates from the tree now (regenerate it with
#                      `python3 tests/check_rule_ids.py --index docs/RULES-INDEX.md`)
#
# Needs python3 (standard library only).
find_package(Python3 3.7 REQUIRED COMPONENTS Interpreter)

add_test(NAME rule_ids
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_rule_ids.py
          --root ${PROJECT_SOURCE_DIR})
add_test(NAME rule_ids_selftest
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_rule_ids.py --self-test)
add_test(NAME rule_index
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_rule_ids.py
          --root ${PROJECT_SOURCE_DIR} --check-index docs/RULES-INDEX.md)
set_tests_properties(rule_ids rule_ids_selftest rule_index PROPERTIES LABELS "rules" TIMEOUT 60)

# L7: the core's shared accesses all go through src/atomics.h, each
# naming its memory order; 8-byte atomics are the same builtins in every build.
add_test(NAME L7_atomics_vocabulary
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_atomics.py
          --root ${PROJECT_SOURCE_DIR})
add_test(NAME L7_atomics_vocabulary_selftest
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_atomics.py --self-test)
set_tests_properties(L7_atomics_vocabulary L7_atomics_vocabulary_selftest
  PROPERTIES LABELS "rules" TIMEOUT 60)
