# Installation, and the two ways to consume an installed libcircuit:
#
#   CMake:       find_package(circuit 0.3 REQUIRED)
#                target_link_libraries(app PRIVATE circuit::circuit)          # libcircuit.so
#                find_package(circuit 0.3 REQUIRED COMPONENTS static)
#                target_link_libraries(app PRIVATE circuit::circuit_static)   # libcircuit.a
#   pkg-config:  cc app.c $(pkg-config --cflags --libs circuit)
#
# Installed files (GNUInstallDirs layout):
#   include/*.h            every header in include/ (circuit.h and the headers
#                          of the presets and adapters beside it)
#   lib/libcircuit.so.0.x.y, libcircuit.so.2, libcircuit.so, libcircuit.a
#   lib/cmake/circuit/     circuitConfig.cmake, circuitConfigVersion.cmake,
#                          circuitTargets*.cmake (the shared library),
#                          circuitStaticTargets*.cmake (the static one)
#   lib/pkgconfig/circuit.pc
#
# A consumer of the SHARED library needs nothing but these files: libcircuit.so
# records its own dependencies (NEEDED libck.so.0, liburcu-cds.so.8), circuit.h
# includes no header of theirs, so neither pkg-config nor the package config
# asks for ck's or liburcu's -dev package. Only a STATIC link does, and only
# then are they looked for (circuit.pc: Libs.private; circuitConfig.cmake: the
# `static` component).
#
# Both package files are written when the project is configured and are
# relocatable: every path in them is relative to the file's own directory
# (${pcfiledir}, ${PACKAGE_PREFIX_DIR}), so `cmake --install --prefix DIR`
# and moving the installed tree elsewhere need no rewrite.
#
# Included by the top-level CMakeLists.txt after src/ has defined the targets
# and cmake/CircuitDependencies.cmake has found the dependencies.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CIRCUIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/circuit"
  CACHE STRING "Where circuitConfig.cmake is installed (relative to the prefix)")
set(CIRCUIT_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
  CACHE STRING "Where circuit.pc is installed (relative to the prefix)")
mark_as_advanced(CIRCUIT_INSTALL_CMAKEDIR CIRCUIT_INSTALL_PKGCONFIGDIR)

# ---- headers and libraries -------------------------------------------------
# include/ holds exactly the installed headers.
file(GLOB CIRCUIT_PUBLIC_HEADERS CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/*.h")
install(FILES ${CIRCUIT_PUBLIC_HEADERS}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT circuit_development)

# Two export sets, so that the package config can offer the shared library
# without the static library's dependencies.
install(TARGETS circuit
  EXPORT circuitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT circuit_runtime
    NAMELINK_COMPONENT circuit_development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT circuit_runtime)
install(TARGETS circuit_static
  EXPORT circuitStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT circuit_development)
# (The include directory is in the targets' own INSTALL_INTERFACE, src/.)

# ---- CMake package -----------------------------------------------------------
install(EXPORT circuitTargets
  NAMESPACE circuit::
  FILE circuitTargets.cmake
  DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  COMPONENT circuit_development)
install(EXPORT circuitStaticTargets
  NAMESPACE circuit::
  FILE circuitStaticTargets.cmake
  DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  COMPONENT circuit_development)

# circuitConfig.cmake finds the static library's pkg-config dependencies
# again, by the same target names (PkgConfig::<var>) that its exported link
# interface uses.
set(CIRCUIT_CONFIG_DEPS "")
foreach(var module debian IN ZIP_LISTS CIRCUIT_DEPS_VARS CIRCUIT_DEPS_MODULES CIRCUIT_DEPS_DEBIAN)
  string(APPEND CIRCUIT_CONFIG_DEPS " \"${var}|${module}|${debian}\"")
endforeach()
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/circuitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/circuitConfig.cmake"
  INSTALL_DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  NO_SET_AND_CHECK_MACRO)
# While the major version is 0, a new minor version may break the API or
# change what it means (0.2 changed what `trip` is asked after), so
# find_package(circuit 0.2) must refuse 0.3.0: SameMinorVersion. From 1.0 on
# this becomes SameMajorVersion.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_circuit_compat SameMinorVersion)
else()
  set(_circuit_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/circuitConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ${_circuit_compat})
install(FILES
  "${PROJECT_BINARY_DIR}/circuitConfig.cmake"
  "${PROJECT_BINARY_DIR}/circuitConfigVersion.cmake"
  DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  COMPONENT circuit_development)

# ---- pkg-config ------------------------------------------------------------
# prefix is found from the .pc file's own place: ${pcfiledir}/../.. for the
# usual lib/pkgconfig. Install directories given as absolute paths cannot be
# relative to anything and are written as they are.
if(IS_ABSOLUTE "${CIRCUIT_INSTALL_PKGCONFIGDIR}")
  set(CIRCUIT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _circuit_up "/p/${CIRCUIT_INSTALL_PKGCONFIGDIR}" "/p")
  string(REGEX REPLACE "/$" "" _circuit_up "${_circuit_up}")   # ../.. not ../../
  set(CIRCUIT_PC_PREFIX "\${pcfiledir}/${_circuit_up}")
  unset(_circuit_up)
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(CIRCUIT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(CIRCUIT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
# -L of a directory the linker searches anyway (e.g. /usr/lib/<multiarch>,
# which CMake's pkg-config calls keep) is left out.
set(_circuit_libs "")
foreach(flag IN LISTS CIRCUIT_DEPS_LIBS_PRIVATE)
  if(flag MATCHES "^-L(.+)$" AND CMAKE_MATCH_1 IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    continue()
  endif()
  list(APPEND _circuit_libs "${flag}")
endforeach()
list(JOIN _circuit_libs " " CIRCUIT_PC_LIBS_PRIVATE)
unset(_circuit_libs)
configure_file("${PROJECT_SOURCE_DIR}/cmake/circuit.pc.in" "${PROJECT_BINARY_DIR}/circuit.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/circuit.pc"
  DESTINATION ${CIRCUIT_INSTALL_PKGCONFIGDIR}
  COMPONENT circuit_development)
