// ptepack's version. Written by hand; CMake checks it equals project(VERSION).
#pragma once

#include "ptepack/export.h"

#define PTEPACK_VERSION_MAJOR 0
#define PTEPACK_VERSION_MINOR 1
#define PTEPACK_VERSION_PATCH 0
#define PTEPACK_VERSION_STRING "0.1.0"

namespace ptepack {

// The version of the library linked (may differ from the header's when a
// shared library was upgraded).
PTEPACK_API const char* Version();

}  // namespace ptepack
