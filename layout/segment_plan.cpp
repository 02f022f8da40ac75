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

void StreamBytes(AtomicFile& out, const Bytes& b, const ProgressFn& progress, uint64_t* done, uint64_t total) {
  // Chunked only for progress reports: AtomicFile::Write copies mapped data
  // in the kernel (or drops the pages it read), so memory stays bounded.
  constexpr size_t kChunk = 64u << 20;
  for (size_t off = 0; off < b.size; off += kChunk) {
    size_t n = std::min(kChunk, b.size - off);
    out.Write(n == b.size ? b : b.Sub(off, n));
    *done += n;
    if (progress) progress(*done, total);
  }
}

void SegmentPlan::Write(AtomicFile& out, const ProgressFn& progress) const {
  const uint64_t base = out.offset();
  uint64_t total = data_size(), done = 0;
  for (const auto& s : segs_) {
    const uint64_t before = out.offset();
    out.PadTo(base + s.offset);
    done += out.offset() - before;
    for (const auto& p : s.pieces) {
      out.WriteZeros(p.pad_before);
      done += p.pad_before;
      StreamBytes(out, p.data, progress, &done, total);
    }
  }
  if (progress && done < total) progress(total, total);
}

}  // namespace ptepack
