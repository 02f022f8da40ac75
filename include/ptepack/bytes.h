// ptepack::Bytes: a read-only view of bytes that may keep its memory alive
// (a mapped file, a vector). Constants, delegate payloads and named blobs are
// passed around as Bytes; nothing copies tensor data unless asked to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ptepack/export.h"

namespace ptepack {

namespace detail {
struct BytesSource;  // the library's access to where the bytes come from
}  // namespace detail

// A read-only byte range. `owner` keeps the memory alive (a mapping, a
// vector, ...); it may be null when the caller guarantees the lifetime.
struct PTEPACK_API Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;

  static Bytes Copy(const void* p, size_t n);
  static Bytes Own(std::vector<uint8_t> v);
  static Bytes View(const void* p, size_t n, std::shared_ptr<const void> owner = nullptr);
  // n zero bytes that are never materialised: a private anonymous mapping
  // (MAP_NORESERVE) whose pages read as the shared zero page. Throws
  // Error("zeros-too-large") above kMaxZeros. Writers leave holes instead of
  // copying them.
  static Bytes Zeros(uint64_t n);
  static constexpr uint64_t kMaxZeros = uint64_t{1} << 40;  // 1 TiB
  Bytes Sub(size_t off, size_t n) const;                    // bounds-checked
  bool empty() const { return size == 0; }
  bool Equals(const Bytes& o) const;

 private:
  friend struct detail::BytesSource;
  // Where the bytes come from, for the library alone (serialize/io/bytes_source.h):
  // the mapped file `data` points into (writers copy from the file in the
  // kernel and drop the pages they touched), or untouched zero pages.
  const void* mapping_ = nullptr;
  bool zeros_ = false;
};

}  // namespace ptepack
