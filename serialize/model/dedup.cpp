#include "serialize/model/dedup.h"

#include "serialize/io/hash.h"

namespace ptepack {

// HashBytes uses the fast (dispatched) XXH3 and reads mapped data with pread,
// so hashing a model's constants does not leave them resident.
uint64_t Xxh3(const Bytes& b) { return HashBytes(b); }

std::optional<size_t> DedupIndex::FindOrAdd(const Bytes& b, size_t id) {
  if (!hasher_) hasher_ = std::make_shared<BytesHasher>();
  uint64_t h = hasher_->Hash(b);
  auto range = map_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.data.Equals(b)) {
      bytes_saved_ += b.size;
      ++hits_;
      return it->second.id;
    }
  }
  map_.emplace(h, Entry{b, id});
  return std::nullopt;
}

}  // namespace ptepack
