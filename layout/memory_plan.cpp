#include "layout/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "layout/alignment.h"

namespace ptepack {

namespace {

struct NamedAlgorithm {
  PlanAlgorithm algorithm;
  const char* name;
};
constexpr NamedAlgorithm kAlgorithms[] = {
    {PlanAlgorithm::kExecutorchGreedy, "executorch-greedy"},
    {PlanAlgorithm::kBestFit, "best-fit"},
    {PlanAlgorithm::kExact, "exact"},
    {PlanAlgorithm::kBest, "best"},
};

// Block indices ordered by the instruction they start at (ties by index).
std::vector<size_t> ByFirstUse(const std::vector<PlanBlock>& blocks) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return blocks[x].first < blocks[y].first; });
  return order;
}

// a + b, or the largest value where that wraps (offsets come from files).
uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

bool BytesIntersect(uint64_t a_off, uint64_t a_size, uint64_t b_off, uint64_t b_size) {
  if (a_size == 0 || b_size == 0) return false;
  return a_off < SaturatingAdd(b_off, b_size) && b_off < SaturatingAdd(a_off, a_size);
}

}  // namespace

const char* PlanAlgorithmName(PlanAlgorithm a) {
  for (const auto& n : kAlgorithms) {
    if (n.algorithm == a) return n.name;
  }
  return "?";
}

std::optional<PlanAlgorithm> PlanAlgorithmFromName(const std::string& name) {
  for (const auto& n : kAlgorithms) {
    if (name == n.name) return n.algorithm;
  }
  return std::nullopt;
}

uint64_t PlanLowerBound(const std::vector<PlanBlock>& blocks, uint64_t alignment) {
  // +size where a block starts, -size after it ends; the largest running sum.
  std::vector<std::pair<uint64_t, int64_t>> events;  // (time * 2 + order, signed size): ends sort first
  events.reserve(blocks.size() * 2);
  for (const PlanBlock& b : blocks) {
    const auto size = static_cast<int64_t>(AlignUp(b.size, alignment));
    events.emplace_back(uint64_t{b.first} * 2 + 1, size);
    events.emplace_back((uint64_t{b.last} + 1) * 2, -size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [when, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

std::vector<PlanOverlap> FindPlanOverlaps(const std::vector<PlanBlock>& blocks, const std::vector<uint64_t>& offsets,
                                          size_t limit) {
  std::vector<PlanOverlap> found;
  if (limit == 0) return found;
  // Sweep over time: `live` holds the blocks whose interval has begun and not
  // yet ended, keyed by offset; `ending` by last instruction, to drop them.
  std::multimap<uint64_t, size_t> live;
  std::multimap<uint32_t, std::multimap<uint64_t, size_t>::iterator> ending;
  uint64_t max_live_size = 0;  // only grows: bounds how far back a range can reach
  for (size_t i : ByFirstUse(blocks)) {
    const PlanBlock& b = blocks[i];
    while (!ending.empty() && ending.begin()->first < b.first) {
      live.erase(ending.begin()->second);
      ending.erase(ending.begin());
    }
    if (b.size > 0) {
      // Live blocks starting before this one ends, scanned down while they could still reach it.
      const uint64_t end = SaturatingAdd(offsets[i], b.size);
      for (auto it = live.lower_bound(end); it != live.begin();) {
        --it;
        if (SaturatingAdd(it->first, max_live_size) <= offsets[i]) break;
        const size_t j = it->second;
        if (BytesIntersect(offsets[i], b.size, offsets[j], blocks[j].size)) {
          found.push_back({std::min(i, j), std::max(i, j)});
          if (found.size() >= limit) break;
        }
      }
      if (found.size() >= limit) break;
    }
    max_live_size = std::max(max_live_size, b.size);
    ending.emplace(b.last, live.emplace(offsets[i], i));
  }
  std::sort(found.begin(), found.end(), [](const PlanOverlap& x, const PlanOverlap& y) {
    return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
  });
  return found;
}

uint64_t InferPlanAlignment(const std::vector<uint64_t>& offsets) {
  uint64_t bits = 0;
  for (uint64_t o : offsets) bits |= o;
  if (bits == 0) return 16;
  const uint64_t lowest = bits & (~bits + 1);  // the largest power of two dividing every offset
  return std::clamp<uint64_t>(lowest, 16, 4096);
}

PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm /*algorithm*/) {
  // Placeholder until the planners land (branch `planner`): every block gets
  // bytes of its own, fixed blocks where they are, the others after them.
  PlanPlacement p;
  p.offsets.resize(blocks.size());
  uint64_t end = 0;
  for (const PlanBlock& b : blocks) {
    if (b.fixed_offset) end = std::max(end, CheckedAdd(*b.fixed_offset, AlignUp(b.size, alignment)));
  }
  for (size_t i = 0; i < blocks.size(); i++) {
    if (blocks[i].fixed_offset) {
      p.offsets[i] = *blocks[i].fixed_offset;
      continue;
    }
    p.offsets[i] = end;
    end = CheckedAdd(end, AlignUp(blocks[i].size, alignment));
  }
  p.size = end;
  return p;
}

}  // namespace ptepack
