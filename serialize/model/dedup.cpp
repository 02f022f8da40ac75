#include "serialize/model/dedup.h"

#include <algorithm>

#include "serialize/io/hash.h"

namespace ptepack {

// HashBytes uses the fast (dispatched) XXH3 and reads mapped data with pread,
// so hashing a model's constants does not leave them resident.
uint64_t Xxh3(const Bytes& b) { return HashBytes(b); }

DedupIndex::DedupIndex() = default;
DedupIndex::~DedupIndex() = default;
DedupIndex::DedupIndex(DedupIndex&&) noexcept = default;
DedupIndex& DedupIndex::operator=(DedupIndex&&) noexcept = default;

uint64_t DedupIndex::Prefix(const Bytes& b) {
  if (!hasher_) hasher_ = std::make_unique<BytesHasher>();
  const size_t n = static_cast<size_t>(std::min<uint64_t>(b.size, kDedupPrefix));
  bytes_hashed_ += n;
  return hasher_->Hash(n == b.size ? b : b.Sub(0, n));
}

// A piece no longer than the prefix: its prefix hash is its hash.
uint64_t DedupIndex::Whole(const Bytes& b, uint64_t prefix) {
  if (b.size <= kDedupPrefix) return prefix;
  bytes_hashed_ += b.size;
  return hasher_->Hash(b);
}

// Whole() of an entry in the index, computed once.
uint64_t DedupIndex::Whole(const Entry& e, uint64_t prefix) {
  if (e.data.size <= kDedupPrefix) return prefix;
  auto it = whole_.find(&e);
  if (it == whole_.end()) it = whole_.emplace(&e, Whole(e.data, prefix)).first;
  return it->second;
}

std::optional<size_t> DedupIndex::FindOrAdd(const Bytes& b, size_t id) {
  SameSize& group = by_size_[b.size];
  if (!group.unhashed && group.by_prefix.empty()) {
    group.unhashed = Entry{b, id};
    return std::nullopt;
  }
  if (group.unhashed) {
    const uint64_t prefix = Prefix(group.unhashed->data);
    group.by_prefix.emplace(prefix, std::move(*group.unhashed));
    group.unhashed.reset();
  }
  const uint64_t prefix = Prefix(b);
  auto range = group.by_prefix.equal_range(prefix);
  // Candidates share the size and the prefix: the whole piece is hashed.
  std::optional<uint64_t> whole;
  for (auto it = range.first; it != range.second; ++it) {
    if (!whole) whole = Whole(b, prefix);
    if (Whole(it->second, prefix) == *whole && it->second.data.Equals(b)) {
      bytes_saved_ += b.size;
      ++hits_;
      return it->second.id;
    }
  }
  auto added = group.by_prefix.emplace(prefix, Entry{b, id});
  if (whole && b.size > kDedupPrefix) whole_.emplace(&added->second, *whole);
  return std::nullopt;
}

}  // namespace ptepack
