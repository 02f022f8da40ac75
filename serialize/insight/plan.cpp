// The memory plan report and re-plan (see plan.h).
#include "serialize/insight/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "layout/alignment.h"
#include "ptepack/error.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

uint64_t Saturate(unsigned __int128 v) { return v > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(v); }

unsigned __int128 Aligned(uint64_t n, uint64_t alignment) {
  return (static_cast<unsigned __int128>(n) + alignment - 1) / alignment * alignment;
}

// The first instruction where the aligned bytes alive reach their maximum.
struct Peak {
  std::optional<uint32_t> instruction;
  uint64_t bytes = 0;
};

Peak FindPeak(const std::vector<PlanBlock>& blocks, uint64_t alignment) {
  std::vector<std::pair<uint64_t, unsigned __int128>> up, down;  // (time, bytes)
  for (const PlanBlock& b : blocks) {
    if (b.size == 0) continue;
    up.emplace_back(b.first, Aligned(b.size, alignment));
    down.emplace_back(uint64_t{b.last} + 1, Aligned(b.size, alignment));
  }
  if (up.empty()) return {};
  auto by_time = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::sort(up.begin(), up.end(), by_time);
  std::sort(down.begin(), down.end(), by_time);
  unsigned __int128 live = 0, best = 0;
  uint64_t best_at = 0;
  size_t i = 0, j = 0;
  while (i < up.size()) {
    const uint64_t t = std::min(up[i].first, j < down.size() ? down[j].first : UINT64_MAX);
    while (j < down.size() && down[j].first == t) live -= down[j++].second;
    while (i < up.size() && up[i].first == t) live += up[i++].second;
    if (live > best) best = live, best_at = t;
  }
  return {static_cast<uint32_t>(best_at), Saturate(best)};
}

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// The storage's values as `verify` names them: the first, then its views.
std::string StorageText(const MethodLifetimes& m, const PlanStorage& s) {
  std::string t = DescribePlannedValue(m, s.values.front());
  for (size_t i = 1; i < s.values.size(); ++i) {
    t += (i == 1 ? " with view " : ", ") + std::string("values[") + std::to_string(s.values[i]) + "]";
  }
  return t;
}

// A state's identity across methods (as plan_checks.cpp's CheckSharedState
// tells them apart): its name, or its bytes when unnamed.
std::string StateIdentity(const MethodLifetimes& m, const PlanStorage& s) {
  const PlannedTensor* t = m.Tensor(s.values.front());
  const auto* eti = t ? t->tensor->extra_tensor_info() : nullptr;
  if (eti && eti->fully_qualified_name() && eti->fully_qualified_name()->size()) {
    return eti->fully_qualified_name()->str();
  }
  return "@" + std::to_string(s.offset) + "+" + std::to_string(s.nbytes);
}

class Planner {
 public:
  Planner(const PteFile& pte, const PlanReportOptions& o) : pte_(pte), p_(*pte.program()), o_(o) {}

  PlanReport Run() {
    PlanReport r;
    r.file = pte_.name();
    r.chosen = o_.chosen;
    r.alignment = o_.alignment;
    r.planners_run = o_.run_planners;
    lt_ = DeriveLifetimes(p_);
    const std::vector<MethodPlanView> views = PlanViews(p_, lt_);
    for (const SharedState& sh : lt_.shared) {
      for (const auto& u : sh.uses) shared_[sh.memory_id].insert(u.method);
    }
    for (const MethodPlanView& v : views) {
      r.methods.push_back(Method(v));
      r.size_now += r.methods.back().size_now;
      r.lower_bound += r.methods.back().lower_bound;
      r.planned += r.methods.back().planned;
    }
    return r;
  }

