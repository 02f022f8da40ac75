// PTEPACK_API marks what the shared library exports: the library is built with
// -fvisibility=hidden, so only the public API declared in include/ptepack/ is
// visible to consumers (scripts/check-install.sh checks `nm -D`).
#pragma once

#if defined(_WIN32)
#define PTEPACK_API
#else
#define PTEPACK_API __attribute__((visibility("default")))
#endif
