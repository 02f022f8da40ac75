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
  // No placement of these blocks can be smaller: `size` equals PlanLowerBound
  // (with every fixed offset a multiple of the alignment), or the exact
  // search finished within its budget.
  bool optimal = false;
};

enum class PlanAlgorithm {
  kExecutorchGreedy,  // exir/memory_planning.py `greedy`: largest first into shared objects
  kBestFit,           // largest first, each in the smallest gap that fits among live blocks
  kExact,             // exhaustive search, for small buffers only (falls back to best-fit)
  kBest,              // the smallest of the above
};

// "executorch-greedy", "best-fit", "exact", "best".
const char* PlanAlgorithmName(PlanAlgorithm a);
std::optional<PlanAlgorithm> PlanAlgorithmFromName(const std::string& name);

// Knobs of PlanMemory; the defaults are what `ptepack plan` uses.
struct PlanOptions {
  // kExecutorchGreedy. Upstream sorts its specs with bisect.insort (stable)
  // by size and then reverses the list, so among equal sizes the spec it
  // collected last is placed first. Which order it collected them in is not
  // in the file (a set in some releases, graph order in others), so ties are
  // taken in the order the blocks are given; `reverse_ties` takes them in the
  // reverse order, which is upstream's own when the blocks are given in the
  // order its planner collected them (graph order in exir/memory_planning.py
  // since apply_algo passes a list).
  bool reverse_ties = false;
  // The sort key is TensorSpec.allocated_memory *before* greedy calls
  // spec.realign(alignment): the size rounded up to TensorSpec.alignment,
  // which is exir/tensor.py's ALIGNMENT (16) for a fresh spec. 0: `alignment`.
  uint64_t greedy_sort_alignment = 16;
  // kBestFit (and kExact, kBest): work the local search may do after the
  // fixed orders, counted as blocks placed plus the blocks each was checked
  // against (deterministic: a count, not a clock; about 0.3 s of CPU at the
  // default). It also stops at the lower bound and after 20,000 moves in a
  // row that found nothing smaller. 0: no local search.
  uint64_t improve_budget = 20000000;
  // kBestFit (and kExact, kBest): a block alive with more than this many
  // blocks already placed goes above them all rather than into a gap among
  // them, so that best-fit stays O(n log n) when very many blocks are alive
  // together (checked only when more than 1,024 x this many pairs of blocks
  // are alive at the same time).
  size_t gap_search_limit = 4096;
  // kExact (and kBest): time-connected groups of at most this many blocks
  // are searched exhaustively; larger ones keep the heuristic placement.
  size_t exact_max_blocks = 64;
  // kExact (and kBest): placements the search may try in one call, over all
  // groups (deterministic: a count, not a clock). When it runs out, the best
  // placement found so far is returned (never worse than best-fit's).
  uint64_t exact_budget = 200000;
};

// Places `blocks` in one buffer at multiples of `alignment` (a power of two).
// Blocks alive at the same instruction never share bytes; fixed blocks keep
// their offsets. Throws ptepack::Error: "plan-fixed-overlap" if two fixed
// blocks share bytes while both are alive, "plan-bad-alignment" if
// `alignment` is not a power of two, "plan-bad-interval" if a block's first
// instruction is after its last, "size-overflow" past 2^64 bytes.
//
//  kExecutorchGreedy  exir/memory_planning.py `greedy` with
//                     allow_overlapping_allocations=True: blocks largest
//                     first (see PlanOptions::reverse_ties), each into the
//                     first shared object none of whose tensors is alive at
//                     the same time (at its start), else stacked above the
//                     tensors of a shared object it overlaps if it still fits
//                     in that object, else into a new object of its size;
//                     objects laid end to end (materialize_buffer). Fixed
//                     blocks come first and the objects start after the
//                     highest of them, as upstream starts after a
//                     submodule's bytes (input_mem_buffer_sizes).
//  kBestFit           largest first (and a few other orders, keeping the
//                     smallest result), each into the smallest gap among the
//                     blocks already placed that are alive at the same time
//                     (TensorFlow Lite's ArenaPlanner), or the lowest gap;
//                     then a local search over the order (TVM's hill
//                     climbing), bounded by PlanOptions::improve_budget.
//  kExact             best-fit's orders, then an exhaustive branch-and-bound
//                     search of each time-connected group of small size, then
//                     (unless that proved the result optimal) best-fit's
//                     local search, keeping the smaller.
//  kBest              as kExact, with ExecuTorch's greedy (both tie orders)
//                     among the starting points: never larger than any of
//                     the others.
PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm algorithm);
PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm algorithm,
                         const PlanOptions& options);

// No placement can be smaller: the largest sum of aligned sizes alive at one
// instruction (fixed blocks count like the others; a bound only when their
// offsets are multiples of the alignment). Saturates at 2^64 - 1.
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
