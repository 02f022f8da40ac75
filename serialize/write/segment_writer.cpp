#include "serialize/write/segment_writer.h"

#include <algorithm>

namespace ptepack {

namespace {

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

}  // namespace

void WriteSegments(AtomicFile& out, const SegmentPlan& plan, const ProgressFn& progress) {
  const uint64_t base = out.offset();
  uint64_t total = plan.data_size(), done = 0;
  for (const auto& s : plan.segments()) {
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
