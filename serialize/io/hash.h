// XXH3-64 of bytes, file ranges and file regions. Mapped data is read back
// with pread in blocks rather than through the mapping, so hashing a model's
// constants needs a few hundred KiB of memory and leaves no pages resident.
#pragma once

#include <cstdint>
#include <memory>
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
// "padding" region for the bytes outside all of them, in file order. Regions
// must lie in the file (they may overlap). Each of kHashTwoThreadsFrom bytes
// or more is hashed on two threads; the shorter ones, from a file, in
// batches of neighbours read together, both threads taking batches.
void HashRegions(const Bytes& file, std::vector<RegionSum>* regions);

// Ranges (and regions) of this many bytes or more are hashed on two threads
// when the machine has two cores: the block sums of XXH3 on both, its
// scrambles in order, so the digest is XXH3_64bits' of the same bytes.
constexpr uint64_t kHashTwoThreadsFrom = 4 << 20;

// XXH3-64 of [offset, offset + size) of an open file, read in blocks.
uint64_t HashFileRange(int fd, uint64_t offset, uint64_t size);
// XXH3-64 of a byte view: read from the file when it is a MappedFile view,
// else hashed in memory.
uint64_t HashBytes(const Bytes& b);

// HashBytes for callers that hash many pieces of the same mapped files
// (dedup of 300,000 constants): keeps the last source file open and one read
// buffer, instead of an open, fstat, close and a zeroed 256 KiB buffer per
// piece. Same values as HashBytes, always on the calling thread. Not
// thread-safe.
class BytesHasher {
 public:
  BytesHasher() = default;
  ~BytesHasher();
  BytesHasher(const BytesHasher&) = delete;
  BytesHasher& operator=(const BytesHasher&) = delete;
  uint64_t Hash(const Bytes& b);

 private:
  MappedReader reader_;
  std::vector<uint8_t> buf_;
};

std::string HexDigest(uint64_t h);  // 16 lower-case hex digits

}  // namespace ptepack
