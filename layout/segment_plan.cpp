#include "layout/segment_plan.h"

#include <string>
#include <utility>

#include "ptepack/error.h"

namespace ptepack {

namespace {
SegmentPlan::PieceLists Own(SegmentPlan::Lists data) {
  SegmentPlan::PieceLists out;
  for (size_t k = 0; k < data.size(); ++k) out[k] = PieceList(std::move(data[k]));
  return out;
}
}  // namespace

SegmentPlan::SegmentPlan(std::vector<SegmentSlot> segments, Lists data)
    : SegmentPlan(std::move(segments), Own(std::move(data))) {}

SegmentPlan::SegmentPlan(std::vector<SegmentSlot> segments, PieceLists data)
    : segments_(std::move(segments)), data_(std::move(data)) {
  uint64_t prev_end = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const SegmentSlot& s = segments_[i];
    const PieceList& list = data_[static_cast<size_t>(s.kind)];
    auto bad = [i](const std::string& what) {
      throw Error("internal-layout", "segment " + std::to_string(i) + ": " + what);
    };
    if (s.offset < prev_end) bad("starts before the previous segment ends");
    if (s.items.size() != s.item_offsets.size()) bad("pieces and offsets differ in number");
    uint64_t at = 0;
    for (size_t j = 0; j < s.items.size(); ++j) {
      if (s.items[j] >= list.size()) bad("piece " + std::to_string(j) + " is not in its list");
      const uint64_t off = s.item_offsets[j], n = list[s.items[j]].size;
      if (off < at || off > s.size || n > s.size - off) bad("piece " + std::to_string(j) + " is out of place");
      at = off + n;
    }
    prev_end = s.offset + s.size;
  }
}

uint64_t SegmentPlan::data_size() const {
  return segments_.empty() ? 0 : segments_.back().offset + segments_.back().size;
}

}  // namespace ptepack
