// Alignment arithmetic shared by every layout decision.
#pragma once

#include <cstdint>

namespace ptepack {

// Bytes of padding needed after `offset` to reach a multiple of `alignment`
// (a power of two).
uint64_t PaddingRequired(uint64_t offset, uint64_t alignment);
// `offset` rounded up to a multiple of `alignment`; throws on overflow.
uint64_t AlignUp(uint64_t offset, uint64_t alignment);
// Least common multiple (both powers of two in practice).
uint64_t Lcm(uint64_t a, uint64_t b);
// a + b, throwing "size-overflow" if it wraps.
uint64_t CheckedAdd(uint64_t a, uint64_t b);

}  // namespace ptepack
