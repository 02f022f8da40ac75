// Reading and checking .ptd (FlatTensor) files.
#pragma once

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flat_tensor_generated.h"
#include "flat_tensor_legacy_generated.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/file_io.h"
#include "serialize/io/report.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// A key of a .ptd entry: a view of the FlatBuffers string in the file's
// mapped flatbuffer, valid while its PtdFile lives (300,000 keys cost no
// allocation). Compares, prints and converts like a string.
struct PtdKey : std::string_view {
  PtdKey() = default;
  PtdKey(const char* p, size_t n) : std::string_view(p, n) {}
  std::string str() const { return std::string(data(), size()); }
  operator std::string() const { return str(); }  // NOLINT: used as a string by callers
};
inline std::string operator+(std::string a, const PtdKey& b) { return a.append(b.data(), b.size()); }
inline std::string operator+(const PtdKey& a, std::string_view b) { return a.str().append(b.data(), b.size()); }

// A read-only view of a little-endian FlatBuffers vector of T (sizes,
// dim_order) in the mapped flatbuffer, valid while its PtdFile lives; null
// (empty) when the field is absent. Elements are read with memcpy.
template <typename T>
class PtdDims {
 public:
  using value_type = T;
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = T;
    explicit const_iterator(const uint8_t* p = nullptr) : p_(p) {}
    T operator*() const {
      T v;
      std::memcpy(&v, p_, sizeof(T));
      return v;
    }
    const_iterator& operator++() {
      p_ += sizeof(T);
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      p_ += sizeof(T);
      return old;
    }
    bool operator==(const const_iterator& o) const { return p_ == o.p_; }
    bool operator!=(const const_iterator& o) const { return p_ != o.p_; }

   private:
    const uint8_t* p_;
  };
  using iterator = const_iterator;

  PtdDims() = default;
  explicit PtdDims(const flatbuffers::Vector<T>* v) : v_(reinterpret_cast<const uint8_t*>(v)) {}
  size_t size() const {
    if (!v_) return 0;
    uint32_t n;
    std::memcpy(&n, v_, sizeof n);
    return n;
  }
  bool empty() const { return size() == 0; }
  T operator[](size_t i) const { return *const_iterator(v_ + sizeof(uint32_t) + i * sizeof(T)); }
  const_iterator begin() const { return const_iterator(v_ ? v_ + sizeof(uint32_t) : nullptr); }
  const_iterator end() const { return const_iterator(v_ ? v_ + sizeof(uint32_t) + size() * sizeof(T) : nullptr); }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }
  friend bool operator==(const PtdDims& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::equal(b.begin(), b.end(), a.begin());
  }
  friend bool operator==(const std::vector<T>& a, const PtdDims& b) { return b == a; }
  friend bool operator!=(const PtdDims& a, const std::vector<T>& b) { return !(a == b); }
  friend bool operator!=(const std::vector<T>& a, const PtdDims& b) { return !(b == a); }

 private:
  const uint8_t* v_ = nullptr;  // the vector's u32 length, then its elements
};

// One named blob of a .ptd: a NamedData entry, or (in the legacy layout) a
// TensorMetadata entry pointing into a shared tensor segment. 72 bytes and
// no allocation of its own: key and layout are views of the flatbuffer.
struct PtdEntry {
  PtdKey key;
  PtdDims<int32_t> sizes;
  PtdDims<uint8_t> dim_order;
  uint64_t offset = 0;  // within the segment
  uint64_t size = 0;    // bytes
  uint64_t extent = 0;  // bytes up to the next entry or the segment end (legacy tensors)
  uint32_t segment_index = 0;
  uint32_t table_offset = 0;  // file offset of the entry, for messages (the flatbuffer is < 2 GiB)
  int8_t scalar_type = 0;
  bool has_layout = false;
  bool legacy_tensor = false;  // came from the legacy `tensors` list
  bool valid = false;          // lies inside the file
};

// Open, FromBytes, FromLeadingBytes, report(), name(), file(), segments() and
// SegmentData() are CheckedFile's (serialize/read/checked_file.h).
class PtdFile : public CheckedFile<PtdFile> {
 public:
  const flat_tensor_flatbuffer::FlatTensor* flat_tensor() const { return ft_; }
  // Files written before June 2025 use the legacy FlatTensor layout.
  bool legacy() const { return legacy_ != nullptr; }
  uint32_t legacy_tensor_alignment() const { return legacy_ ? legacy_->tensor_alignment() : 0; }
  bool legacy_has_named_data() const { return legacy_ && legacy_->named_data() != nullptr; }
  const std::vector<PtdEntry>& entries() const { return entries_; }
  Bytes EntryData(const PtdEntry& e) const;
  const FlatTensorHeader& header() const { return header_; }
  // Data for a key, or nullopt.
  std::optional<Bytes> Find(std::string_view key) const;
  // True if a valid entry has this key (its data need not be in memory).
  bool Has(std::string_view key) const;

 private:
  friend class CheckedFile<PtdFile>;
  PtdFile() = default;
  void Parse(const ReadOptions& opts);
  bool ParseHeader();
  bool VerifyFlatbuffer(uint64_t fb_end, const ReadOptions& opts);
  void CheckRootFields(const ReadOptions& opts);
  template <typename Segments>
  void CheckSegments(const Segments* segs, const ReadOptions& opts);
  void CollectEntries();
  void CheckEntries();
  std::vector<bool> LaterDuplicates() const;
  void SetLegacyExtents();

  FlatTensorHeader header_;
  const flat_tensor_flatbuffer::FlatTensor* ft_ = nullptr;
  const flat_tensor_legacy_flatbuffer::FlatTensor* legacy_ = nullptr;
  std::vector<PtdEntry> entries_;
};

}  // namespace ptepack
