#include "serialize/read/plan_checks.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "layout/memory_plan.h"

namespace ptepack {

namespace efb = executorch_flatbuffer;

bool PlanCheckEnabled() {
  static const bool enabled = std::getenv("PTEPACK_SKIP_PLAN_CHECK") == nullptr;
  return enabled;
}

namespace {

constexpr size_t kMaxOverlapsPerMethod = 50;

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string Bytes(uint64_t off, uint64_t n) {
  const uint64_t end = off + n < off ? UINT64_MAX : off + n;
  return "[" + std::to_string(off) + ", " + std::to_string(end) + ")";
}

// "instructions 3..7 (aten::add.out .. aten::mm.out)", "instruction 3 (aten::add.out)"
std::string RunText(const efb::Program& p, const MethodLifetimes& m, const LiveRun& r) {
  std::string s = r.last != r.first ? "instructions " + std::to_string(r.first) + ".." + std::to_string(r.last)
                                    : "instruction " + std::to_string(r.first);
  s += " (" + InstructionLabel(p, m, r.first);
  if (r.last != r.first) s += " .. " + InstructionLabel(p, m, r.last);
  return s + ")";
}

const void* AllocationOf(const MethodLifetimes& m, uint32_t value) {
  const PlannedTensor* t = m.Tensor(value);
  if (!t) return nullptr;
  return t->tensor->allocation_info() ? static_cast<const void*>(t->tensor->allocation_info())
                                      : static_cast<const void*>(t->tensor);
}

std::string Prefix(const MethodLifetimes& m) { return "method " + Quote(m.name) + ": "; }

// The first instructions at which both storages are live for a reason other
// than one MoveCall/et_view target that may point at either (alternatives:
// on every path it points at one of them), or nullopt.
std::optional<LiveRun> Conflict(const MethodLifetimes& m, const PlanStorage& a, const PlanStorage& b) {
  struct Reason {
    LiveRun run;
    int side;        // 0: a, 1: b
    int64_t target;  // -1: direct
  };
  std::vector<Reason> rs;
  std::vector<uint64_t> cuts;
  auto add = [&](const PlanStorage& s, int side) {
    for (const LiveRun& r : m.Direct(s)) rs.push_back({r, side, -1});
    for (const auto& [t, runs] : m.Through(s)) {
      for (const LiveRun& r : runs) rs.push_back({r, side, t});
    }
  };
  add(a, 0);
  add(b, 1);
  for (const Reason& r : rs) {
    cuts.push_back(r.run.first);
    cuts.push_back(uint64_t{r.run.last} + 1);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::optional<LiveRun> found;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    const uint64_t lo = cuts[k], hi = cuts[k + 1] - 1;  // an elementary piece: the same reasons throughout
    bool live[2] = {false, false};
    bool direct[2] = {false, false};
    std::set<int64_t> targets[2];
    for (const Reason& r : rs) {
      if (r.run.first > lo || r.run.last < lo) continue;
      live[r.side] = true;
      if (r.target < 0) {
        direct[r.side] = true;
      } else {
        targets[r.side].insert(r.target);
      }
    }
    const bool alternatives = !direct[0] && !direct[1] && targets[0].size() == 1 && targets[0] == targets[1];
    const bool conflict = live[0] && live[1] && !alternatives;
    if (conflict && !found) {
      found = LiveRun{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)};
    } else if (conflict && found && found->last + 1 == lo) {
      found->last = static_cast<uint32_t>(hi);
    } else if (found) {
      break;
    }
  }
  return found;
}

// The run of `s` that holds instruction i.
LiveRun RunAt(const PlanStorage& s, uint32_t i) {
  for (const LiveRun& r : s.live) {
    if (r.first <= i && i <= r.last) return r;
  }
  return {i, i};
}

// What the overlap check reuses from method to method.
struct OverlapScratch {
  std::vector<uint32_t> storages;  // live, nonempty, by buffer
  std::vector<PlanBlock> blocks;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> owner;  // the storage of each block
  std::vector<PlanOverlap> pairs;
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  std::vector<PlanConflict> conflicts;
};

bool BytesMeet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
  const uint64_t ae = a + an < a ? UINT64_MAX : a + an;
  const uint64_t be = b + bn < b ? UINT64_MAX : b + bn;
  return an > 0 && bn > 0 && a < be && b < ae;
}

