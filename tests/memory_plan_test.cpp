// layout/memory_plan.h with numbers alone: overlaps, lower bounds and inferred
// alignments worked out by hand from the rules in exir/memory_planning.py.
#include "layout/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace ptepack {
namespace {

PlanBlock B(uint64_t size, uint32_t first, uint32_t last) { return PlanBlock{size, first, last, std::nullopt}; }

TEST(MemoryPlan, IntervalsAreInclusiveAtBothEnds) {
  // a is alive at 0..2, b at 2..3: both at instruction 2, so sharing bytes is an overlap.
  const std::vector<PlanBlock> blocks = {B(16, 0, 2), B(16, 2, 3)};
  auto found = FindPlanOverlaps(blocks, {0, 0});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].a, 0u);
  EXPECT_EQ(found[0].b, 1u);
  // c starts one instruction after a ends: the same bytes are fine.
  EXPECT_TRUE(FindPlanOverlaps({B(16, 0, 2), B(16, 3, 3)}, {0, 0}).empty());
}

TEST(MemoryPlan, ByteRangesAreHalfOpen) {
  // [0, 16) and [16, 32) touch but do not share a byte; [0, 17) and [16, 32) share byte 16.
  EXPECT_TRUE(FindPlanOverlaps({B(16, 0, 5), B(16, 0, 5)}, {0, 16}).empty());
  EXPECT_EQ(FindPlanOverlaps({B(17, 0, 5), B(16, 0, 5)}, {0, 16}).size(), 1u);
  // A zero-byte tensor occupies nothing.
  EXPECT_TRUE(FindPlanOverlaps({B(0, 0, 5), B(16, 0, 5)}, {0, 0}).empty());
}

TEST(MemoryPlan, NestedRangesAreFound) {
  // A large block [0, 1024) alive throughout, a small one inside it later on.
  const std::vector<PlanBlock> blocks = {B(1024, 0, 9), B(8, 1, 1), B(8, 5, 6)};
  auto found = FindPlanOverlaps(blocks, {0, 2048, 512});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].a, 0u);
  EXPECT_EQ(found[0].b, 2u);
}

TEST(MemoryPlan, OffsetsNearTheTopDoNotWrap) {
  const uint64_t top = UINT64_MAX - 8;
  EXPECT_TRUE(FindPlanOverlaps({B(16, 0, 1), B(16, 0, 1)}, {top, 0}).empty());
  EXPECT_EQ(FindPlanOverlaps({B(16, 0, 1), B(16, 0, 1)}, {top, top - 4}).size(), 1u);
}

// The definition, pair by pair, on random plans.
TEST(MemoryPlan, OverlapsEqualThePairwiseDefinition) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; round++) {
    const size_t n = 1 + rng() % 40;
    std::vector<PlanBlock> blocks;
    std::vector<uint64_t> offsets;
    for (size_t i = 0; i < n; i++) {
      const uint32_t first = static_cast<uint32_t>(rng() % 20);
      blocks.push_back(B(rng() % 64, first, first + static_cast<uint32_t>(rng() % 6)));
      offsets.push_back(rng() % 256);
    }
    std::vector<std::pair<size_t, size_t>> want;
    for (size_t a = 0; a < n; a++) {
      for (size_t b = a + 1; b < n; b++) {
        const bool time = blocks[a].first <= blocks[b].last && blocks[b].first <= blocks[a].last;
        const bool bytes = blocks[a].size > 0 && blocks[b].size > 0 && offsets[a] < offsets[b] + blocks[b].size &&
                           offsets[b] < offsets[a] + blocks[a].size;
        if (time && bytes) want.emplace_back(a, b);
      }
    }
    std::vector<std::pair<size_t, size_t>> got;
    for (const auto& o : FindPlanOverlaps(blocks, offsets, 100000)) got.emplace_back(o.a, o.b);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(MemoryPlan, LowerBoundIsTheLargestAlignedSumAliveAtOneInstruction) {
  // At instruction 1: 100 -> 112 and 40 -> 48 (alignment 16) are alive: 160.
  // At instruction 2: 40 -> 48 and 64: 112. At 3: 64 and 1 -> 16: 80.
  const std::vector<PlanBlock> blocks = {B(100, 0, 1), B(40, 1, 2), B(64, 2, 3), B(1, 3, 3)};
  EXPECT_EQ(PlanLowerBound(blocks, 16), 160u);
  EXPECT_EQ(PlanLowerBound(blocks, 1), 140u);
  EXPECT_EQ(PlanLowerBound({}, 16), 0u);
}

TEST(MemoryPlan, AlignmentInferredFromOffsets) {
  EXPECT_EQ(InferPlanAlignment({}), 16u);
  EXPECT_EQ(InferPlanAlignment({0, 0}), 16u);
  EXPECT_EQ(InferPlanAlignment({0, 64, 192}), 64u);
  EXPECT_EQ(InferPlanAlignment({0, 8, 192}), 16u);  // at least upstream's 16
  EXPECT_EQ(InferPlanAlignment({1u << 20}), 4096u);
}

TEST(MemoryPlan, AlgorithmNames) {
  for (const char* name : {"executorch-greedy", "best-fit", "exact", "best"}) {
    auto a = PlanAlgorithmFromName(name);
    ASSERT_TRUE(a.has_value()) << name;
    EXPECT_STREQ(PlanAlgorithmName(*a), name);
  }
  EXPECT_FALSE(PlanAlgorithmFromName("greedy").has_value());
}

}  // namespace
}  // namespace ptepack
