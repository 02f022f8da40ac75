// The bytes of planned segments: each segment at the offset layout/file_plan.h
// decided (relative to the segment base), as zero padding and references to
// the data (never copied). Writing one is serialize/write/segment_writer.h.
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
  uint64_t offset = 0;     // relative to the base, as planned
};

class SegmentPlan {
 public:
  size_t Add(PlannedSegment s);
  // End of the last segment relative to the base (segment_data_size).
  uint64_t data_size() const;
  const std::vector<PlannedSegment>& segments() const { return segs_; }
  bool empty() const { return segs_.empty(); }

 private:
  std::vector<PlannedSegment> segs_;
};

}  // namespace ptepack
