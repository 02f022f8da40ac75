// The bytes of planned segments: the segments layout/file_plan.h decided
// (each at its offset relative to the segment base, its pieces at their
// offsets inside it) and the data the pieces are, one list per SegmentKind
// (views of the input or of the caller's buffers, never copied). Writing one
// is serialize/write/segment_writer.h.
//
// A piece is an index into its segment kind's list, not a copy of its view:
// a .ptd of 300,000 entries has 300,000 one-piece segments, 64 bytes each
// here (a segment holding its own pieces' views, next to the plan's, took
// 104 MB there).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "layout/file_plan.h"
#include "ptepack/bytes.h"

namespace ptepack {

// The pieces of one SegmentKind: a list of views, or the view member of each
// element of a vector of records (a .ptd's entries: their data, without a
// copy of each view beside them). Holds the vector it reads.
class PieceList {
 public:
  PieceList() = default;
  explicit PieceList(std::vector<Bytes> v) {
    auto held = std::make_shared<const std::vector<Bytes>>(std::move(v));
    count_ = held->size();
    first_ = reinterpret_cast<const unsigned char*>(held->data());
    held_ = std::move(held);
  }
  // `member` of each element of `v` (taken: the list keeps it).
  template <typename T>
  PieceList(std::vector<T> v, Bytes T::*member) {
    auto held = std::make_shared<const std::vector<T>>(std::move(v));
    count_ = held->size();
    stride_ = sizeof(T);
    first_ = count_ == 0 ? nullptr : reinterpret_cast<const unsigned char*>(&((*held)[0].*member));
    held_ = std::move(held);
  }
  size_t size() const { return count_; }
  const Bytes& operator[](size_t i) const { return *reinterpret_cast<const Bytes*>(first_ + i * stride_); }

 private:
  std::shared_ptr<const void> held_;
  const unsigned char* first_ = nullptr;
  size_t stride_ = sizeof(Bytes);
  size_t count_ = 0;
};

class SegmentPlan {
 public:
  // The data of each SegmentKind's pieces (SegmentSlot::items index these).
  using Lists = std::array<std::vector<Bytes>, kSegmentKinds>;
  using PieceLists = std::array<PieceList, kSegmentKinds>;

  SegmentPlan() = default;
  // Throws Error("internal-layout") when a piece is not in its list, runs
  // past its segment's end, or overlaps the piece before it, or when a
  // segment starts before the previous one ends.
  SegmentPlan(std::vector<SegmentSlot> segments, PieceLists data);
  SegmentPlan(std::vector<SegmentSlot> segments, Lists data);

  const std::vector<SegmentSlot>& segments() const { return segments_; }
  bool empty() const { return segments_.empty(); }
  // End of the last segment relative to the base (segment_data_size).
  uint64_t data_size() const;

  // Calls fn(pad_before, data) for each piece of `s` in order: the zero bytes
  // before it (from the segment's start or the previous piece's end), then
  // its bytes. Stops when fn returns false; returns whether it did not.
  template <typename Fn>
  bool ForEachPiece(const SegmentSlot& s, Fn&& fn) const {
    const PieceList& list = data_[static_cast<size_t>(s.kind)];
    uint64_t at = 0;
    for (size_t j = 0; j < s.items.size(); ++j) {
      const Bytes& b = list[s.items[j]];
      if (!fn(s.item_offsets[j] - at, b)) return false;
      at = s.item_offsets[j] + b.size;
    }
    return true;
  }

 private:
  std::vector<SegmentSlot> segments_;
  PieceLists data_;
};

}  // namespace ptepack
