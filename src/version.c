/*
 * circuit_version: the version this library is built as, from the macros
 * of include/circuit.h (the one place the version is written; the top-level
 * CMakeLists.txt reads it from there too).
 */
#include "circuit.h"

#define CIRCUIT__STR2(x) #x
#define CIRCUIT__STR(x) CIRCUIT__STR2(x)

const char *circuit_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = CIRCUIT_VERSION_MAJOR;
    if (minor)
        *minor = CIRCUIT_VERSION_MINOR;
    if (patch)
        *patch = CIRCUIT_VERSION_PATCH;
    return CIRCUIT__STR(CIRCUIT_VERSION_MAJOR) "." CIRCUIT__STR(CIRCUIT_VERSION_MINOR) "." CIRCUIT__STR(
        CIRCUIT_VERSION_PATCH);
}