// Buffers with at most this many live runs are checked pair by pair (the
// definition FindPlanOverlaps implements), without its allocations.
constexpr size_t kPairwiseBlocks = 16;

// The conflicts of one method (at most `limit`, in buffer then storage
// order) into `out`; true when there were more.
bool CollectConflicts(const MethodLifetimes& m, size_t limit, OverlapScratch& sc, std::vector<PlanConflict>& out) {
  sc.storages.clear();
  for (uint32_t s = 0; s < m.storages.size(); ++s) {
    if (!m.storages[s].live.empty() && m.storages[s].nbytes > 0) sc.storages.push_back(s);
  }
  bool one_buffer = true;
  for (uint32_t s : sc.storages)
    one_buffer = one_buffer && m.storages[s].memory_id == m.storages[sc.storages[0]].memory_id;
  if (!one_buffer) {
    std::sort(sc.storages.begin(), sc.storages.end(), [&](uint32_t a, uint32_t b) {
      return std::make_pair(m.storages[a].memory_id, a) < std::make_pair(m.storages[b].memory_id, b);
    });
  }
  bool over = false;
  for (size_t x = 0; x < sc.storages.size();) {
    const uint32_t mid = m.storages[sc.storages[x]].memory_id;
    size_t y = x;
    while (y < sc.storages.size() && m.storages[sc.storages[y]].memory_id == mid) ++y;
    // One block per live run.
    sc.blocks.clear();
    sc.offsets.clear();
    sc.owner.clear();
    for (size_t k = x; k < y; ++k) {
      const uint32_t s = sc.storages[k];
      const PlanStorage& st = m.storages[s];
      for (const LiveRun& r : st.live) {
        PlanBlock b;
        b.size = st.nbytes;
        b.first = r.first;
        b.last = r.last;
        sc.blocks.push_back(b);
        sc.offsets.push_back(st.offset);
        sc.owner.push_back(s);
      }
    }
    x = y;
    sc.pairs.clear();
    if (sc.blocks.size() <= kPairwiseBlocks) {
      for (size_t i = 0; i < sc.blocks.size(); ++i) {
        for (size_t j = i + 1; j < sc.blocks.size(); ++j) {
          const PlanBlock &a = sc.blocks[i], &b = sc.blocks[j];
          if (a.first <= b.last && b.first <= a.last && BytesMeet(sc.offsets[i], a.size, sc.offsets[j], b.size)) {
            sc.pairs.push_back({i, j});
          }
        }
      }
    } else {
      sc.pairs = FindPlanOverlaps(sc.blocks, sc.offsets, 1000);
      over = over || sc.pairs.size() >= 1000;
    }
    sc.seen.clear();
    for (const PlanOverlap& o : sc.pairs) {
      uint32_t sa = sc.owner[o.a], sb = sc.owner[o.b];
      if (sa == sb) continue;
      if (sa > sb) std::swap(sa, sb);
      if (std::find(sc.seen.begin(), sc.seen.end(), std::make_pair(sa, sb)) != sc.seen.end()) continue;
      sc.seen.emplace_back(sa, sb);
      const std::optional<LiveRun> c = Conflict(m, m.storages[sa], m.storages[sb]);
      if (!c) continue;
      if (out.size() >= limit) {
        over = true;
        continue;
      }
      out.push_back({sa, sb, *c});
    }
  }
  return over;
}

// Two storages of one method that share bytes while both are live.
void CheckOverlaps(const Where& w, const efb::Program& p, const MethodLifetimes& m, OverlapScratch& sc) {
  sc.conflicts.clear();
  const bool more = CollectConflicts(m, kMaxOverlapsPerMethod, sc, sc.conflicts);
  for (const PlanConflict& c : sc.conflicts) {
    const PlanStorage& a = m.storages[c.a];
    const PlanStorage& b = m.storages[c.b];
    const LiveRun x = RunAt(a, c.both.first);
    const LiveRun y = RunAt(b, c.both.first);
    const LiveRun both = c.both;
    const uint64_t lo = std::max(a.offset, b.offset);
    const uint64_t hi = std::min(a.offset + a.nbytes, b.offset + b.nbytes);
    // Locate at the one that comes alive later (the one placed onto bytes in use).
    const PlanStorage& later = (y.first > x.first || (y.first == x.first && c.b > c.a)) ? b : a;
    w.r.Error("plan-overlap",
              Prefix(m) + DescribeStorage(m, a) + " and " + DescribeStorage(m, b) + " share bytes " +
                  Bytes(lo, hi - lo) + " of planned buffer " + std::to_string(a.memory_id) +
                  " while both are live: the first uses bytes " + Bytes(a.offset, a.nbytes) + " over " +
                  RunText(p, m, x) + ", the second uses bytes " + Bytes(b.offset, b.nbytes) + " over " +
                  RunText(p, m, y),
              w.at(AllocationOf(m, later.values.front())), "disjoint bytes or disjoint lifetimes",
              both.last != both.first
                  ? "both live at instructions " + std::to_string(both.first) + ".." + std::to_string(both.last)
                  : "both live at instruction " + std::to_string(both.first));
  }
  if (more) {
    w.r.Error("plan-overlap",
              Prefix(m) + "more pairs of tensors share bytes of a planned buffer while both are live than are listed",
              w.at(&*p.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(m.plan_index))),
              "disjoint bytes or disjoint lifetimes", "more than " + std::to_string(sc.conflicts.size()) + " pairs");
  }
}

