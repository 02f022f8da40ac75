#include "layout/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "layout/alignment.h"
#include "ptepack/error.h"

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
  // +size where a block starts, -size after it ends; the largest running sum
  // (saturating at 2^64 - 1: sizes come from files).
  struct Event {
    uint64_t when;  // time * 2 + order: at one instruction, ends sort first
    uint64_t size;
    bool operator<(const Event& o) const { return when < o.when; }
  };
  std::vector<Event> events;
  events.reserve(blocks.size() * 2);
  for (const PlanBlock& b : blocks) {
    const uint64_t size = AlignUp(b.size, alignment);
    events.push_back({uint64_t{b.first} * 2 + 1, size});
    events.push_back({(uint64_t{b.last} + 1) * 2, size});
  }
  std::sort(events.begin(), events.end());
  uint64_t live = 0, peak = 0, overflow = 0;  // overflow: how many times live passed 2^64
  for (const Event& e : events) {
    if (e.when & 1) {
      overflow += live + e.size < live;
      live += e.size;
    } else {
      overflow -= live < e.size;
      live -= e.size;
    }
    peak = overflow > 0 ? UINT64_MAX : std::max(peak, live);
  }
  return peak;
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

namespace {

constexpr uint64_t kNone = UINT64_MAX;

// What every algorithm starts from: the input checked, sizes rounded up to
// the alignment (TensorSpec.realign), fixed blocks apart from the others.
struct Prepared {
  uint64_t alignment = 16;
  std::vector<uint64_t> aligned;   // AlignUp(size, alignment), per block
  std::vector<size_t> fixed;       // blocks with a fixed_offset, in the order given
  std::vector<size_t> movable;     // the others, in the order given
  uint64_t fixed_top = 0;          // the end of the highest fixed block (aligned size)
  uint64_t fixed_end = 0;          // fixed_top rounded up to the alignment: where greedy starts
  size_t gap_search_limit = 4096;  // PlanOptions::gap_search_limit
};

std::string DescribeBlock(const PlanBlock& b, size_t index, uint64_t offset) {
  return "block " + std::to_string(index) + " (bytes [" + std::to_string(offset) + ", " +
         std::to_string(SaturatingAdd(offset, b.size)) + "), instructions " + std::to_string(b.first) + ".." +
         std::to_string(b.last) + ")";
}

Prepared Prepare(const std::vector<PlanBlock>& blocks, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw Error("plan-bad-alignment", "memory plan alignment " + std::to_string(alignment) + " is not a power of two");
  }
  Prepared p;
  p.alignment = alignment;
  p.aligned.resize(blocks.size());
  for (size_t i = 0; i < blocks.size(); i++) {
    const PlanBlock& b = blocks[i];
    if (b.first > b.last) {
      throw Error("plan-bad-interval", "block " + std::to_string(i) + " is live from instruction " +
                                           std::to_string(b.first) + " to " + std::to_string(b.last) +
                                           ": its first instruction is after its last");
    }
    p.aligned[i] = AlignUp(b.size, alignment);
    if (b.fixed_offset) {
      p.fixed.push_back(i);
      p.fixed_top = std::max(p.fixed_top, CheckedAdd(*b.fixed_offset, p.aligned[i]));
    } else {
      p.movable.push_back(i);
    }
  }
  p.fixed_end = AlignUp(p.fixed_top, alignment);
  if (p.fixed.size() > 1) {
    std::vector<PlanBlock> fixed_blocks;
    std::vector<uint64_t> fixed_offsets;
    for (size_t i : p.fixed) {
      fixed_blocks.push_back(blocks[i]);
      fixed_offsets.push_back(*blocks[i].fixed_offset);
    }
    const auto found = FindPlanOverlaps(fixed_blocks, fixed_offsets, 1);
    if (!found.empty()) {
      const size_t a = p.fixed[found[0].a], b = p.fixed[found[0].b];
      throw Error("plan-fixed-overlap", "fixed " + DescribeBlock(blocks[a], a, *blocks[a].fixed_offset) + " and " +
                                            DescribeBlock(blocks[b], b, *blocks[b].fixed_offset) +
                                            " share bytes while both are alive");
    }
  }
  return p;
}

// ---------------------------------------------------------------------------
// kExecutorchGreedy: exir/memory_planning.py `greedy` / `pick_shared_obj`.

// One SharedObject's tensors seen over time: at each instruction 0 when none
// of them is alive, else 1 + the highest end (offset in the object + aligned
// size) among those alive. Runs of equal values, adjacent runs different,
// kept as sorted arrays (the last run reaches past 2^32).
class ObjectTimeline {
 public:
  // _does_not_overlap: no tensor of the object is alive in [first, last].
  bool Free(uint32_t first, uint32_t last) const {
    const size_t i = Find(first);
    return values_[i] == 0 && (i + 1 == starts_.size() || starts_[i + 1] > last);
  }

  // The largest value over [first, last], or any value above `stop` once one is seen.
  uint64_t Max(uint32_t first, uint32_t last, uint64_t stop) const {
    uint64_t m = 0;
    for (size_t i = Find(first); i < starts_.size() && starts_[i] <= last; i++) {
      m = std::max(m, values_[i]);
      if (m > stop) break;
    }
    return m;
  }

