// Placement of data segments after a flatbuffer, the way ExecuTorch's
// serializers do it: each segment starts at the first offset after the
// previous one that is a multiple of lcm(segment_alignment, its own
// alignment); segment data is never copied, only referenced. Writing a
// plan is serialize/write/segment_writer.h.
#pragma once

#include <cstdint>
#include <vector>

#include "ptepack/bytes.h"

namespace ptepack {

struct Piece {
  uint64_t pad_before = 0;  // zero bytes written before `data`
  Bytes data;
};

struct PlannedSegment {
  std::vector<Piece> pieces;
  uint64_t size = 0;       // sum of pads and data
  uint64_t alignment = 1;  // own alignment, combined with the segment alignment
  uint64_t offset = 0;     // set by SegmentPlan::Place, relative to the base
};

// Concatenates items, padding each but the last to `item_alignment`
// (ExecuTorch's constant segment). Fills `offsets` with each item's start.
PlannedSegment ConcatSegment(const std::vector<Bytes>& items, uint64_t item_alignment, std::vector<uint64_t>* offsets);

class SegmentPlan {
 public:
  size_t Add(PlannedSegment s);
  void Place(uint64_t segment_alignment);
  // End of the last segment relative to the base (segment_data_size).
  uint64_t data_size() const;
  const std::vector<PlannedSegment>& segments() const { return segs_; }
  bool empty() const { return segs_.empty(); }

 private:
  std::vector<PlannedSegment> segs_;
};

}  // namespace ptepack
