# Sanitizer builds, chosen with one cache variable:
#
#   CIRCUIT_SANITIZE=""                   no sanitizer (default)
#   CIRCUIT_SANITIZE="address;undefined"  ASan + UBSan (the `debug` preset)
#   CIRCUIT_SANITIZE="thread"             TSan (the `tsan` preset)
#
# The flags are carried by ONE interface target, `circuit_sanitize`: a target
# that links it is compiled and linked with them, and so is every target that
# links that one when it is linked PUBLIC. It is linked by circuit_testable
# (src/CMakeLists.txt) and circuit_model (tests/CMakeLists.txt), publicly, so
# every test program built on them is instrumented as a whole, and directly by
# the test programs that link neither (the TSan canaries). A program that must
# not be instrumented (tests/stress/stress_nolock, which defines malloc and the
# lock functions a sanitizer's runtime owns) simply does not link it. In a
# build without sanitizers the target is empty. UBSan findings abort
# (-fno-sanitize-recover) so that a test which triggers one fails.
#
# Other CMake files may read:
#   CIRCUIT_SANITIZE          the list above (empty when none)
#   CIRCUIT_SANITIZE_THREAD   ON in a TSan build: Criterion cannot start under
#                             TSan, so Criterion tests are not built there
#   CIRCUIT_SANITIZE_CFLAGS   compile flags, as one string (for programs built
#                             outside this tree, e.g. the packaging consumers)
#   CIRCUIT_SANITIZE_LDFLAGS  link flags, as one string (likewise)

set(CIRCUIT_SANITIZE "" CACHE STRING
  "Sanitizers for the tests and what they link: empty, 'address;undefined' or 'thread'")
set_property(CACHE CIRCUIT_SANITIZE PROPERTY STRINGS "" "address;undefined" "thread")

add_library(circuit_sanitize INTERFACE)
set(CIRCUIT_SANITIZE_THREAD OFF)
set(CIRCUIT_SANITIZE_CFLAGS "")
set(CIRCUIT_SANITIZE_LDFLAGS "")

if(CIRCUIT_SANITIZE)
  string(REPLACE "," ";" _circuit_san "${CIRCUIT_SANITIZE}")
  foreach(s IN LISTS _circuit_san)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "CIRCUIT_SANITIZE: unknown sanitizer '${s}' "
                          "(use 'address;undefined' or 'thread')")
    endif()
  endforeach()
  if("thread" IN_LIST _circuit_san)
    list(LENGTH _circuit_san _n)
    if(_n GREATER 1)
      message(FATAL_ERROR "CIRCUIT_SANITIZE: 'thread' cannot be combined with another sanitizer")
    endif()
    set(CIRCUIT_SANITIZE_THREAD ON)
  endif()
  list(JOIN _circuit_san "," _circuit_san_csv)

  set(_circuit_san_compile
    -fsanitize=${_circuit_san_csv}
    -fno-omit-frame-pointer -fno-optimize-sibling-calls -g -O1)
  if("undefined" IN_LIST _circuit_san)
    list(APPEND _circuit_san_compile -fno-sanitize-recover=undefined)
  endif()
  set(_circuit_san_link -fsanitize=${_circuit_san_csv})

  # Fail here, with a clear message, rather than in the first try_compile.
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=${_circuit_san_csv}")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=${_circuit_san_csv}")
  string(MAKE_C_IDENTIFIER "CIRCUIT_HAVE_SANITIZE_${_circuit_san_csv}" _circuit_san_var)
  check_c_source_compiles("int main(void) { return 0; }" ${_circuit_san_var})
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ${_circuit_san_var})
    message(FATAL_ERROR "${CMAKE_C_COMPILER_ID} cannot build with -fsanitize=${_circuit_san_csv}")
  endif()

  target_compile_options(circuit_sanitize INTERFACE ${_circuit_san_compile})
  target_link_options(circuit_sanitize INTERFACE ${_circuit_san_link})
  list(JOIN _circuit_san_compile " " CIRCUIT_SANITIZE_CFLAGS)
  list(JOIN _circuit_san_link " " CIRCUIT_SANITIZE_LDFLAGS)
  message(STATUS "libcircuit: sanitizers ${_circuit_san_csv} (target circuit_sanitize)")
endif()
