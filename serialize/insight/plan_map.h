// A picture of the memory plan (`ptepack map --memory`): per method and
// planned buffer, instruction index across and byte offset down, one box per
// planned tensor's storage (a tensor with its static views) over each run of
// instructions where its bytes hold needed data (serialize/read/plan_lifetimes.h),
// with a hover title (values, dtype, shape, bytes, interval, the operators that
// write and read it); the lower bound and the buffer's size as lines, the peak
// instruction as a column; storages that share bytes while both are live (what
// `verify` reports as plan-overlap) in red.
#pragma once

#include <string>

namespace ptepack {

class PteFile;

// `pte` must have a verified program (pte.program() != nullptr).
std::string MemoryMapSvg(const PteFile& pte);
// An HTML page holding the same SVG inline.
std::string MemoryMapHtml(const PteFile& pte);

}  // namespace ptepack
