// XXH3-64 of bytes, file ranges and file regions. Mapped data is read back
// with pread in blocks rather than through the mapping, so hashing a model's
// constants needs a few hundred KiB of memory and leaves no pages resident.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serialize/io/file_io.h"

namespace ptepack {

// Streaming XXH3-64. Uses libxxhash's runtime-dispatched (AVX2/AVX-512)
// entry points when the library has them: about 4x the baseline SSE2 build
// that the plain XXH3 functions of distribution packages run.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(const void* p, size_t n);
  uint64_t Digest() const;

 private:
  void* state_;
};

struct RegionSum {
  std::string name;
  uint64_t offset = 0;  // file offset (for "padding": 0)
  uint64_t size = 0;
  uint64_t xxh3 = 0;
};

// Hashes `regions` (name, offset, size filled in) of `file` and appends the
// "padding" region for the bytes outside all of them. Regions must lie in
// the file; they are hashed in file order.
void HashRegions(const Bytes& file, std::vector<RegionSum>* regions);

// XXH3-64 of [offset, offset + size) of an open file, read in blocks.
uint64_t HashFileRange(int fd, uint64_t offset, uint64_t size);
// XXH3-64 of a byte view: read from the file when it is a MappedFile view,
// else hashed in memory.
uint64_t HashBytes(const Bytes& b);

std::string HexDigest(uint64_t h);  // 16 lower-case hex digits

}  // namespace ptepack
