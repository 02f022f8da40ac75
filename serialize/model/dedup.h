// Content deduplication: XXH3-64 finds candidates, a byte compare confirms.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "serialize/io/file_io.h"

namespace ptepack {

class BytesHasher;

class DedupIndex {
 public:
  // If bytes equal to `b` were added before, returns that entry's id;
  // otherwise records `b` under `id` and returns nullopt.
  std::optional<size_t> FindOrAdd(const Bytes& b, size_t id);
  uint64_t bytes_saved() const { return bytes_saved_; }
  size_t hits() const { return hits_; }

 private:
  struct Entry {
    Bytes data;
    size_t id;
  };
  std::unordered_multimap<uint64_t, Entry> map_;
  std::shared_ptr<BytesHasher> hasher_;  // one open source file, one buffer
  uint64_t bytes_saved_ = 0;
  size_t hits_ = 0;
};

uint64_t Xxh3(const Bytes& b);

}  // namespace ptepack
