// Content deduplication: equal sizes, then an XXH3-64 of the first
// kDedupPrefix bytes, then (for longer pieces) XXH3-64 of all of them find
// candidates; a byte compare confirms.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "serialize/io/file_io.h"

namespace ptepack {

class BytesHasher;

// Pieces that differ in their first kDedupPrefix bytes are told apart by a
// hash of those bytes alone: a split of 256 distinct 4 MiB constants reads
// 1 MiB of them instead of hashing the whole 1 GiB (twice: placement's
// external index and the .ptd's segments).
constexpr uint64_t kDedupPrefix = 4096;

class DedupIndex {
 public:
  DedupIndex();
  // An index that keeps no copy of the pieces (a Bytes is 48 bytes, with its
  // owner): `bytes_of(id)` gives the bytes added under `id` again, from
  // where the caller keeps them. 40 bytes an entry instead of 88: placement's
  // index of 300,000 external constants, and the .ptd's, held 29 MB each.
  explicit DedupIndex(std::function<Bytes(size_t id)> bytes_of);
  ~DedupIndex();
  DedupIndex(DedupIndex&&) noexcept;
  DedupIndex& operator=(DedupIndex&&) noexcept;

  // If bytes equal to `b` were added before, returns that entry's id;
  // otherwise records `b` under `id` and returns nullopt. A piece whose size
  // no earlier piece has is not read at all.
  std::optional<size_t> FindOrAdd(const Bytes& b, size_t id);
  uint64_t bytes_saved() const { return bytes_saved_; }
  size_t hits() const { return hits_; }
  // Bytes read to hash (prefixes and whole pieces), for tests and profiles.
  uint64_t bytes_hashed() const { return bytes_hashed_; }

 private:
  // An entry is a reference: its id with bytes_of_, else its place in kept_.
  using Ref = size_t;
  struct Entry {
    Bytes data;
    size_t id;
  };
  // The entries of one size: the first one unhashed until a second arrives,
  // then each under the XXH3 of its first kDedupPrefix bytes.
  struct SameSize {
    std::optional<Ref> unhashed;
    std::unordered_multimap<uint64_t, Ref> by_prefix;
  };
  Ref Add(const Bytes& b, size_t id);
  Bytes DataOf(Ref r) const { return bytes_of_ ? bytes_of_(r) : kept_[r].data; }
  size_t IdOf(Ref r) const { return bytes_of_ ? r : kept_[r].id; }
  uint64_t Prefix(const Bytes& b);
  uint64_t Whole(const Bytes& b, uint64_t prefix);
  uint64_t WholeOf(Ref r, uint64_t prefix);

  std::function<Bytes(size_t)> bytes_of_;
  std::deque<Entry> kept_;  // without bytes_of_
  std::unordered_map<uint64_t, SameSize> by_size_;
  // XXH3 of all of a piece longer than the prefix, once it was needed (few
  // pieces: those whose prefix equals another's).
  std::unordered_map<Ref, uint64_t> whole_;
  std::unique_ptr<BytesHasher> hasher_;  // one open source file, one buffer
  uint64_t bytes_saved_ = 0;
  uint64_t bytes_hashed_ = 0;
  size_t hits_ = 0;
};

uint64_t Xxh3(const Bytes& b);

}  // namespace ptepack