  // Sets [first, last] to `v`, which is never below a value already there: a
  // tensor goes either where nothing is alive or above all that is.
  void Raise(uint32_t first, uint32_t last, uint64_t v) {
    const uint64_t end = uint64_t{last} + 1;
    const size_t i = Find(first), j = Find(end);  // the runs holding `first` and `end`; i < j or i == j
    const bool tail = starts_[j] < end;           // run j goes on after `end`: split it there
    size_t k = tail ? j + 1 : j;                  // runs [i, k) are replaced
    uint64_t s[3], w[3];
    size_t n = 0;
    if (starts_[i] < first) s[n] = starts_[i], w[n++] = values_[i];
    const bool same_as_before = n > 0 ? w[n - 1] == v : i > 0 && values_[i - 1] == v;
    if (!same_as_before) s[n] = first, w[n++] = v;
    if (tail) {
      if (values_[j] != v) s[n] = end, w[n++] = values_[j];
    } else if (values_[j] == v) {
      k = j + 1;  // the run starting at `end` joins this one
    }
    starts_.erase(starts_.begin() + i, starts_.begin() + k);
    values_.erase(values_.begin() + i, values_.begin() + k);
    starts_.insert(starts_.begin() + i, s, s + n);
    values_.insert(values_.begin() + i, w, w + n);
  }

 private:
  size_t Find(uint64_t t) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), t) - starts_.begin()) - 1;
  }
  std::vector<uint64_t> starts_{0};
  std::vector<uint64_t> values_{0};
};

struct SharedObject {
  uint64_t size = 0;  // the first (largest) tensor's aligned size; never resized
  uint32_t first_used = 0, last_used = 0;
  ObjectTimeline timeline;
  std::vector<std::pair<size_t, uint64_t>> allocations;  // block, offset inside the object
};

// Upstream's cost is O(blocks x shared objects x allocations); here each test
// of an object is a binary search (the "stacked" test also walks the runs it
// spans), so O(blocks x shared objects x log allocations) in all.
std::vector<uint64_t> ExecutorchGreedy(const std::vector<PlanBlock>& blocks, const Prepared& p,
                                       const PlanOptions& options, bool reverse_ties) {
  // sorted_specs: bisect.insort by allocated_memory (at the spec's alignment
  // before realign), reversed: largest first; equal keys in the order given
  // (or reversed, see PlanOptions::reverse_ties).
  const uint64_t sort_alignment = options.greedy_sort_alignment ? options.greedy_sort_alignment : p.alignment;
  std::vector<size_t> order = p.movable;
  if (reverse_ties) std::reverse(order.begin(), order.end());
  std::vector<uint64_t> key(blocks.size());
  for (size_t i : order) key[i] = AlignUp(blocks[i].size, sort_alignment);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key[x] > key[y]; });

  std::vector<SharedObject> objects;
  for (size_t i : order) {
    const PlanBlock& b = blocks[i];
    const uint64_t a = p.aligned[i];  // spec.realign(alignment); spec.allocated_memory
    SharedObject* picked = nullptr;
    uint64_t at = 0;
    // The first object none of whose tensors is alive with this one: at offset 0.
    for (SharedObject& obj : objects) {
      if (b.last < obj.first_used || b.first > obj.last_used || obj.timeline.Free(b.first, b.last)) {
        // Upstream asserts the object is large enough ("Allocation specs are
        // not sorted"). It is unless sizes that tie as sort keys differ once
        // aligned (an alignment below greedy_sort_alignment: 20 and 30 both
        // sort as 32 but take 24 and 32 bytes at 8), where upstream stops;
        // such an object is passed over.
        if (obj.size < a) continue;
        picked = &obj;
        break;
      }
    }
    // allow_overlapping_allocations: the first object where this one fits
    // above the tensors alive with it (_find_max_overlapping_allocations_offset
    // > 0 and that + size <= the object's size).
    if (picked == nullptr) {
      for (SharedObject& obj : objects) {
        if (a > 0 && obj.size <= a) continue;
        const uint64_t room = obj.size - a;
        const uint64_t top = obj.timeline.Max(b.first, b.last, room == kNone ? room : room + 1);
        if (top >= 2 && top - 1 <= room) {
          picked = &obj;
          at = top - 1;
          break;
        }
      }
    }
    if (picked == nullptr) {
      picked = &objects.emplace_back();
      picked->size = a;
      picked->first_used = b.first;
      picked->last_used = b.last;
    }
    picked->first_used = std::min(picked->first_used, b.first);
    picked->last_used = std::max(picked->last_used, b.last);
    picked->timeline.Raise(b.first, b.last, CheckedAdd(at, a) + 1);
    picked->allocations.emplace_back(i, at);
  }

  // materialize_buffer: objects end to end, after the fixed blocks.
  std::vector<uint64_t> offsets(blocks.size(), 0);
  for (size_t i : p.fixed) offsets[i] = *blocks[i].fixed_offset;
  uint64_t total = p.fixed_end;
  for (const SharedObject& obj : objects) {
    for (const auto& [i, at] : obj.allocations) offsets[i] = total + at;
    total = CheckedAdd(total, obj.size);
  }
  return offsets;
}

// ---------------------------------------------------------------------------
// kBestFit: TensorFlow Lite's ArenaPlanner / SimpleMemoryArena::Allocate.

