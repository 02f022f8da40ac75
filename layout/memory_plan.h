// Memory planning as pure functions: blocks (a size and a live interval over
// instruction indices) in, byte offsets in one planned buffer out. No
// FlatBuffers, no I/O: serialize/read/plan_lifetimes.h derives the blocks of a
// program, `verify` checks an existing plan with FindPlanOverlaps, and
// `ptepack plan` re-plans with PlanMemory.
//
// The rules follow ExecuTorch's exir/memory_planning.py: a tensor is alive
// from the first to the last instruction that refers to it, both inclusive
// (update_tensor_lifetime), so two tensors may share bytes only when their
// intervals are disjoint (Verifier.has_overlap / storage_overlap). Sizes are
// rounded up to the alignment before placing (TensorSpec.realign), and a
// buffer's size is the end of its last aligned block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptepack {

// One thing to place: a planned tensor, or several values that share storage
// by design (a static view and its base, a MoveCall's source and target),
// merged by the caller into one block whose interval covers all of them.
struct PlanBlock {
  uint64_t size = 0;   // bytes it occupies (before rounding up to the alignment)
  uint32_t first = 0;  // live from instruction `first` ...
  uint32_t last = 0;   // ... to `last`, both inclusive (first <= last)
  // An offset the planner must keep (a mutable buffer shared by several
  // methods, whose offset every method must agree on). Must be aligned.
  std::optional<uint64_t> fixed_offset;
};

// Offsets of one buffer's blocks, in the order the blocks were given.
struct PlanPlacement {
  std::vector<uint64_t> offsets;
  uint64_t size = 0;  // max over blocks of offset + AlignUp(size, alignment); 0 with no blocks
};

enum class PlanAlgorithm {
  kExecutorchGreedy,  // exir/memory_planning.py `greedy`: largest first into shared objects
  kBestFit,           // largest first, each at the lowest offset that fits among live blocks
  kExact,             // exhaustive search, for small buffers only (falls back to best-fit)
  kBest,              // the smallest of the above
};

// "executorch-greedy", "best-fit", "exact", "best".
const char* PlanAlgorithmName(PlanAlgorithm a);
std::optional<PlanAlgorithm> PlanAlgorithmFromName(const std::string& name);

// Places `blocks` in one buffer at multiples of `alignment` (a power of two).
// Blocks alive at the same instruction never share bytes; fixed blocks keep
// their offsets. Throws ptepack::Error ("plan-fixed-overlap") if two fixed
// blocks conflict.
PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm algorithm);

// No placement can be smaller: the largest sum of aligned sizes alive at one
// instruction (fixed blocks count like the others).
uint64_t PlanLowerBound(const std::vector<PlanBlock>& blocks, uint64_t alignment);

// Two blocks that share bytes while both are alive.
struct PlanOverlap {
  size_t a = 0;  // block indices, a < b
  size_t b = 0;
};

// Every pair of blocks whose byte ranges [offset, offset + size) intersect
// and whose intervals intersect (sizes as given, not rounded up), at most
// `limit` of them, ordered by (a, b). O(n log n + pairs found) for blocks
// that are mostly disjoint in time.
std::vector<PlanOverlap> FindPlanOverlaps(const std::vector<PlanBlock>& blocks, const std::vector<uint64_t>& offsets,
                                          size_t limit = 1000);

// The alignment an existing plan was made with: the largest power of two
// dividing every nonzero offset, at least 16 (exir/memory_planning.py's
// default alignment) and at most 4096; 16 with no nonzero offset.
uint64_t InferPlanAlignment(const std::vector<uint64_t>& offsets);

}  // namespace ptepack
