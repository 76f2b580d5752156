# Sanitizer builds, chosen with one cache variable:
#
#   CIRCUIT_SANITIZE=""                   no sanitizer (default)
#   CIRCUIT_SANITIZE="address;undefined"  ASan + UBSan (the `debug` preset)
#   CIRCUIT_SANITIZE="thread"             TSan (the `tsan` preset)
#
# The flags are applied to every target of the project (library, tests,
# benchmarks), because a sanitizer must see the whole program. UBSan findings
# abort (-fno-sanitize-recover) so that a test which triggers one fails.
#
# Other CMake files may read:
#   CIRCUIT_SANITIZE          the list above (empty when none)
#   CIRCUIT_SANITIZE_THREAD   ON in a TSan build: Criterion cannot start under
#                             TSan, so Criterion tests must not run there
#   CIRCUIT_SANITIZE_CFLAGS   compile flags, as one string (for nested builds)
#   CIRCUIT_SANITIZE_LDFLAGS  link flags, as one string (for nested builds)

set(CIRCUIT_SANITIZE "" CACHE STRING
  "Sanitizers for every target: empty, 'address;undefined' or 'thread'")
set_property(CACHE CIRCUIT_SANITIZE PROPERTY STRINGS "" "address;undefined" "thread")

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

  add_compile_options(${_circuit_san_compile})
  add_link_options(${_circuit_san_link})
  list(JOIN _circuit_san_compile " " CIRCUIT_SANITIZE_CFLAGS)
  list(JOIN _circuit_san_link " " CIRCUIT_SANITIZE_LDFLAGS)
  message(STATUS "libcircuit: sanitizers ${_circuit_san_csv}")
endif()