 private:
  MethodPlan Method(const MethodPlanView& v) {
    const MethodLifetimes& ml = lt_.methods[v.method];
    const efb::ExecutionPlan* plan = p_.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(v.method));
    MethodPlan mp;
    mp.index = v.method;
    mp.name = v.name;
    mp.not_checked = v.not_checked;
    mp.planned_tensors = ml.tensors.size();
    mp.file_offset = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(plan) - pte_.file().data);
    if (const auto* ncbs = plan->non_const_buffer_sizes()) {
      for (flatbuffers::uoffset_t i = 0; i < ncbs->size(); ++i) {
        mp.new_buffer_sizes.push_back(ncbs->Get(i));
        if (i > 0) mp.size_now += static_cast<uint64_t>(std::max<int64_t>(0, ncbs->Get(i)));
      }
    }
    mp.planned = mp.size_now;
    if (!mp.not_checked.empty()) {
      mp.new_buffer_sizes.clear();
      return mp;
    }
    for (const PlanBufferView& b : v.buffers) {
      BufferPlan bp = Buffer(ml, v.method, b);
      mp.lower_bound += bp.lower_bound;
      const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(0, bp.size_now));
      mp.planned = mp.planned - std::min(mp.planned, now) + bp.planned_size;
      if (b.memory_id < mp.new_buffer_sizes.size()) {
        mp.new_buffer_sizes[b.memory_id] = static_cast<int64_t>(bp.planned_size);
      }
      NewOffsets(ml, b, bp, &mp.new_offsets);
      mp.buffers.push_back(std::move(bp));
    }
    std::sort(mp.new_offsets.begin(), mp.new_offsets.end());
    return mp;
  }

  // Every planned value of the buffer at its new offset: a block's values
  // together; an idle value where it is if it still fits the buffer, else at 0
  // (nothing reads or writes its bytes; the runtime only checks its bounds).
  void NewOffsets(const MethodLifetimes& ml, const PlanBufferView& b, const BufferPlan& bp,
                  std::vector<std::pair<uint32_t, uint64_t>>* out) {
    for (size_t i = 0; i < b.blocks.size(); ++i) {
      for (uint32_t value : ml.storages[b.block_storage[i]].values) out->emplace_back(value, bp.chosen_offsets[i]);
    }
    for (uint32_t value : b.idle_values) {
      const PlannedTensor* t = ml.Tensor(value);
      const bool fits = t->offset <= bp.planned_size && t->nbytes <= bp.planned_size - t->offset;
      out->emplace_back(value, fits ? t->offset : 0);
    }
  }

  BufferPlan Buffer(const MethodLifetimes& ml, size_t method, const PlanBufferView& b) {
    BufferPlan bp;
    bp.memory_id = b.memory_id;
    bp.device_type = b.device_type;
    bp.size_now = b.size;
    bp.used_now = b.used_end;
    bp.alignment = o_.alignment.value_or(b.alignment);
    bp.blocks = b.blocks.size();
    bp.idle_values = b.idle_values.size();
    bp.chosen = o_.chosen;
    for (const PlannedTensor& t : ml.tensors) bp.tensors += t.memory_id == b.memory_id;
    for (uint32_t value : b.idle_values) bp.idle_max = std::max(bp.idle_max, ml.Tensor(value)->nbytes);

    std::vector<PlanBlock> blocks = b.blocks;
    std::vector<uint64_t> offsets = b.offsets;
    SharedBuffer(ml, method, b, &blocks, &offsets);
    for (const PlanBlock& blk : blocks) bp.fixed_blocks += blk.fixed_offset.has_value();

    bp.lower_bound = std::max(PlanLowerBound(blocks, bp.alignment), bp.idle_max);
    const Peak peak = FindPeak(blocks, bp.alignment);
    bp.peak_instruction = peak.instruction;
    bp.peak_bytes = peak.bytes;
    if (peak.instruction) {
      bp.peak_label = InstructionLabel(p_, ml, *peak.instruction);
      for (size_t i = 0; i < blocks.size(); ++i) {
        const PlanBlock& blk = blocks[i];
        if (blk.size == 0 || blk.first > *peak.instruction || blk.last < *peak.instruction) continue;
        PlanPeakValue pv;
        pv.bytes = Saturate(Aligned(blk.size, bp.alignment));
        pv.interval = {blk.first, blk.last};
        pv.fixed = blk.fixed_offset.has_value();
        if (i < b.blocks.size()) {
          const PlanStorage& st = ml.storages[b.block_storage[i]];
          pv.value = st.values.front();
          pv.description = StorageText(ml, st);
        } else {
          pv.value = extra_values_[i - b.blocks.size()].first;
          pv.description = extra_values_[i - b.blocks.size()].second;
        }
        bp.peak_values.push_back(std::move(pv));
      }
      std::stable_sort(bp.peak_values.begin(), bp.peak_values.end(),
                       [](const PlanPeakValue& x, const PlanPeakValue& y) { return x.bytes > y.bytes; });
    }

    const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(0, b.size));
    bp.kept_input = true;
    bp.planned_size = now;
    bp.chosen_offsets.assign(b.offsets.begin(), b.offsets.end());
    if (!o_.run_planners || b.blocks.empty()) return bp;

    std::vector<PlanAlgorithm> algos = o_.algorithms;
    if (std::find(algos.begin(), algos.end(), o_.chosen) == algos.end()) algos.push_back(o_.chosen);
    for (PlanAlgorithm a : algos) {
      PlanAlgorithmResult res = Place(blocks, offsets, bp.alignment, a);
      res.size = std::max(res.size, bp.idle_max);
      if (a == PlanAlgorithm::kExecutorchGreedy) GreedyAgainstInput(ml, b, blocks, offsets, res, &bp);
      if (a == o_.chosen && (!o_.keep_input_unless_smaller || res.size < now)) {
        bp.kept_input = false;
        bp.planned_size = res.size;
        bp.chosen_offsets.assign(res.offsets.begin(), res.offsets.begin() + static_cast<long>(b.blocks.size()));
      }
      if (std::find(o_.algorithms.begin(), o_.algorithms.end(), a) != o_.algorithms.end()) {
        bp.algorithms.push_back(std::move(res));
      }
    }
    return bp;
  }

  // ExecuTorch's greedy takes ties in an order the file does not record
  // (PlanOptions::reverse_ties): the order that reproduces the input, where
  // one does.
  PlanAlgorithmResult Place(const std::vector<PlanBlock>& blocks, const std::vector<uint64_t>& offsets,
                            uint64_t alignment, PlanAlgorithm a) {
    PlanAlgorithmResult res;
    res.algorithm = a;
    PlanOptions po = o_.planner;
    PlanPlacement pl = PlanMemory(blocks, alignment, a, po);
    res.reverse_ties = po.reverse_ties;
    if (a == PlanAlgorithm::kExecutorchGreedy && pl.offsets != offsets) {
      po.reverse_ties = !po.reverse_ties;
      PlanPlacement other = PlanMemory(blocks, alignment, a, po);
      if (other.offsets == offsets) {
        pl = std::move(other);
        res.reverse_ties = po.reverse_ties;
      }
    }
    res.size = pl.size;
    res.optimal = pl.optimal;
    res.offsets = std::move(pl.offsets);
    return res;
  }

  void GreedyAgainstInput(const MethodLifetimes& ml, const PlanBufferView& b, const std::vector<PlanBlock>& blocks,
                          const std::vector<uint64_t>& offsets, const PlanAlgorithmResult& res, BufferPlan* bp) {
    bp->greedy_reproduces = res.offsets == offsets;
    if (*bp->greedy_reproduces) return;
    // Greedy places the largest first: the largest block it places elsewhere.
    std::vector<size_t> order(blocks.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return Aligned(blocks[x].size, 16) > Aligned(blocks[y].size, 16); });
    if (res.reverse_ties) {
      // Among equal sizes the block given last goes first.
      for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j < order.size() && Aligned(blocks[order[j]].size, 16) == Aligned(blocks[order[i]].size, 16)) ++j;
        std::reverse(order.begin() + static_cast<long>(i), order.begin() + static_cast<long>(j));
        i = j;
      }
    }
    for (size_t i : order) {
      if (res.offsets[i] == offsets[i]) continue;
      const std::string what = i < b.blocks.size() ? StorageText(ml, ml.storages[b.block_storage[i]])
                                                   : extra_values_[i - b.blocks.size()].second;
      bp->greedy_first_difference = what + ", " + Thousands(blocks[i].size) + " bytes live at instructions " +
                                    std::to_string(blocks[i].first) + ".." + std::to_string(blocks[i].last) +
                                    ": offset " + std::to_string(offsets[i]) + " in the input, " +
                                    std::to_string(res.offsets[i]) + " by executorch-greedy";
      return;
    }
  }

  // A buffer several methods share (share_mutable_buffers): every state in it
  // keeps its offset (the other methods' plans assume it), and the state the
  // other methods keep there is added as fixed blocks live throughout, so
  // that nothing of this method is placed over it between their calls.
  void SharedBuffer(const MethodLifetimes& ml, size_t method, const PlanBufferView& b, std::vector<PlanBlock>* blocks,
                    std::vector<uint64_t>* offsets) {
    extra_values_.clear();
    auto it = shared_.find(b.memory_id);
    if (it == shared_.end() || !it->second.count(method)) return;
    std::set<std::string> mine;
    for (size_t i = 0; i < b.blocks.size(); ++i) {
      const PlanStorage& st = ml.storages[b.block_storage[i]];
      if (!st.persistent) continue;
      (*blocks)[i].fixed_offset = st.offset;
      mine.insert(StateIdentity(ml, st));
    }
    const uint32_t last = ml.instruction_count > 0 ? ml.instruction_count - 1 : 0;
    std::set<std::tuple<uint64_t, uint64_t>> added;
    for (size_t q : it->second) {
      if (q == method) continue;
      const MethodLifetimes& mo = lt_.methods[q];
      for (const PlanStorage& st : mo.storages) {
        if (st.memory_id != b.memory_id || !st.persistent || st.nbytes == 0) continue;
        if (mine.count(StateIdentity(mo, st)) || !added.insert({st.offset, st.nbytes}).second) continue;
        PlanBlock blk;
        blk.size = st.nbytes;
        blk.first = 0;
        blk.last = last;
        blk.fixed_offset = st.offset;
        blocks->push_back(blk);
        offsets->push_back(st.offset);
        extra_values_.emplace_back(st.values.front(),
                                   "state " + StorageText(mo, st) + " of method \"" + mo.name + "\"");
      }
    }
  }

  const PteFile& pte_;
  const efb::Program& p_;
  const PlanReportOptions& o_;
  ProgramLifetimes lt_;
  std::map<uint32_t, std::set<size_t>> shared_;  // memory_id -> methods sharing state in it
  // The fixed blocks SharedBuffer added for the buffer at hand: (value, description).
  std::vector<std::pair<uint32_t, std::string>> extra_values_;
};

