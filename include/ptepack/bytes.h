// ptepack::Bytes: a read-only view of bytes that may keep its memory alive
// (a mapped file, a vector). Constants, delegate payloads and named blobs are
// passed around as Bytes; nothing copies tensor data unless asked to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ptepack {

class MappedFile;

// A read-only byte range. `owner` keeps the memory alive (a mapping, a
// vector, ...); it may be null when the caller guarantees the lifetime.
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
  bool file_backed = false;  // points into a MappedFile (pages can be dropped)
  // The mapping `data` points into, set only by MappedFile::View (and kept by
  // Sub); `owner` keeps it alive. Writers use it to copy in the kernel from
  // the file instead of through the mapping, and to drop pages they touched.
  const MappedFile* mapping = nullptr;
  // All zeros (see Bytes::Zeros): `data` points at untouched anonymous
  // memory that reads as zeros; writers leave holes instead of copying it.
  bool zeros = false;

  static Bytes Copy(const void* p, size_t n);
  static Bytes Own(std::vector<uint8_t> v);
  static Bytes View(const void* p, size_t n, std::shared_ptr<const void> owner = nullptr);
  // n zero bytes that are never materialised: a private anonymous mapping
  // (MAP_NORESERVE) whose pages read as the shared zero page. Throws
  // Error("zeros-too-large") above kMaxZeros.
  static Bytes Zeros(uint64_t n);
  static constexpr uint64_t kMaxZeros = uint64_t{1} << 40;  // 1 TiB
  Bytes Sub(size_t off, size_t n) const;                    // bounds-checked
  bool empty() const { return size == 0; }
  bool Equals(const Bytes& o) const;
};

}  // namespace ptepack