// The blocks placed so far, by live interval: which of them are alive at some
// instruction of a block's interval. A segment tree over the distinct
// instruction indices holds each block in the O(log n) nodes that cover its
// interval, so the blocks alive at an instruction lie on one root-to-leaf
// path; those starting inside the interval come from per-instruction lists,
// found through a two-level bitmap of the non-empty ones. A query costs
// O(log n + blocks found). How many there are, and the highest end among
// them, cost O(log n) (two Fenwick trees of starts and ends; the same segment
// tree keeping the highest end over each node's whole range and within it),
// kept only when `dense` (they cost as much again). Blocks come off in the
// reverse of the order they were added.
class LiveIndex {
 public:
  LiveIndex(const std::vector<PlanBlock>& blocks, bool dense) : dense_(dense) {
    std::vector<uint32_t> times;
    times.reserve(blocks.size() * 2);
    for (const PlanBlock& b : blocks) {
      times.push_back(b.first);
      times.push_back(b.last);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    leaves_ = 1;
    while (leaves_ < times.size()) leaves_ <<= 1;
    first_.resize(blocks.size());
    last_.resize(blocks.size());
    for (size_t i = 0; i < blocks.size(); i++) {
      first_[i] = static_cast<uint32_t>(std::lower_bound(times.begin(), times.end(), blocks[i].first) - times.begin());
      last_[i] = static_cast<uint32_t>(std::lower_bound(times.begin(), times.end(), blocks[i].last) - times.begin());
    }
    cover_.resize(2 * leaves_);
    starts_.resize(leaves_);
    words_.assign((leaves_ + 63) / 64, 0);
    summary_.assign((words_.size() + 63) / 64, 0);
    if (dense_) {
      started_.assign(leaves_ + 1, 0);
      ended_.assign(leaves_ + 1, 0);
      whole_.assign(2 * leaves_, 0);
      within_.assign(2 * leaves_, 0);
    }
  }

  bool dense() const { return dense_; }

  // Blocks added so far.
  size_t size() const { return added_.size(); }

  // Adds `block`, which ends at byte `end`.
  void Add(size_t block, uint64_t end) {
    const auto id = static_cast<uint32_t>(block);
    for (size_t l = first_[block] + leaves_, r = last_[block] + leaves_ + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) cover_[l++].push_back(id);
      if (r & 1) cover_[--r].push_back(id);
    }
    const size_t t = first_[block];
    starts_[t].push_back(id);
    words_[t >> 6] |= uint64_t{1} << (t & 63);
    summary_[t >> 12] |= uint64_t{1} << ((t >> 6) & 63);
    added_.push_back(id);
    if (!dense_) return;
    undo_marks_.push_back(undo_.size());
    for (size_t l = first_[block] + leaves_, r = last_[block] + leaves_ + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) Whole(l++, end);
      if (r & 1) Whole(--r, end);
    }
    for (size_t node = (first_[block] + leaves_) >> 1; node > 0; node >>= 1) Within(node, end);
    for (size_t node = (last_[block] + leaves_) >> 1; node > 0; node >>= 1) Within(node, end);
    Count(started_, first_[block], 1);
    Count(ended_, last_[block], 1);
  }

  // How many added blocks are alive at an instruction where `block` is.
  size_t CountAlive(size_t block) const {
    return static_cast<size_t>(Sum(started_, last_[block]) - (first_[block] ? Sum(ended_, first_[block] - 1) : 0));
  }

  // The highest end among the added blocks alive where `block` is (0: none).
  uint64_t MaxEndAlive(size_t block) const {
    uint64_t m = 0;
    const size_t lo = first_[block] + leaves_, hi = last_[block] + leaves_;
    for (size_t l = lo, r = hi + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) m = std::max(m, within_[l++]);
      if (r & 1) m = std::max(m, within_[--r]);
    }
    for (size_t node = lo >> 1; node > 0; node >>= 1) m = std::max(m, whole_[node]);
    for (size_t node = hi >> 1; node > 0; node >>= 1) m = std::max(m, whole_[node]);
    return m;
  }

  // Removes the blocks added last until `count` remain: each is last in
  // every list it was added to.
  void Truncate(size_t count) {
    while (added_.size() > count) {
      const uint32_t block = added_.back();
      added_.pop_back();
      for (size_t l = first_[block] + leaves_, r = last_[block] + leaves_ + 1; l < r; l >>= 1, r >>= 1) {
        if (l & 1) cover_[l++].pop_back();
        if (r & 1) cover_[--r].pop_back();
      }
      const size_t t = first_[block];
      starts_[t].pop_back();
      if (starts_[t].empty()) {
        words_[t >> 6] &= ~(uint64_t{1} << (t & 63));
        if (words_[t >> 6] == 0) summary_[t >> 12] &= ~(uint64_t{1} << ((t >> 6) & 63));
      }
      if (!dense_) continue;
      Count(started_, first_[block], -1);
      Count(ended_, last_[block], -1);
      for (size_t k = undo_.size(); k > undo_marks_.back(); k--) {
        const Undo& u = undo_[k - 1];
        whole_[u.node] = u.whole;
        within_[u.node] = u.within;
      }
      undo_.resize(undo_marks_.back());
      undo_marks_.pop_back();
    }
  }

  // Calls fn(j) once for every added block j alive at an instruction where `block` is.
  template <class F>
  void ForEachAlive(size_t block, F&& fn) const {
    for (size_t node = first_[block] + leaves_; node > 0; node >>= 1) {
      for (uint32_t j : cover_[node]) fn(j);
    }
    for (size_t t = NextStart(first_[block] + size_t{1}); t <= last_[block]; t = NextStart(t + 1)) {
      for (uint32_t j : starts_[t]) fn(j);
    }
  }

 private:
  void Whole(size_t node, uint64_t end) {
    undo_.push_back({node, whole_[node], within_[node]});
    whole_[node] = std::max(whole_[node], end);
    within_[node] = std::max(within_[node], end);
  }
  void Within(size_t node, uint64_t end) {
    if (within_[node] >= end) return;
    undo_.push_back({node, whole_[node], within_[node]});
    within_[node] = end;
  }
  // Fenwick trees over the distinct instructions: blocks started at or before, ended at or before.
  static void Count(std::vector<int64_t>& tree, size_t t, int64_t delta) {
    for (size_t i = t + 1; i < tree.size(); i += i & (~i + 1)) tree[i] += delta;
  }
  static int64_t Sum(const std::vector<int64_t>& tree, size_t t) {
    int64_t s = 0;
    for (size_t i = t + 1; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
  }

  // The first instruction index >= t where an added block starts, or SIZE_MAX.
  size_t NextStart(size_t t) const {
    if (t >= leaves_) return SIZE_MAX;
    size_t w = t >> 6;
    const uint64_t bits = words_[w] & (~uint64_t{0} << (t & 63));
    if (bits != 0) return (w << 6) | static_cast<size_t>(__builtin_ctzll(bits));
    if (++w >= words_.size()) return SIZE_MAX;
    size_t s = w >> 6;
    uint64_t sb = summary_[s] & (~uint64_t{0} << (w & 63));
    while (sb == 0) {
      if (++s >= summary_.size()) return SIZE_MAX;
      sb = summary_[s];
    }
    w = (s << 6) | static_cast<size_t>(__builtin_ctzll(sb));
    return (w << 6) | static_cast<size_t>(__builtin_ctzll(words_[w]));
  }

  bool dense_;
  size_t leaves_ = 1;
  std::vector<uint32_t> first_, last_;  // per block, as indices into the distinct instructions
  std::vector<std::vector<uint32_t>> cover_;
  std::vector<std::vector<uint32_t>> starts_;
  std::vector<uint64_t> words_, summary_;
  std::vector<uint32_t> added_;
  std::vector<int64_t> started_, ended_;
  std::vector<uint64_t> whole_;   // per node: the highest end among blocks covering all of its range
  std::vector<uint64_t> within_;  // per node: the highest end among blocks alive anywhere in its range
  struct Undo {
    size_t node;
    uint64_t whole, within;
  };
  std::vector<Undo> undo_;
  std::vector<size_t> undo_marks_;  // undo_.size() before each block was added
};