std::string DeviceName(uint32_t d) {
  const char* n = efb::EnumNameDeviceType(static_cast<efb::DeviceType>(d));
  return n && *n ? n : std::to_string(d);
}

nlohmann::json BufferJson(const BufferPlan& b) {
  nlohmann::json j;
  j["memory_id"] = b.memory_id;
  j["device"] = b.device_type ? nlohmann::json(DeviceName(*b.device_type)) : nlohmann::json(nullptr);
  j["size_now"] = b.size_now;
  j["used_now"] = b.used_now;
  j["alignment"] = b.alignment;
  j["lower_bound"] = b.lower_bound;
  j["above_lower_bound_percent"] =
      std::round(PercentAbove(static_cast<uint64_t>(std::max<int64_t>(0, b.size_now)), b.lower_bound) * 100) / 100;
  j["tensors"] = b.tensors;
  j["blocks"] = b.blocks;
  j["fixed"] = b.fixed_blocks;
  j["idle"] = b.idle_values;
  nlohmann::json sizes = nlohmann::json::object(), optimal = nlohmann::json::object();
  for (const auto& a : b.algorithms) {
    sizes[PlanAlgorithmName(a.algorithm)] = a.size;
    optimal[PlanAlgorithmName(a.algorithm)] = a.optimal || a.size == b.lower_bound;
  }
  j["sizes"] = sizes;
  j["optimal"] = optimal;
  j["algorithm"] = PlanAlgorithmName(b.chosen);
  j["planned"] = b.planned_size;
  j["kept_input"] = b.kept_input;
  if (b.greedy_reproduces) {
    bool reverse = false;
    for (const auto& a : b.algorithms)
      reverse = a.algorithm == PlanAlgorithm::kExecutorchGreedy ? a.reverse_ties : reverse;
    j["executorch_greedy"] = {
        {"reproduces_input", *b.greedy_reproduces},
        {"ties", reverse ? "reversed" : "as given"},
        {"first_difference",
         b.greedy_first_difference.empty() ? nlohmann::json(nullptr) : nlohmann::json(b.greedy_first_difference)}};
  } else {
    j["executorch_greedy"] = nullptr;
  }
  if (b.peak_instruction) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& v : b.peak_values) {
      values.push_back({{"value", v.value},
                        {"description", v.description},
                        {"bytes", v.bytes},
                        {"interval", {v.interval.first, v.interval.last}},
                        {"fixed", v.fixed}});
    }
    j["peak"] = {
        {"instruction", *b.peak_instruction}, {"operator", b.peak_label}, {"bytes", b.peak_bytes}, {"values", values}};
  } else {
    j["peak"] = nullptr;
  }
  return j;
}

}  // namespace

