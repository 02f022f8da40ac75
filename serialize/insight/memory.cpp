// Runtime memory of a program (see memory.h).
#include "serialize/insight/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "serialize/insight/plan.h"
#include "serialize/insight/size.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

namespace fbs = executorch_flatbuffer;

// Adds the stored data a method's tensors and delegates use to `m`, each
// stored copy once per collector (one per method, and one for all methods).
class Collector {
 public:
  Collector(const PteFile& pte, const std::vector<const PtdFile*>& ptds) : pte_(pte), ptds_(ptds) {}

  void AddPlan(const fbs::ExecutionPlan& plan, MethodMemory& m) {
    if (const auto* sizes = plan.non_const_buffer_sizes()) {
      for (uint32_t i = 1; i < sizes->size(); ++i) {
        uint64_t s = static_cast<uint64_t>(std::max<int64_t>(0, sizes->Get(i)));
        m.planned.push_back(s);
        m.planned_total += s;
      }
    }
    if (plan.values()) {
      for (const auto* v : *plan.values()) {
        if (const auto* t = v->val_as_Tensor()) AddTensor(*t, m);
      }
    }
    if (plan.delegates()) {
      for (const auto* d : *plan.delegates()) AddDelegate(*d, m);
    }
  }

 private:
  void AddTensor(const fbs::Tensor& t, MethodMemory& m) {
    const auto* eti = t.extra_tensor_info();
    const bool external = eti && eti->location() == fbs::TensorDataLocation::EXTERNAL;
    const uint64_t nbytes = TensorNbytes(t).value_or(0);
    if (external) {
      std::string key = eti->fully_qualified_name() ? eti->fully_qualified_name()->str() : "";
      std::string file = "(not given)";
      uint64_t bytes = nbytes;
      for (const PtdFile* ptd : ptds_) {
        for (const auto& e : ptd->entries()) {
          if (e.key == key) file = std::filesystem::path(ptd->name()).filename().string(), bytes = e.size;
        }
      }
      // An external mutable tensor's initial state is copied into planned memory at load.
      if (!seen_.insert("x/" + file + "/" + key).second) return;
      if (t.allocation_info()) {
        m.mutable_state += bytes;
      } else {
        m.constants_ptd[file] += bytes;
      }
      return;
    }
    if (t.data_buffer_idx() == 0) return;
    const std::string kind = t.allocation_info() ? "m/" : "c/";
    auto [it, fresh] = buffers_.emplace(kind + std::to_string(t.data_buffer_idx()), nbytes);
    uint64_t add = fresh ? nbytes : (nbytes > it->second ? nbytes - it->second : 0);
    it->second = std::max(it->second, nbytes);
    (t.allocation_info() ? m.mutable_state : m.constants_pte) += add;
  }

  void AddDelegate(const fbs::BackendDelegate& d, MethodMemory& m) {
    const auto* ref = d.processed();
    if (!ref) return;
    const uint32_t k = ref->index();
    if (ref->location() == fbs::DataLocation::SEGMENT) {
      if (k < pte_.segments().size() && seen_.insert("s/" + std::to_string(k)).second) {
        m.delegates_segment += pte_.segments()[k].size;
      }
      return;
    }
    const auto* bdd = pte_.program()->backend_delegate_data();
    if (bdd && k < bdd->size() && bdd->Get(k)->data() && seen_.insert("i/" + std::to_string(k)).second) {
      m.delegates_inline += bdd->Get(k)->data()->size();
    }
  }

  const PteFile& pte_;
  const std::vector<const PtdFile*>& ptds_;
  std::set<std::string> seen_;
  std::map<std::string, uint64_t> buffers_;  // stored constant/mutable buffers -> bytes counted
};

void Totals(MethodMemory& m) {
  uint64_t constants = m.constants_pte;
  for (const auto& [file, bytes] : m.constants_ptd) constants += bytes;
  m.after_init = m.planned_total + constants + m.delegates_inline;
  m.at_init = m.after_init + m.delegates_segment;
}

nlohmann::json MethodJson(const MethodMemory& m) {
  nlohmann::json bound = nullptr, above = nullptr;
  if (m.planned_lower_bound) {
    bound = *m.planned_lower_bound;
    above = std::round(PercentAbove(m.planned_total, *m.planned_lower_bound) * 100) / 100;
  }
  return {
      {"name", m.name},
      {"planned_lower_bound", bound},
      {"planned_above_lower_bound_percent", above},
      {"plan_not_checked", m.plan_not_checked.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.plan_not_checked)},
      {"planned_buffers", m.planned},
      {"planned_total", m.planned_total},
      {"constants_pte", m.constants_pte},
      {"constants_ptd", m.constants_ptd},
      {"delegates_segment", m.delegates_segment},
      {"delegates_inline", m.delegates_inline},
      {"mutable_state", m.mutable_state},
      {"at_init", m.at_init},
      {"after_init", m.after_init}};
}

