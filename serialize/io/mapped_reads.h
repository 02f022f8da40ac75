// Reading a mapped file's pages without dying when the file shrinks under
// us. A page of a MappedFile past the file's current end (another process
// truncated it while we read) raises SIGBUS; ReadMappedPages turns that into
// an Error("read-failed") the caller can report like a failed pread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ptepack/bytes.h"

namespace ptepack {

// Calls read(arg), which must only read `b`'s memory (no C++ objects with
// destructors live inside it: a fault leaves it by siglongjmp). Throws
// Error("read-failed", "<file>: input ended early (was it truncated?)") if a
// page of the mapping was gone. Bytes that are not a mapped file's view are
// read unguarded. On builds without signals (WebAssembly) it just calls read.
void ReadMappedPages(const Bytes& b, void (*read)(void* arg), void* arg);

// The same with a callable (a lambda capturing by reference; it must hold
// nothing that needs destroying).
template <typename F>
void ReadMappedPages(const Bytes& b, F&& read) {
  using Fn = std::remove_reference_t<F>;
  ReadMappedPages(
      b, [](void* f) { (*static_cast<Fn*>(f))(); }, const_cast<void*>(static_cast<const void*>(&read)));
}

}  // namespace ptepack