enum class GapChoice {
  kSmallest,  // the smallest gap that fits (SimpleMemoryArena::Allocate)
  kLowest,    // the lowest gap that fits
};

// Pairs of blocks alive at the same instruction.
uint64_t PairsAlive(const std::vector<PlanBlock>& blocks) {
  std::vector<uint32_t> firsts, lasts;
  for (const PlanBlock& b : blocks) {
    firsts.push_back(b.first);
    lasts.push_back(b.last);
  }
  std::sort(firsts.begin(), firsts.end());
  std::sort(lasts.begin(), lasts.end());
  uint64_t twice = 0;  // each pair counted from both ends
  for (const PlanBlock& b : blocks) {
    const auto started = std::upper_bound(firsts.begin(), firsts.end(), b.last) - firsts.begin();
    const auto ended = std::lower_bound(lasts.begin(), lasts.end(), b.first) - lasts.begin();
    twice += static_cast<uint64_t>(started - ended - 1);
  }
  return twice / 2;
}

// Best-fit placement of the movable blocks in a given order, each in a gap
// among the blocks already placed (fixed ones first) that are alive at the
// same time, or above them all. Keeps what it placed so that a changed order
// is placed again only from the first position that changed.
class OrderPlacer {
 public:
  OrderPlacer(const std::vector<PlanBlock>& blocks, const Prepared& p)
      : p_(p),
        // Counting costs about as much as looking at the blocks found, so
        // count only when there are many pairs to look at.
        live_(blocks, PairsAlive(blocks) > uint64_t{1024} * p.gap_search_limit),
        offsets_(blocks.size(), 0) {
    for (size_t i : p.fixed) {
      offsets_[i] = *blocks[i].fixed_offset;
      if (p.aligned[i] > 0) live_.Add(i, offsets_[i] + p.aligned[i]);
    }
    fixed_entries_ = live_.size();
  }

  // Places order[from...], keeping the placements of order[0, from) (which
  // must be those of the last call's order). Returns the work done (blocks
  // placed plus blocks they were checked against).
  uint64_t Place(const std::vector<size_t>& order, size_t from, GapChoice choice) {
    from = std::min(from, placed_);
    entries_.resize(order.size() + 1);
    entries_[0] = fixed_entries_;
    live_.Truncate(entries_[from]);
    uint64_t work = 0;
    for (size_t k = from; k < order.size(); k++) {
      entries_[k] = live_.size();
      const size_t i = order[k];
      const uint64_t a = p_.aligned[i];
      offsets_[i] = 0;
      if (a == 0) continue;  // occupies nothing: offset 0
      work++;
      if (live_.dense() && live_.CountAlive(i) > p_.gap_search_limit) {
        // Too many to look for gaps among: above them all, in O(log n).
        offsets_[i] = AlignUp(live_.MaxEndAlive(i), p_.alignment);
        live_.Add(i, CheckedAdd(offsets_[i], a));
        continue;
      }
      near_.clear();
      live_.ForEachAlive(i, [&](uint32_t j) { near_.emplace_back(offsets_[j], offsets_[j] + p_.aligned[j]); });
      work += near_.size();
      std::sort(near_.begin(), near_.end());
      uint64_t cur = 0, best = kNone, best_gap = kNone;
      for (const auto& [lo, hi] : near_) {
        const uint64_t c = AlignUp(cur, p_.alignment);
        if (c <= lo && lo - c >= a) {
          const uint64_t gap = lo - c;
          if (gap < best_gap) {
            best = c;
            best_gap = gap;
          }
          if (choice == GapChoice::kLowest || gap == a) break;
        }
        cur = std::max(cur, hi);
      }
      if (best == kNone) best = AlignUp(cur, p_.alignment);
      offsets_[i] = best;
      live_.Add(i, CheckedAdd(best, a));
    }
    entries_[order.size()] = live_.size();
    placed_ = order.size();
    return work;
  }