// A method's lifetimes, derived again for the text of a finding.
using LifetimesOf = std::function<const MethodLifetimes&(size_t method)>;

// The text (DescribeStorage) of each entry a finding names, "" for the rest:
// built only when something is reported, one method's lifetimes at a time.
std::vector<std::string> EntryTexts(const std::vector<StateBufferEntry>& entries, std::vector<size_t> named,
                                    const LifetimesOf& lifetimes) {
  std::vector<std::string> text(entries.size());
  std::sort(named.begin(), named.end());  // entries are in method order
  const MethodLifetimes* m = nullptr;
  size_t method = 0;
  for (size_t k : named) {
    const StateBufferEntry& e = entries[k];
    if (!m || e.method != method) {
      method = e.method;
      m = &lifetimes(method);
    }
    if (text[k].empty()) text[k] = DescribeStorage(*m, m->storages[e.storage]);
  }
  return text;
}

// State several methods keep in one buffer (share_mutable_buffers;
// exir/passes/memory_planning_pass.py run_multimethod gives every spec of one
// name memory_id 2 and the same offset): the same state at the same bytes in
// every method, and nothing of one method on another's state
// (AnalyzeSharedState finds both; this says them).
void CheckSharedState(const Where& w, const efb::Program& p, const std::vector<StateBufferEntry>& entries,
                      const LifetimesOf& lifetimes) {
  const SharedStateAnalysis a = AnalyzeSharedState(entries, kMaxOverlapsPerMethod);
  std::vector<size_t> named;
  for (const SharedStateAnalysis::Mismatch& mm : a.mismatches) {
    named.push_back(mm.entry);
    named.push_back(mm.reference);
  }
  for (const SharedStateAnalysis::Overlap& o : a.overlaps) {
    named.push_back(o.entry);
    named.push_back(o.state);
  }
  const std::vector<std::string> text =
      named.empty() ? std::vector<std::string>() : EntryTexts(entries, std::move(named), lifetimes);
  auto method_name = [&](size_t m) {
    const auto* plan = p.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(m));
    return Quote(plan->name() ? plan->name()->str() : "");
  };
  auto at = [](const StateBufferEntry& e) {
    return "bytes " + Bytes(e.offset, e.nbytes) + " of planned buffer " + std::to_string(e.memory_id);
  };
  for (const SharedStateAnalysis::Mismatch& mm : a.mismatches) {
    const StateBufferEntry& e = entries[mm.entry];
    const StateBufferEntry& f = entries[mm.reference];
    const std::string where_found = e.memory_id == f.memory_id ? Bytes(e.offset, e.nbytes) : at(e);
    const std::string where_expected = e.memory_id == f.memory_id ? Bytes(f.offset, f.nbytes) : at(f);
    std::string msg;
    if (!e.name.empty() && e.name == f.name) {
      msg = "method " + method_name(e.method) + ": state " + Quote(e.name) + " is at " + at(e) + ", but at " + at(f) +
            " in method " + method_name(f.method) + "; the methods keep their state in planned buffer " +
            std::to_string(f.memory_id) +
            " together (share_mutable_buffers), so they would not read and write the same bytes";
    } else {
      msg = "method " + method_name(e.method) + ": state " + text[mm.entry] + " is at " + at(e) + ", but method " +
            method_name(f.method) + " keeps state with the same initial data and size, " + text[mm.reference] +
            ", at " + at(f) +
            ", a buffer the methods share (share_mutable_buffers puts every mutable buffer there), where " +
            method_name(e.method) + " keeps none: " + method_name(e.method) + " would read its own copy, never what " +
            method_name(f.method) + " writes";
    }
    w.r.Error("plan-shared-state-mismatch", msg, w.at(e.where), where_expected, where_found);
  }
  for (const SharedStateAnalysis::Overlap& o : a.overlaps) {
    const StateBufferEntry& x = entries[o.entry];
    const StateBufferEntry& s = entries[o.state];
    w.r.Error("plan-overlap",
              "method " + method_name(x.method) + ": " + text[o.entry] + " uses bytes " + Bytes(x.offset, x.nbytes) +
                  " of planned buffer " + std::to_string(x.memory_id) + ", which hold state " + text[o.state] +
                  " of method " + method_name(s.method) + " (bytes " + Bytes(s.offset, s.nbytes) +
                  ") between calls: the methods keep their state in that buffer together "
                  "(share_mutable_buffers), so running " +
                  method_name(x.method) + " overwrites it",
              w.at(x.where), "bytes no other method's state uses",
              "overlap with " + method_name(s.method) + "'s state");
  }
  if (a.more_overlaps) {
    w.r.Error("plan-overlap",
              "more tensors share bytes with another method's state in a shared planned buffer than are listed",
              w.at(entries[a.overlaps.back().entry].where), "bytes no other method's state uses",
              "more than " + std::to_string(a.overlaps.size()));
  }
  if (a.not_checked) {
    w.r.Warn("plan-not-checked",
             "state several methods share: not checked completely (more state than the check's limits)",
             w.at(p.execution_plan()), "state checked across methods", "stopped at the limit");
  }
}

