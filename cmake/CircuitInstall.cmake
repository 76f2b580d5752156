# Installation and the two ways to consume an installed libcircuit:
#
#   CMake:       find_package(circuit 0.1 REQUIRED)
#                target_link_libraries(app PRIVATE circuit::circuit)   # shared
#                          (or circuit::circuit_static)
#   pkg-config:  cc app.c $(pkg-config --cflags --libs circuit)
#
# Installed files (GNUInstallDirs layout):
#   include/circuit.h, include/circuit_presets.h (when present)
#   lib/libcircuit.so.0.1.0, libcircuit.so.0, libcircuit.so, libcircuit.a
#   lib/cmake/circuit/{circuitConfig,circuitConfigVersion,circuitTargets*}.cmake
#   lib/pkgconfig/circuit.pc
#
# Included by the top-level CMakeLists.txt after src/ has defined the targets.
# The pkg-config modules the core links (PkgConfig::<VAR>, registered by
# circuit_require_pkg) are found again by the package config for the static
# library's link interface and listed in circuit.pc's Requires.private.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CIRCUIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/circuit"
  CACHE STRING "Where circuitConfig.cmake is installed (relative to the prefix)")
set(CIRCUIT_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
  CACHE STRING "Where circuit.pc is installed (relative to the prefix)")
mark_as_advanced(CIRCUIT_INSTALL_CMAKEDIR CIRCUIT_INSTALL_PKGCONFIGDIR)

# ---- what the core links ---------------------------------------------------
# Walk the static library's direct link dependencies: PkgConfig::<VAR> become
# pkg-config modules, Threads::Threads becomes -pthread, a plain name (e.g.
# atomic) becomes -l<name>.
get_target_property(_circuit_links circuit_static LINK_LIBRARIES)
set(CIRCUIT_PKG_MODULES "")       # e.g. ck;liburcu-cds
set(CIRCUIT_PKG_VARS "")          # e.g. CK;URCU (the PkgConfig:: target names)
set(CIRCUIT_PKG_DEBIAN "")        # e.g. libck-dev;liburcu-dev
set(_circuit_libs_private "")
set(_circuit_need_threads OFF)
foreach(lib IN LISTS _circuit_links)
  if(lib MATCHES "^PkgConfig::(.+)$")
    set(var "${CMAKE_MATCH_1}")
    get_property(module GLOBAL PROPERTY CIRCUIT_PKG_MODULE_${var})
    if(NOT module)
      message(FATAL_ERROR "CircuitInstall: ${lib} was not found with circuit_require_pkg(); "
                          "its pkg-config module name is unknown to the package files")
    endif()
    get_property(debian GLOBAL PROPERTY CIRCUIT_PKG_DEBIAN_${var})
    list(APPEND CIRCUIT_PKG_MODULES "${module}")
    list(APPEND CIRCUIT_PKG_VARS "${var}")
    list(APPEND CIRCUIT_PKG_DEBIAN "${debian}")
  elseif(lib STREQUAL "Threads::Threads")
    set(_circuit_need_threads ON)
    list(APPEND _circuit_libs_private "-pthread")
  elseif(lib MATCHES "^[A-Za-z0-9_.+-]+$" AND NOT TARGET "${lib}")
    list(APPEND _circuit_libs_private "-l${lib}")
  elseif(lib MATCHES "^-")
    list(APPEND _circuit_libs_private "${lib}")
  else()
    message(FATAL_ERROR "CircuitInstall: don't know how to describe '${lib}' "
                        "(a link dependency of circuit_static) in circuit.pc")
  endif()
endforeach()
list(REMOVE_DUPLICATES _circuit_libs_private)
list(JOIN CIRCUIT_PKG_MODULES " " CIRCUIT_PC_REQUIRES_PRIVATE)
list(JOIN _circuit_libs_private " " CIRCUIT_PC_LIBS_PRIVATE)

# Lines of circuitConfig.cmake that re-find the dependencies.
set(CIRCUIT_CONFIG_FIND_DEPS "")
if(_circuit_need_threads)
  string(APPEND CIRCUIT_CONFIG_FIND_DEPS "find_dependency(Threads)\n")
endif()
if(CIRCUIT_PKG_MODULES)
  string(APPEND CIRCUIT_CONFIG_FIND_DEPS "find_dependency(PkgConfig)\n")
  foreach(var module debian IN ZIP_LISTS CIRCUIT_PKG_VARS CIRCUIT_PKG_MODULES CIRCUIT_PKG_DEBIAN)
    string(APPEND CIRCUIT_CONFIG_FIND_DEPS
      "_circuit_find_pkg(${var} ${module} ${debian})\n")
  endforeach()
endif()

# ---- headers and libraries -------------------------------------------------
set(_circuit_headers "${PROJECT_SOURCE_DIR}/include/circuit.h")
if(EXISTS "${PROJECT_SOURCE_DIR}/include/circuit_presets.h")
  list(APPEND _circuit_headers "${PROJECT_SOURCE_DIR}/include/circuit_presets.h")
endif()
install(FILES ${_circuit_headers}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT circuit_development)

install(TARGETS circuit circuit_static
  EXPORT circuitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT circuit_runtime
    NAMELINK_COMPONENT circuit_development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT circuit_development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT circuit_runtime)
# (The include directory is in the targets' own INSTALL_INTERFACE, src/.)

# ---- CMake package -----------------------------------------------------------
install(EXPORT circuitTargets
  NAMESPACE circuit::
  FILE circuitTargets.cmake
  DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  COMPONENT circuit_development)

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/circuitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/circuitConfig.cmake"
  INSTALL_DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  NO_SET_AND_CHECK_MACRO)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/circuitConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/circuitConfig.cmake"
  "${PROJECT_BINARY_DIR}/circuitConfigVersion.cmake"
  DESTINATION ${CIRCUIT_INSTALL_CMAKEDIR}
  COMPONENT circuit_development)

# ---- pkg-config ------------------------------------------------------------
# circuit.pc names the prefix the files are really installed under, which
# `cmake --install --prefix DIR` may change after configuring; so the file is
# written at install time, from a template configured now.
set(CIRCUIT_PC_PREFIX "@CIRCUIT_PC_PREFIX@")   # left for install time
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CIRCUIT_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(CIRCUIT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CIRCUIT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CIRCUIT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/circuit.pc.in"
               "${PROJECT_BINARY_DIR}/circuit.pc.in.configured" @ONLY)
install(CODE "
  set(CIRCUIT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/circuit.pc.in.configured\"
                 \"${PROJECT_BINARY_DIR}/circuit.pc\" @ONLY)
" COMPONENT circuit_development)
install(FILES "${PROJECT_BINARY_DIR}/circuit.pc"
  DESTINATION ${CIRCUIT_INSTALL_PKGCONFIGDIR}
  COMPONENT circuit_development)
