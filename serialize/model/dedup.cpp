#include "serialize/model/dedup.h"

#include <algorithm>

#include "serialize/io/hash.h"

namespace ptepack {

// HashBytes uses the fast (dispatched) XXH3 and reads mapped data with pread,
// so hashing a model's constants does not leave them resident.
uint64_t Xxh3(const Bytes& b) { return HashBytes(b); }

DedupIndex::DedupIndex() = default;
DedupIndex::DedupIndex(std::function<Bytes(size_t id)> bytes_of) : bytes_of_(std::move(bytes_of)) {}
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
uint64_t DedupIndex::WholeOf(Ref r, uint64_t prefix) {
  const Bytes data = DataOf(r);
  if (data.size <= kDedupPrefix) return prefix;
  auto it = whole_.find(r);
  if (it == whole_.end()) it = whole_.emplace(r, Whole(data, prefix)).first;
  return it->second;
}

DedupIndex::Ref DedupIndex::Add(const Bytes& b, size_t id) {
  if (bytes_of_) return id;
  kept_.push_back(Entry{b, id});
  return kept_.size() - 1;
}

std::optional<size_t> DedupIndex::FindOrAdd(const Bytes& b, size_t id) {
  SameSize& group = by_size_[b.size];
  if (!group.unhashed && group.by_prefix.empty()) {
    group.unhashed = Add(b, id);
    return std::nullopt;
  }
  if (group.unhashed) {
    const uint64_t prefix = Prefix(DataOf(*group.unhashed));
    group.by_prefix.emplace(prefix, *group.unhashed);
    group.unhashed.reset();
  }
  const uint64_t prefix = Prefix(b);
  auto range = group.by_prefix.equal_range(prefix);
  // Candidates share the size and the prefix: the whole piece is hashed.
  std::optional<uint64_t> whole;
  for (auto it = range.first; it != range.second; ++it) {
    if (!whole) whole = Whole(b, prefix);
    if (WholeOf(it->second, prefix) == *whole && DataOf(it->second).Equals(b)) {
      bytes_saved_ += b.size;
      ++hits_;
      return IdOf(it->second);
    }
  }
  const Ref added = Add(b, id);
  group.by_prefix.emplace(prefix, added);
  if (whole && b.size > kDedupPrefix) whole_.emplace(added, *whole);
  return std::nullopt;
}

}  // namespace ptepack