  // Forgets the placements from position `from` on (the order changed there).
  void Invalidate(size_t from) { placed_ = std::min(placed_, from); }

  const std::vector<uint64_t>& offsets() const { return offsets_; }

 private:
  const Prepared& p_;
  LiveIndex live_;
  std::vector<uint64_t> offsets_;
  size_t fixed_entries_ = 0;
  size_t placed_ = 0;                                // positions of the last order whose placement is current
  std::vector<size_t> entries_;                      // index entries before each position
  std::vector<std::pair<uint64_t, uint64_t>> near_;  // [offset, end) of the blocks alive with one
};

uint64_t PlacementSize(const Prepared& p, const std::vector<uint64_t>& offsets) {
  uint64_t size = 0;
  for (size_t i = 0; i < offsets.size(); i++) size = std::max(size, CheckedAdd(offsets[i], p.aligned[i]));
  return size;
}

// The orders best-fit tries; it keeps the smallest placement (the first on ties).
std::vector<std::vector<size_t>> BestFitOrders(const std::vector<PlanBlock>& blocks, const Prepared& p) {
  const std::vector<uint64_t>& a = p.aligned;
  // Largest first, then earliest first (ArenaPlanner's tie rule), then as given.
  std::vector<size_t> by_size = p.movable;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t x, size_t y) { return a[x] != a[y] ? a[x] > a[y] : blocks[x].first < blocks[y].first; });
  std::vector<std::vector<size_t>> orders{by_size};
  if (p.movable.empty()) return orders;

  // ArenaPlanner: tensors alive over the whole method first, then by size.
  uint32_t lo = UINT32_MAX, hi = 0;
  for (const PlanBlock& b : blocks) {
    lo = std::min(lo, b.first);
    hi = std::max(hi, b.last);
  }
  std::vector<size_t> whole_first = by_size;
  std::stable_partition(whole_first.begin(), whole_first.end(),
                        [&](size_t x) { return blocks[x].first == lo && blocks[x].last == hi; });
  orders.push_back(whole_first);

  // TVM USMP greedy_by_conflicts: the block alive with the most others first.
  std::vector<uint32_t> firsts, lasts;
  for (size_t i : p.movable) {
    firsts.push_back(blocks[i].first);
    lasts.push_back(blocks[i].last);
  }
  std::sort(firsts.begin(), firsts.end());
  std::sort(lasts.begin(), lasts.end());
  std::vector<size_t> conflicts(blocks.size(), 0);
  for (size_t i : p.movable) {
    const size_t started = std::upper_bound(firsts.begin(), firsts.end(), blocks[i].last) - firsts.begin();
    const size_t ended = std::lower_bound(lasts.begin(), lasts.end(), blocks[i].first) - lasts.begin();
    conflicts[i] = started - ended;
  }
  std::vector<size_t> by_conflicts = by_size;
  std::stable_sort(by_conflicts.begin(), by_conflicts.end(),
                   [&](size_t x, size_t y) { return conflicts[x] > conflicts[y]; });
  orders.push_back(by_conflicts);

  // Bytes x instructions: long-lived blocks before short ones of the same size.
  std::vector<size_t> by_area = by_size;
  auto area = [&](size_t x) {
    return static_cast<long double>(a[x]) * (static_cast<long double>(blocks[x].last - blocks[x].first) + 1);
  };
  std::stable_sort(by_area.begin(), by_area.end(), [&](size_t x, size_t y) { return area(x) > area(y); });
  orders.push_back(by_area);

  // Drop orders equal to an earlier one.
  std::vector<std::vector<size_t>> unique;
  for (auto& o : orders) {
    if (std::find(unique.begin(), unique.end(), o) == unique.end()) unique.push_back(std::move(o));
  }
  return unique;
}

// A small deterministic generator (splitmix64) for the local search.
class SplitMix {
 public:
  uint64_t operator()() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_ = 23;
};

// Best-fit under each order of BestFitOrders and both gap rules: the
// smallest placement (the first on ties), and the order and rule that gave it.
struct FitResult {
  std::vector<uint64_t> offsets;
  uint64_t size = kNone;
  std::vector<size_t> order;
  GapChoice choice = GapChoice::kSmallest;
};

FitResult BestFitOrdersOnly(const std::vector<PlanBlock>& blocks, const Prepared& p, uint64_t lower) {
  OrderPlacer placer(blocks, p);
  FitResult best;
  for (auto& order : BestFitOrders(blocks, p)) {
    for (GapChoice choice : {GapChoice::kSmallest, GapChoice::kLowest}) {
      placer.Invalidate(0);
      placer.Place(order, 0, choice);
      const uint64_t size = PlacementSize(p, placer.offsets());
      if (size < best.size) {
        best.size = size;
        best.offsets = placer.offsets();
        best.order = order;
        best.choice = choice;
        if (size <= lower) return best;  // no placement is smaller
      }
    }
  }
  return best;
}

