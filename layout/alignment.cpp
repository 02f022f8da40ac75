#include "layout/alignment.h"

#include <numeric>

#include "ptepack/error.h"

namespace ptepack {

uint64_t PaddingRequired(uint64_t offset, uint64_t alignment) {
  if (alignment <= 1) return 0;
  uint64_t r = offset % alignment;
  return r == 0 ? 0 : alignment - r;
}

uint64_t AlignUp(uint64_t offset, uint64_t alignment) { return CheckedAdd(offset, PaddingRequired(offset, alignment)); }

uint64_t Lcm(uint64_t a, uint64_t b) { return std::lcm(a == 0 ? 1 : a, b == 0 ? 1 : b); }

uint64_t CheckedAdd(uint64_t a, uint64_t b) {
  if (a > UINT64_MAX - b) throw Error("size-overflow", "layout size exceeds 2^64 bytes");
  return a + b;
}

}  // namespace ptepack