void MethodLine(std::ostringstream& o, const MethodMemory& m, int width) {
  uint64_t ptd = 0;
  for (const auto& [file, bytes] : m.constants_ptd) ptd += bytes;
  char line[300];
  o << "  " << m.name << std::string(static_cast<size_t>(width) > m.name.size() ? width - m.name.size() : 0, ' ');
  std::snprintf(line, sizeof line, " %10s %10s %10s %10s %10s %10s\n", HumanBytes(m.planned_total).c_str(),
                HumanBytes(m.constants_pte).c_str(), HumanBytes(ptd).c_str(),
                HumanBytes(m.delegates_segment + m.delegates_inline).c_str(), HumanBytes(m.at_init).c_str(),
                HumanBytes(m.after_init).c_str());
  o << line;
  if (m.planned.size() > 1) {
    o << "    planned buffers:";
    for (size_t i = 0; i < m.planned.size(); ++i) o << (i ? ", " : " ") << HumanBytes(m.planned[i]);
    o << "\n";
  }
  if (m.mutable_state > 0) o << "    mutable state (in planned memory): " << HumanBytes(m.mutable_state) << "\n";
  if (m.planned_lower_bound && m.planned_total > 0) {
    std::snprintf(line, sizeof line, "    planned %s, lower bound %s (%.1f %% above)\n",
                  HumanBytes(m.planned_total).c_str(), HumanBytes(*m.planned_lower_bound).c_str(),
                  PercentAbove(m.planned_total, *m.planned_lower_bound));
    o << line;
  } else if (!m.plan_not_checked.empty()) {
    o << "    planned " << HumanBytes(m.planned_total) << ", lower bound not derived: " << m.plan_not_checked << "\n";
  }
}

}  // namespace

MemoryReport AnalyzeMemory(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  MemoryReport r;
  r.program_bytes = pte.program_size();
  r.all.name = "(all methods)";
  const auto* plans = pte.program() ? pte.program()->execution_plan() : nullptr;
  if (!plans) return r;
  Collector all(pte, ptds);
  for (const auto* plan : *plans) {
    MethodMemory m;
    m.name = plan->name() ? plan->name()->str() : "";
    Collector one(pte, ptds);
    one.AddPlan(*plan, m);
    all.AddPlan(*plan, r.all);
    Totals(m);
    r.methods.push_back(std::move(m));
  }
  r.all.planned.clear();
  Totals(r.all);
  // Lower bounds only: no planner runs.
  PlanReportOptions po;
  po.run_planners = false;
  const PlanReport plan = AnalyzePlan(pte, po);
  uint64_t all_bound = 0;
  bool all_derived = true;
  for (size_t i = 0; i < r.methods.size() && i < plan.methods.size(); ++i) {
    const MethodPlan& mp = plan.methods[i];
    if (mp.not_checked.empty()) {
      r.methods[i].planned_lower_bound = mp.lower_bound;
      all_bound += mp.lower_bound;
    } else {
      r.methods[i].plan_not_checked = mp.not_checked;
      all_derived = false;
    }
  }
  if (all_derived) r.all.planned_lower_bound = all_bound;
  return r;
}

nlohmann::json MemoryJson(const MemoryReport& m) {
  nlohmann::json methods = nlohmann::json::array();
  for (const auto& x : m.methods) methods.push_back(MethodJson(x));
  nlohmann::json all = MethodJson(m.all);
  all.erase("name");
  all.erase("planned_buffers");
  return {{"program_bytes", m.program_bytes}, {"methods", methods}, {"all_methods", all}};
}

std::string RenderMemoryText(const MemoryReport& m, size_t top, bool by_name) {
  // Methods that need no memory of their own (metadata methods: no planned buffers, no
  // data) are counted, not listed; the rest, largest at init first (or by name), at most `top`.
  std::vector<const MethodMemory*> rows;
  std::vector<std::string> empty;
  for (const auto& x : m.methods) {
    if (x.at_init == 0 && x.planned_total == 0 && x.mutable_state == 0) {
      empty.push_back(x.name);
    } else {
      rows.push_back(&x);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [by_name](const MethodMemory* a, const MethodMemory* b) {
    return by_name ? a->name < b->name : a->at_init > b->at_init;
  });
  const size_t shown = std::min(top, rows.size());
  std::ostringstream o;
  o << "runtime memory (program flatbuffer resident: " << HumanBytes(m.program_bytes) << ")";
  if (shown < rows.size()) o << ", " << shown << " of " << rows.size() << " methods (--top)";
  o << "\n";
  int width = 6;  // "method"; the column grows to the longest name shown
  for (size_t i = 0; i < shown; ++i) width = std::max(width, static_cast<int>(rows[i]->name.size()));
  if (m.methods.size() > 1) width = std::max(width, static_cast<int>(m.all.name.size()));
  char line[300];
  o << "  method" << std::string(static_cast<size_t>(width) - 6, ' ');
  std::snprintf(line, sizeof line, " %10s %10s %10s %10s %10s %10s\n", "planned", "const .pte", "const .ptd",
                "delegates", "at init", "after init");
  o << line;
  for (size_t i = 0; i < shown; ++i) MethodLine(o, *rows[i], width);
  if (m.methods.size() > 1) MethodLine(o, m.all, width);
  if (!empty.empty()) {
    o << "  " << empty.size()
      << (empty.size() == 1 ? " method needs no memory of its own" : " methods need no memory of their own")
      << " (no planned buffers, constants or delegates): ";
    for (size_t i = 0; i < empty.size() && i < 4; ++i) o << (i ? ", " : "") << empty[i];
    if (empty.size() > 4) o << ", ...";
    o << "\n";
  }
  return o.str();
}

}  // namespace ptepack