double PercentAbove(uint64_t now, uint64_t bound) {
  if (bound == 0 || now <= bound) return 0;
  return (static_cast<double>(now) - static_cast<double>(bound)) * 100.0 / static_cast<double>(bound);
}

PlanReport AnalyzePlan(const PteFile& pte, const PlanReportOptions& options) {
  if (!pte.program()) throw Error("flatbuffer-invalid", pte.name() + ": no verified program to plan");
  if (options.alignment && (*options.alignment == 0 || (*options.alignment & (*options.alignment - 1)) != 0)) {
    throw Error("plan-bad-alignment",
                "memory plan alignment " + std::to_string(*options.alignment) + " is not a power of two");
  }
  return Planner(pte, options).Run();
}

nlohmann::json PlanJson(const PlanReport& r) {
  nlohmann::json j;
  j["file"] = r.file;
  j["algorithm"] = PlanAlgorithmName(r.chosen);
  j["alignment"] = r.alignment ? nlohmann::json(*r.alignment) : nlohmann::json(nullptr);
  j["methods"] = nlohmann::json::array();
  for (const MethodPlan& m : r.methods) {
    nlohmann::json mj;
    mj["name"] = m.name;
    mj["not_checked"] = m.not_checked.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.not_checked);
    mj["size_now"] = m.size_now;
    mj["lower_bound"] = m.not_checked.empty() ? nlohmann::json(m.lower_bound) : nlohmann::json(nullptr);
    mj["planned"] = m.planned;
    mj["buffers"] = nlohmann::json::array();
    for (const BufferPlan& b : m.buffers) mj["buffers"].push_back(BufferJson(b));
    j["methods"].push_back(std::move(mj));
  }
  j["size_now"] = r.size_now;
  j["lower_bound"] = r.lower_bound;
  j["planned"] = r.planned;
  return j;
}

