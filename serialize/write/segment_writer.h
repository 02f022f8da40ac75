// Streams a SegmentPlan into an output: zero padding and each piece's bytes,
// with no memory proportional to the data (mapped data is copied in the
// kernel, see AtomicFile::Write(const Bytes&)).
#pragma once

#include "layout/segment_plan.h"
#include "serialize/io/file_io.h"

namespace ptepack {

// `out` must be positioned at the segment base. Reports progress every 64 MiB.
void WriteSegments(AtomicFile& out, const SegmentPlan& plan, const ProgressFn& progress = nullptr);

}  // namespace ptepack
