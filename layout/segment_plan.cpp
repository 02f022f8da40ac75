#include "layout/segment_plan.h"

namespace ptepack {

size_t SegmentPlan::Add(PlannedSegment s) {
  segs_.push_back(std::move(s));
  return segs_.size() - 1;
}

uint64_t SegmentPlan::data_size() const { return segs_.empty() ? 0 : segs_.back().offset + segs_.back().size; }

}  // namespace ptepack
