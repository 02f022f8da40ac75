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
#include <vector>

#include "layout/file_plan.h"
#include "ptepack/bytes.h"

namespace ptepack {

class SegmentPlan {
 public:
  // The data of each SegmentKind's pieces (SegmentSlot::items index these).
  using Lists = std::array<std::vector<Bytes>, kSegmentKinds>;

  SegmentPlan() = default;
  // Throws Error("internal-layout") when a piece is not in its list, runs
  // past its segment's end, or overlaps the piece before it, or when a
  // segment starts before the previous one ends.
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
    const std::vector<Bytes>& list = data_[static_cast<size_t>(s.kind)];
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
  Lists data_;
};

}  // namespace ptepack
