#include "layout/segment_plan.h"

#include <algorithm>

#include "layout/alignment.h"

namespace ptepack {

PlannedSegment ConcatSegment(const std::vector<Bytes>& items, uint64_t item_alignment, std::vector<uint64_t>* offsets) {
  PlannedSegment s;
  uint64_t cur = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    offsets->push_back(cur);
    uint64_t pad = (i + 1 < items.size()) ? PaddingRequired(items[i].size, item_alignment) : 0;
    s.pieces.push_back(Piece{0, items[i]});
    if (pad > 0) s.pieces.push_back(Piece{pad, Bytes{}});
    cur = CheckedAdd(cur, CheckedAdd(items[i].size, pad));
  }
  s.size = cur;
  return s;
}

size_t SegmentPlan::Add(PlannedSegment s) {
  segs_.push_back(std::move(s));
  return segs_.size() - 1;
}

void SegmentPlan::Place(uint64_t segment_alignment) {
  uint64_t prev_end = 0;
  for (auto& s : segs_) {
    s.offset = AlignUp(prev_end, Lcm(segment_alignment, s.alignment));
    prev_end = CheckedAdd(s.offset, s.size);
  }
}

uint64_t SegmentPlan::data_size() const { return segs_.empty() ? 0 : segs_.back().offset + segs_.back().size; }

}  // namespace ptepack