// The movable blocks that occupy bytes, in groups joined by overlapping
// intervals (ordered by first use): blocks of different groups are never
// alive at the same instruction, so each group can be placed on its own.
std::vector<std::vector<size_t>> TimeGroups(const std::vector<PlanBlock>& blocks, const Prepared& p) {
  std::vector<size_t> order;
  for (size_t i : p.movable) {
    if (p.aligned[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return blocks[x].first < blocks[y].first; });
  std::vector<std::vector<size_t>> groups;
  uint32_t reach = 0;
  for (size_t i : order) {
    if (groups.empty() || blocks[i].first > reach) groups.emplace_back();
    reach = groups.back().empty() ? blocks[i].last : std::max(reach, blocks[i].last);
    groups.back().push_back(i);
  }
  return groups;
}

// A local search over best-fit's order (TVM USMP's hill_climb idea): move one
// block to another position, place again from there, keep the new order when
// it is no larger. Stops at the lower bound, when the work budget runs out,
// or after kStall moves in a row that found nothing smaller. Returns the
// smallest placement seen (`start`'s when nothing was smaller).
constexpr uint64_t kStall = 20000;

std::vector<uint64_t> LocalSearch(const std::vector<PlanBlock>& blocks, const Prepared& p, uint64_t lower,
                                  uint64_t& budget, const FitResult& start) {
  const size_t n = start.order.size();
  if (n < 2 || start.size <= lower || budget == 0) return start.offsets;
  OrderPlacer placer(blocks, p);
  std::vector<size_t> order = start.order;
  std::vector<uint64_t> best = start.offsets;
  uint64_t best_size = start.size, size = start.size;
  budget -= std::min(budget, placer.Place(order, 0, start.choice));
  auto move = [&](size_t x, size_t y) {
    if (x < y) {
      std::rotate(order.begin() + x, order.begin() + x + 1, order.begin() + y + 1);
    } else {
      std::rotate(order.begin() + y, order.begin() + x, order.begin() + x + 1);
    }
  };
  SplitMix rng;
  for (uint64_t stall = 0; budget > 0 && stall < kStall; stall++) {
    const size_t from = static_cast<size_t>(rng() % n);
    size_t to = static_cast<size_t>(rng() % (n - 1));
    if (to >= from) to++;
    move(from, to);
    const size_t changed = std::min(from, to);
    budget -= std::min(budget, placer.Place(order, changed, start.choice));
    const uint64_t trial = PlacementSize(p, placer.offsets());
    if (trial > size) {
      move(to, from);
      placer.Invalidate(changed);
      continue;
    }
    size = trial;
    if (size < best_size) {
      best_size = size;
      best = placer.offsets();
      stall = 0;
      if (best_size <= lower) break;
    }
  }
  return best;
}

// The local search group by group (TimeGroups), always on the group that
// ends highest, down to the next lower group's end: one that cannot be
// lowered ends it.
// Each group is searched as an instance of its own (its blocks and the fixed
// ones), in the order best-fit placed it. Returns the offsets (`fit`'s where
// nothing smaller was found).
std::vector<uint64_t> ImproveByGroups(const std::vector<PlanBlock>& blocks, const Prepared& p, uint64_t lower,
                                      const PlanOptions& options, const FitResult& fit) {
  std::vector<uint64_t> offsets = fit.offsets;
  if (fit.size <= lower || options.improve_budget == 0) return offsets;
  const std::vector<std::vector<size_t>> groups = TimeGroups(blocks, p);
  std::vector<size_t> position(blocks.size(), 0);
  for (size_t k = 0; k < fit.order.size(); k++) position[fit.order[k]] = k;
  auto end_of = [&](const std::vector<size_t>& g) {
    uint64_t e = 0;
    for (size_t i : g) e = std::max(e, offsets[i] + p.aligned[i]);
    return e;
  };
  std::vector<uint64_t> ends;
  for (const auto& g : groups) ends.push_back(end_of(g));
  uint64_t budget = options.improve_budget;
  while (budget > 0 && !groups.empty()) {
    const size_t top = static_cast<size_t>(std::max_element(ends.begin(), ends.end()) - ends.begin());
    uint64_t next = 0;  // the next level below: groups as high as this one come after it
    for (uint64_t e : ends) {
      if (e < ends[top]) next = std::max(next, e);
    }
    const uint64_t target = std::max({lower, p.fixed_top, next});
    if (ends[top] <= target) break;
    // The group as an instance: its blocks in best-fit's order, then the fixed ones.
    std::vector<size_t> members = groups[top];
    std::sort(members.begin(), members.end(), [&](size_t x, size_t y) { return position[x] < position[y]; });
    std::vector<PlanBlock> sub;
    FitResult start;
    for (size_t i : members) {
      start.order.push_back(sub.size());
      start.offsets.push_back(offsets[i]);
      sub.push_back(blocks[i]);
    }
    for (size_t i : p.fixed) {
      start.offsets.push_back(offsets[i]);
      sub.push_back(blocks[i]);
    }
    Prepared sub_p = Prepare(sub, p.alignment);
    sub_p.gap_search_limit = p.gap_search_limit;
    start.size = PlacementSize(sub_p, start.offsets);
    start.choice = fit.choice;
    const std::vector<uint64_t> found = LocalSearch(sub, sub_p, target, budget, start);
    for (size_t k = 0; k < members.size(); k++) offsets[members[k]] = found[k];
    const uint64_t end = end_of(groups[top]);
    if (end >= ends[top]) break;  // not lowered: the size cannot go down
    ends[top] = end;
  }
  return offsets;
}

// ---------------------------------------------------------------------------
// kExact: branch and bound over the order blocks are placed in, each at the
// lowest offset where it fits ("first fit").
//
// Why that is exhaustive: take an optimal placement and place its blocks
// first-fit in the order of their offsets there. Each lands at or below its
// optimal offset (every block placed before it that is alive with it ends at
// or below that offset), so the result is optimal too; repeating this
// reaches a placement that first fit reproduces from its own offset order.
// So it is enough to search orders whose first-fit offsets never decrease
// (ties by block index), and an unplaced block can only land at or above
// max(its first-fit offset now, the last offset placed): that bounds the
// search, as does the most the unplaced blocks need above that offset at one
// instruction. Identical blocks are placed in index order.

class ExactSearch {
 public:
  ExactSearch(const std::vector<PlanBlock>& blocks, const Prepared& p, const std::vector<size_t>& group,
              const std::vector<uint64_t>& incumbent, uint64_t stop_at, uint64_t* budget)
      : p_(p), group_(group), m_(group.size()), stop_at_(stop_at), budget_(budget) {
    a_.resize(m_);
    conflicts_.resize(m_);
    obstacles_.resize(m_);
    twin_.assign(m_, SIZE_MAX);
    off_.assign(m_, 0);
    placed_.assign(m_, 0);
    best_off_.resize(m_);
    best_ = 0;
    for (size_t k = 0; k < m_; k++) {
      const size_t i = group[k];
      a_[k] = p.aligned[i];
      best_off_[k] = incumbent[i];
      best_ = std::max(best_, incumbent[i] + a_[k]);
      for (size_t l = 0; l < m_; l++) {
        if (l != k && Alive(blocks[i], blocks[group[l]])) conflicts_[k].push_back(l);
      }
      for (size_t f : p.fixed) {
        if (p.aligned[f] > 0 && Alive(blocks[i], blocks[f])) {
          obstacles_[k].emplace_back(*blocks[f].fixed_offset, *blocks[f].fixed_offset + p.aligned[f]);
        }
      }
    }
    std::vector<size_t> same(m_);
    std::iota(same.begin(), same.end(), size_t{0});
    auto shape = [&](size_t k) { return std::make_tuple(a_[k], blocks[group[k]].first, blocks[group[k]].last); };
    std::stable_sort(same.begin(), same.end(), [&](size_t x, size_t y) { return shape(x) < shape(y); });
    for (size_t k = 1; k < m_; k++) {
      if (shape(same[k]) == shape(same[k - 1])) twin_[same[k]] = same[k - 1];
    }
    ff_.assign(m_ + 1, std::vector<uint64_t>(m_, 0));
    candidates_.resize(m_ + 1);
    for (size_t k = 0; k < m_; k++) ff_[0][k] = FirstFit(k);
    std::vector<std::pair<uint64_t, std::pair<size_t, bool>>> when;  // time * 2 + (start), ends first
    for (size_t k = 0; k < m_; k++) {
      when.push_back({uint64_t{blocks[group[k]].first} * 2 + 1, {k, true}});
      when.push_back({(uint64_t{blocks[group[k]].last} + 1) * 2, {k, false}});
    }
    std::sort(when.begin(), when.end());
    for (const auto& w : when) events_.push_back(w.second);
  }

  // Searches; true when it finished (best() is then optimal, or at most stop_at).
  bool Run() {
    if (best_ > stop_at_) Search(0, 0, SIZE_MAX, 0);
    return !exhausted_;
  }
  uint64_t best() const { return best_; }
  // Writes the best offsets found into `offsets` (indexed by block).
  void Apply(std::vector<uint64_t>& offsets) const {
    for (size_t k = 0; k < m_; k++) offsets[group_[k]] = best_off_[k];
  }

 private:
  static bool Alive(const PlanBlock& x, const PlanBlock& y) { return x.first <= y.last && y.first <= x.last; }

  uint64_t FirstFit(size_t k) {
    scratch_ = obstacles_[k];
    for (size_t l : conflicts_[k]) {
      if (placed_[l]) scratch_.emplace_back(off_[l], off_[l] + a_[l]);
    }
    std::sort(scratch_.begin(), scratch_.end());
    uint64_t cur = 0;
    for (const auto& [lo, hi] : scratch_) {
      const uint64_t c = AlignUp(cur, p_.alignment);
      if (c <= lo && lo - c >= a_[k]) return c;
      cur = std::max(cur, hi);
    }
    return AlignUp(cur, p_.alignment);
  }

  void Search(size_t depth, uint64_t last_off, size_t last_k, uint64_t top) {
    if (depth == m_) {
      if (top < best_) {
        best_ = top;
        best_off_ = off_;
      }
      if (best_ <= stop_at_) stopped_ = true;
      return;
    }
    const std::vector<uint64_t>& ff = ff_[depth];
    uint64_t bound = top;
    std::vector<size_t>& candidates = candidates_[depth];
    candidates.clear();
    for (size_t k = 0; k < m_; k++) {
      if (placed_[k]) continue;
      bound = std::max(bound, std::max(ff[k], last_off) + a_[k]);
      if (twin_[k] != SIZE_MAX && !placed_[twin_[k]]) continue;
      if (ff[k] > last_off || (ff[k] == last_off && (last_k == SIZE_MAX || k > last_k))) candidates.push_back(k);
    }
    if (bound >= best_) return;
    // The unplaced blocks all go at or above last_off, and those alive at
    // one instruction one above the other.
    uint64_t live = 0, most = 0;
    for (const auto& [k, start] : events_) {
      if (placed_[k]) continue;
      if (start) {
        live += a_[k];
        most = std::max(most, live);
      } else {
        live -= a_[k];
      }
    }
    bound = std::max(bound, last_off + most);
    if (bound >= best_) return;
    std::sort(candidates.begin(), candidates.end(), [&](size_t x, size_t y) {
      return ff[x] != ff[y] ? ff[x] < ff[y] : a_[x] != a_[y] ? a_[x] > a_[y] : x < y;
    });
    for (size_t c : candidates) {
      if (*budget_ == 0) {
        exhausted_ = stopped_ = true;
        return;
      }
      --*budget_;
      off_[c] = ff[c];
      placed_[c] = 1;
      std::vector<uint64_t>& child = ff_[depth + 1];
      child = ff;
      for (size_t l : conflicts_[c]) {
        if (!placed_[l] && ff[l] < off_[c] + a_[c] && off_[c] < ff[l] + a_[l]) child[l] = FirstFit(l);
      }
      Search(depth + 1, off_[c], c, std::max(top, off_[c] + a_[c]));
      placed_[c] = 0;
      if (stopped_ || bound >= best_) return;
    }
  }

  const Prepared& p_;
  const std::vector<size_t>& group_;
  size_t m_;
  uint64_t stop_at_;
  uint64_t* budget_;
  std::vector<uint64_t> a_;
  std::vector<std::vector<size_t>> conflicts_;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> obstacles_;
  std::vector<size_t> twin_;
  std::vector<uint64_t> off_;
  std::vector<char> placed_;
  std::vector<std::vector<uint64_t>> ff_;        // first-fit offset of every block, per depth
  std::vector<std::vector<size_t>> candidates_;  // per depth
  std::vector<std::pair<uint64_t, uint64_t>> scratch_;
  std::vector<std::pair<size_t, bool>> events_;  // (block, starts) in time order, ends first
  uint64_t best_;
  std::vector<uint64_t> best_off_;
  bool stopped_ = false, exhausted_ = false;
};

// Improves `offsets` group by group (blocks connected by overlapping
// intervals never share an instruction with another group's). Returns true
// when the result is proven optimal.
bool ExactImprove(const std::vector<PlanBlock>& blocks, const Prepared& p, const PlanOptions& options, uint64_t lower,
                  std::vector<uint64_t>& offsets) {
  struct Group {
    std::vector<size_t> blocks;
    uint64_t lower = 0, now = 0;  // lower bound, end in `offsets`
  };
  std::vector<Group> groups;
  for (auto& g : TimeGroups(blocks, p)) groups.push_back({std::move(g), 0, 0});
  // No placement is below the lower bound, the fixed blocks' end, or any group's own bound.
  uint64_t target = std::max(lower, p.fixed_top);
  for (Group& g : groups) {
    std::vector<PlanBlock> members;
    for (size_t i : g.blocks) {
      members.push_back(blocks[i]);
      g.now = std::max(g.now, offsets[i] + p.aligned[i]);
    }
    g.lower = PlanLowerBound(members, p.alignment);
    target = std::max(target, g.lower);
  }
  // The groups that set the size first; each needs to get only as low as
  // what the ones before it reached.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) { return x.now > y.now; });
  uint64_t budget = options.exact_budget;
  bool proven = true;
  for (const Group& g : groups) {
    if (g.now <= target) break;
    if (g.blocks.size() > options.exact_max_blocks) {
      proven = false;
      target = g.now;
      continue;
    }
    ExactSearch search(blocks, p, g.blocks, offsets, target, &budget);
    if (!search.Run()) proven = false;
    search.Apply(offsets);
    target = std::max(target, search.best());
  }
  return proven;
}

}  // namespace

PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm algorithm) {
  return PlanMemory(blocks, alignment, algorithm, PlanOptions{});
}

PlanPlacement PlanMemory(const std::vector<PlanBlock>& blocks, uint64_t alignment, PlanAlgorithm algorithm,
                         const PlanOptions& options) {
  Prepared p = Prepare(blocks, alignment);
  p.gap_search_limit = options.gap_search_limit;
  // PlanLowerBound counts aligned sizes, which bounds every placement only
  // when the fixed blocks sit at multiples of the alignment: a fixed 16-byte
  // block at 128 and a fixed 32-byte one at 144, with alignment 32, share no
  // byte but would count 64. Off the alignment, nothing is taken as a bound.
  bool fixed_aligned = true;
  for (size_t i : p.fixed) fixed_aligned = fixed_aligned && *blocks[i].fixed_offset % alignment == 0;
  const uint64_t lower = fixed_aligned ? PlanLowerBound(blocks, alignment) : 0;
  std::vector<uint64_t> offsets;
  bool proven = false;
  // Smaller of two placements (the first on ties).
  auto keep_smaller = [&](std::vector<uint64_t>& offsets, std::vector<uint64_t> other) {
    if (PlacementSize(p, other) < PlacementSize(p, offsets)) offsets = std::move(other);
  };
  switch (algorithm) {
    case PlanAlgorithm::kExecutorchGreedy:
      offsets = ExecutorchGreedy(blocks, p, options, options.reverse_ties);
      break;
    case PlanAlgorithm::kBestFit: {
      FitResult fit = BestFitOrdersOnly(blocks, p, lower);
      offsets = ImproveByGroups(blocks, p, lower, options, fit);
      break;
    }
    case PlanAlgorithm::kExact:
    case PlanAlgorithm::kBest: {
      // Each algorithm in turn until one is proven optimal; the exact search
      // before the local search, which cannot prove anything.
      FitResult fit = BestFitOrdersOnly(blocks, p, lower);
      offsets = fit.offsets;
      if (algorithm == PlanAlgorithm::kBest) {
        for (bool reverse : {options.reverse_ties, !options.reverse_ties}) {
          if (PlacementSize(p, offsets) > lower) keep_smaller(offsets, ExecutorchGreedy(blocks, p, options, reverse));
        }
      }
      proven = ExactImprove(blocks, p, options, lower, offsets);
      if (!proven) keep_smaller(offsets, ImproveByGroups(blocks, p, lower, options, fit));
      break;
    }
  }
  PlanPlacement placement;
  placement.size = PlacementSize(p, offsets);
  placement.offsets = std::move(offsets);
  placement.optimal = proven || placement.size == lower;
  return placement;
}

}  // namespace ptepack