std::string RenderPlanText(const PlanReport& r) {
  std::ostringstream o;
  o << r.file << ": memory plan (" << PlanAlgorithmName(r.chosen) << ", alignment "
    << (r.alignment ? std::to_string(*r.alignment) : std::string("as the input's offsets")) << ")\n";
  char line[256];
  for (const MethodPlan& m : r.methods) {
    o << "method \"" << m.name << "\"";
    if (!m.not_checked.empty()) {
      o << ": planned " << Thousands(m.size_now) << " bytes; lifetimes not derived (" << m.not_checked
        << "), so not re-planned\n";
      continue;
    }
    if (m.buffers.empty()) {
      o << ": no planned tensors\n";
      continue;
    }
    o << ": planned " << Thousands(m.size_now) << " bytes, lower bound " << Thousands(m.lower_bound);
    std::snprintf(line, sizeof line, " (%.1f %% above)", PercentAbove(m.size_now, m.lower_bound));
    o << line;
    if (r.planners_run) o << ", re-planned " << Thousands(m.planned);
    o << "\n";
    for (const BufferPlan& b : m.buffers) {
      o << "  buffer " << b.memory_id;
      if (b.device_type) o << " (" << DeviceName(*b.device_type) << ")";
      o << ": " << b.tensors << " tensors in " << b.blocks << " blocks";
      if (b.fixed_blocks) o << " (" << b.fixed_blocks << " fixed)";
      if (b.idle_values) o << ", " << b.idle_values << " never live";
      o << ", alignment " << b.alignment << "\n";
      const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(0, b.size_now));
      std::snprintf(line, sizeof line, "    %-18s %14s\n", "now", Thousands(now).c_str());
      o << line;
      std::snprintf(line, sizeof line, "    %-18s %14s\n", "lower bound", Thousands(b.lower_bound).c_str());
      o << line;
      for (const auto& a : b.algorithms) {
        std::string note;
        if (a.optimal || a.size == b.lower_bound) note += "  optimal";
        if (a.algorithm == PlanAlgorithm::kExecutorchGreedy && b.greedy_reproduces) {
          note += *b.greedy_reproduces ? "  (the input's offsets exactly)" : "  (not the input's offsets)";
        }
        if (a.algorithm == b.chosen)
          note += b.kept_input ? "  <- not smaller: the input's plan is kept" : "  <- chosen";
        std::snprintf(line, sizeof line, "    %-18s %14s", PlanAlgorithmName(a.algorithm), Thousands(a.size).c_str());
        o << line << note << "\n";
      }
      if (b.greedy_reproduces && !*b.greedy_reproduces && !b.greedy_first_difference.empty()) {
        o << "    executorch-greedy first differs at " << b.greedy_first_difference << "\n";
      }
      if (b.peak_instruction) {
        o << "    peak at instruction " << *b.peak_instruction << " (" << b.peak_label
          << "): " << Thousands(b.peak_bytes) << " bytes in " << b.peak_values.size() << " live block"
          << (b.peak_values.size() == 1 ? "" : "s") << "\n";
        const size_t shown = std::min<size_t>(b.peak_values.size(), 8);
        for (size_t i = 0; i < shown; ++i) {
          const auto& v = b.peak_values[i];
          o << "      " << v.description << ": " << Thousands(v.bytes) << " bytes, instructions " << v.interval.first
            << ".." << v.interval.last << (v.fixed ? ", fixed" : "") << "\n";
        }
        if (shown < b.peak_values.size()) o << "      ... " << b.peak_values.size() - shown << " more\n";
      }
    }
  }
  if (r.methods.size() > 1) {
    o << "all methods: planned " << Thousands(r.size_now) << " bytes, lower bound " << Thousands(r.lower_bound);
    if (r.planners_run) o << ", re-planned " << Thousands(r.planned);
    o << "\n";
  }
  return o.str();
}

}  // namespace ptepack