// One method: what the model found, what it could not derive, overlaps.
void CheckMethod(const Where& w, const efb::Program& program, const MethodLifetimes& m, OverlapScratch& sc) {
  for (const PlanProblem& pr : m.problems) {
    w.r.Error(pr.code, Prefix(m) + pr.message, pr.where ? std::optional<uint64_t>(w.at(pr.where)) : std::nullopt,
              pr.expected, pr.found);
  }
  if (!m.not_checked.empty()) {
    w.r.Warn("plan-not-checked", Prefix(m) + "memory plan not checked: " + m.not_checked,
             w.at(&*program.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(m.plan_index))),
             "lifetimes derived from the program", "not derived");
    return;
  }
  if (!m.blocked) CheckOverlaps(w, program, m, sc);
}

}  // namespace

std::vector<PlanConflict> FindPlanConflicts(const MethodLifetimes& m, size_t limit, bool* more) {
  OverlapScratch sc;
  std::vector<PlanConflict> out;
  const bool over = CollectConflicts(m, limit, sc, out);
  if (more) *more = over;
  return out;
}

void CheckMemoryPlan(const Where& w, const efb::Program& program, const ProgramLifetimes& lt) {
  OverlapScratch sc;
  std::vector<StateBufferEntry> entries;
  for (size_t k = 0; k < lt.methods.size(); ++k) {
    CheckMethod(w, program, lt.methods[k], sc);
    AddStateBufferEntries(lt.methods[k], k, entries, /*persistent_only=*/lt.methods.size() == 1);
  }
  if (!entries.empty()) {
    CheckSharedState(w, program, entries, [&](size_t method) -> const MethodLifetimes& { return lt.methods[method]; });
  }
}

// One method at a time: its lifetimes are dropped once checked; what shared
// state needs is kept in `entries` (nothing for methods without state).
void CheckMemoryPlan(const Where& w, const efb::Program& program) {
  const auto* plans = program.execution_plan();
  if (!plans) return;
  MethodLifetimesDeriver d(program, /*detail=*/false);
  OverlapScratch sc;
  std::vector<StateBufferEntry> entries;
  for (size_t k = 0; k < plans->size(); ++k) {
    const MethodLifetimes& m = d.Derive(k);
    CheckMethod(w, program, m, sc);
    AddStateBufferEntries(m, k, entries, /*persistent_only=*/plans->size() == 1);
  }
  // A finding's text derives its methods again (the same lifetimes: nothing
  // of the first pass is kept for it).
  if (!entries.empty()) {
    CheckSharedState(w, program, entries, [&](size_t method) -> const MethodLifetimes& { return d.Derive(method); });
  }
}

}  // namespace ptepack
