#include "serialize/read/plan_checks.h"

#include <algorithm>
#include <cstdlib>
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

// "values[3] (FLOAT[2]) with its view values[9], also used through values[12]"
std::string StorageText(const MethodLifetimes& m, const PlanStorage& s) {
  std::string t = DescribePlannedValue(m, s.values.front());
  for (size_t i = 1; i < s.values.size(); ++i) {
    const PlannedTensor* v = m.Tensor(s.values[i]);
    t += (i == 1 ? " with " : ", ");
    t += v && v->origin == PlanOrigin::kView ? "its view " : "";
    t += "values[" + std::to_string(s.values[i]) + "]";
  }
  if (!s.pointed_by.empty()) {
    t += ", also used through";
    for (size_t i = 0; i < s.pointed_by.size(); ++i) {
      t += (i ? ", " : " ") + std::string("values[") + std::to_string(s.pointed_by[i]) + "]";
    }
    t += " (MoveCall/et_view)";
  }
  return t;
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
std::optional<LiveRun> Conflict(const PlanStorage& a, const PlanStorage& b) {
  struct Reason {
    LiveRun run;
    int side;        // 0: a, 1: b
    int64_t target;  // -1: direct
  };
  std::vector<Reason> rs;
  std::vector<uint64_t> cuts;
  auto add = [&](const PlanStorage& s, int side) {
    for (const LiveRun& r : s.direct) rs.push_back({r, side, -1});
    for (const auto& [t, runs] : s.through) {
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

// Two storages of one method that share bytes while both are live.
void CheckOverlaps(const Where& w, const efb::Program& p, const MethodLifetimes& m) {
  bool more = false;
  const std::vector<PlanConflict> conflicts = FindPlanConflicts(m, kMaxOverlapsPerMethod, &more);
  for (const PlanConflict& c : conflicts) {
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
              Prefix(m) + StorageText(m, a) + " and " + StorageText(m, b) + " share bytes " + Bytes(lo, hi - lo) +
                  " of planned buffer " + std::to_string(a.memory_id) + " while both are live: the first uses bytes " +
                  Bytes(a.offset, a.nbytes) + " over " + RunText(p, m, x) + ", the second uses bytes " +
                  Bytes(b.offset, b.nbytes) + " over " + RunText(p, m, y),
              w.at(AllocationOf(m, later.values.front())), "disjoint bytes or disjoint lifetimes",
              both.last != both.first
                  ? "both live at instructions " + std::to_string(both.first) + ".." + std::to_string(both.last)
                  : "both live at instruction " + std::to_string(both.first));
  }
  if (more) {
    w.r.Error("plan-overlap",
              Prefix(m) + "more pairs of tensors share bytes of a planned buffer while both are live than are listed",
              w.at(&*p.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(m.plan_index))),
              "disjoint bytes or disjoint lifetimes", "more than " + std::to_string(conflicts.size()) + " pairs");
  }
}

std::string Identity(const MethodLifetimes& m, const PlanStorage& s) {
  const PlannedTensor* t = m.Tensor(s.values.front());
  const auto* eti = t ? t->tensor->extra_tensor_info() : nullptr;
  if (eti && eti->fully_qualified_name() && eti->fully_qualified_name()->size()) {
    return eti->fully_qualified_name()->str();
  }
  return "@" + std::to_string(s.offset) + "+" + std::to_string(s.nbytes);
}

// State several methods keep in one buffer (share_mutable_buffers;
// exir/passes/memory_planning_pass.py run_multimethod gives every spec of one
// name the same mem_id and offset): the same state at the same bytes in every
// method, and nothing of one method on another's state.
void CheckSharedState(const Where& w, const efb::Program& /*p*/, const ProgramLifetimes& lt) {
  std::map<uint32_t, std::set<size_t>> participants;
  for (const SharedState& sh : lt.shared) {
    for (const auto& u : sh.uses) participants[sh.memory_id].insert(u.method);
    const auto& first = sh.uses.front();
    const PlanStorage& a = lt.methods[first.method].storages[first.storage];
    for (size_t k = 1; k < sh.uses.size(); ++k) {
      const MethodLifetimes& mb = lt.methods[sh.uses[k].method];
      const PlanStorage& b = mb.storages[sh.uses[k].storage];
      if (a.offset == b.offset && a.nbytes == b.nbytes) continue;
      w.r.Error("plan-shared-state-mismatch",
                Prefix(mb) + "state " + (sh.name.empty() ? StorageText(mb, b) : Quote(sh.name)) + " is at bytes " +
                    Bytes(b.offset, b.nbytes) + " of planned buffer " + std::to_string(sh.memory_id) +
                    ", but at bytes " + Bytes(a.offset, a.nbytes) + " in method " +
                    Quote(lt.methods[first.method].name) +
                    "; the methods keep their state in that buffer together (share_mutable_buffers), so each would "
                    "read the other's bytes",
                w.at(AllocationOf(mb, b.values.front())), Bytes(a.offset, a.nbytes), Bytes(b.offset, b.nbytes));
    }
  }
  size_t reported = 0;
  for (const auto& [mid, methods] : participants) {
    struct Persistent {
      size_t method;
      uint32_t storage;
    };
    std::vector<Persistent> state;
    for (size_t mi : methods) {
      const MethodLifetimes& m = lt.methods[mi];
      for (uint32_t s = 0; s < m.storages.size(); ++s) {
        if (m.storages[s].memory_id == mid && m.storages[s].persistent) state.push_back({mi, s});
      }
    }
    for (size_t mi : methods) {
      const MethodLifetimes& m = lt.methods[mi];
      for (uint32_t s = 0; s < m.storages.size() && reported < kMaxOverlapsPerMethod; ++s) {
        const PlanStorage& a = m.storages[s];
        if (a.memory_id != mid || a.nbytes == 0 || (a.live.empty() && !a.persistent)) continue;
        for (const Persistent& q : state) {
          if (q.method == mi) continue;
          const MethodLifetimes& mo = lt.methods[q.method];
          const PlanStorage& b = mo.storages[q.storage];
          if (b.nbytes == 0 || !(a.offset < b.offset + b.nbytes && b.offset < a.offset + a.nbytes)) continue;
          if (a.persistent && Identity(m, a) == Identity(mo, b)) continue;  // the same state (or a mismatch, above)
          ++reported;
          w.r.Error("plan-overlap",
                    Prefix(m) + StorageText(m, a) + " uses bytes " + Bytes(a.offset, a.nbytes) + " of planned buffer " +
                        std::to_string(mid) + ", which hold state " + StorageText(mo, b) + " of method " +
                        Quote(mo.name) + " (bytes " + Bytes(b.offset, b.nbytes) +
                        ") between calls: the methods keep their state in that buffer together "
                        "(share_mutable_buffers), so running " +
                        Quote(m.name) + " overwrites it",
                    w.at(AllocationOf(m, a.values.front())), "bytes no other method's state uses",
                    "overlap with " + Quote(mo.name) + "'s state");
          break;
        }
      }
    }
  }
}

}  // namespace

std::vector<PlanConflict> FindPlanConflicts(const MethodLifetimes& m, size_t limit, bool* more) {
  std::vector<PlanConflict> out;
  bool over = false;
  std::map<uint32_t, std::vector<uint32_t>> by_buffer;
  for (uint32_t s = 0; s < m.storages.size(); ++s) {
    if (!m.storages[s].live.empty() && m.storages[s].nbytes > 0) by_buffer[m.storages[s].memory_id].push_back(s);
  }
  for (const auto& [mid, storages] : by_buffer) {
    // One block per live run.
    std::vector<PlanBlock> blocks;
    std::vector<uint64_t> offsets;
    std::vector<uint32_t> owner;  // the storage of each block
    for (uint32_t s : storages) {
      const PlanStorage& st = m.storages[s];
      for (size_t r = 0; r < st.live.size(); ++r) {
        PlanBlock b;
        b.size = st.nbytes;
        b.first = st.live[r].first;
        b.last = st.live[r].last;
        blocks.push_back(b);
        offsets.push_back(st.offset);
        owner.push_back(s);
      }
    }
    const auto pairs = FindPlanOverlaps(blocks, offsets, 1000);
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (const PlanOverlap& o : pairs) {
      uint32_t sa = owner[o.a], sb = owner[o.b];
      if (sa == sb) continue;
      if (sa > sb) std::swap(sa, sb);
      if (!seen.insert({sa, sb}).second) continue;
      const std::optional<LiveRun> c = Conflict(m.storages[sa], m.storages[sb]);
      if (!c) continue;
      if (out.size() >= limit) {
        over = true;
        continue;
      }
      out.push_back({sa, sb, *c});
    }
    if (pairs.size() >= 1000) over = true;
  }
  if (more) *more = over;
  return out;
}

void CheckMemoryPlan(const Where& w, const efb::Program& program, const ProgramLifetimes& lt) {
  for (const MethodLifetimes& m : lt.methods) {
    for (const PlanProblem& pr : m.problems) {
      w.r.Error(pr.code, Prefix(m) + pr.message, pr.where ? std::optional<uint64_t>(w.at(pr.where)) : std::nullopt,
                pr.expected, pr.found);
    }
    if (!m.not_checked.empty()) {
      w.r.Warn("plan-not-checked", Prefix(m) + "memory plan not checked: " + m.not_checked,
               w.at(&*program.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(m.plan_index))),
               "lifetimes derived from the program", "not derived");
      continue;
    }
    if (m.blocked) continue;
    CheckOverlaps(w, program, m);
  }
  CheckSharedState(w, program, lt);
}

void CheckMemoryPlan(const Where& w, const efb::Program& program) {
  CheckMemoryPlan(w, program, DeriveLifetimes(program));
}

}  // namespace ptepack
