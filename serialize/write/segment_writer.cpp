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
    plan.ForEachPiece(s, [&](uint64_t pad, const Bytes& data) {
      out.WriteZeros(pad);
      done += pad;
      StreamBytes(out, data, progress, &done, total);
      return true;
    });
  }
  if (progress && done < total) progress(total, total);
}

}  // namespace ptepack
