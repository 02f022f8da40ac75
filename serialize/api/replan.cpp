#include "serialize/api/replan.h"

#include <memory>

#include "ptepack/error.h"
#include "serialize/api/read_api.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {
namespace {

// The report may be shown for a plan `verify` flags (that is what it is
// about), never for a file with other errors: its tables cannot be trusted.
void RefuseNonPlanErrors(const PteFile& pte) {
  for (const Finding& f : pte.report().findings()) {
    if (f.severity == Finding::Severity::kError && (f.code.rfind("plan-", 0) != 0 || !pte.program())) throw Error(f);
  }
  if (!pte.program()) throw Error("flatbuffer-invalid", pte.name() + ": no verified program to plan");
}

// A method whose lifetimes are unknown cannot be shown safe after its
// tensors move.
void RefuseUnderived(const PteFile& pte, const PlanReport& r) {
  for (const MethodPlan& m : r.methods) {
    if (m.not_checked.empty() || m.planned_tensors == 0) continue;
    throw Error("plan-not-checked",
                "method \"" + m.name +
                    "\": its memory plan cannot be re-planned safely, because the lifetimes of its " +
                    std::to_string(m.planned_tensors) + " planned tensors could not be derived: " + m.not_checked,
                pte.name(), m.file_offset, "lifetimes derived from the program", "not derived");
  }
}

// The planned tensors' offsets and each planned buffer's size, nothing else.
void EditPlan(PackageParts& pkg, const PlanReport& r) {
  auto& plans = prog::Program{*pkg.program}.execution_plan().mutable_elems();
  for (const MethodPlan& m : r.methods) {
    if (!m.not_checked.empty() || m.index >= plans.size() || !plans[m.index].table()) continue;
    fb::Table& plan = fb::Own(plans[m.index].mutable_table());
    prog::ExecutionPlan ep{plan};
    for (const auto& [value, offset] : m.new_offsets) {
      auto& values = ep.values().mutable_elems();
      if (value >= values.size() || !values[value].table()) {
        throw Error("internal", "plan: value " + std::to_string(value) + " of method \"" + m.name + "\" is missing");
      }
      const fb::Table& ev_now = *values[value].table();
      const auto& val_now = prog::EValue{ev_now}.val();
      const auto& ai_now = prog::Tensor{*val_now.table()}.allocation_info();
      prog::AllocationDetails a_now{*ai_now.table()};
      const uint64_t current = (uint64_t{a_now.get_memory_offset_high()} << 32) | a_now.get_memory_offset_low();
      if (current == offset) continue;
      fb::Table& ev = fb::Own(values[value].mutable_table());
      fb::Table& t = fb::Own(prog::EValue{ev}.val().mutable_table());
      fb::Table& ai = fb::Own(prog::Tensor{t}.allocation_info().mutable_table());
      prog::AllocationDetails a{ai};
      a.set_memory_offset_low(static_cast<uint32_t>(offset & 0xffffffffu));
      a.set_memory_offset_high(static_cast<uint32_t>(offset >> 32));
    }
    if (!m.new_buffer_sizes.empty() && m.new_buffer_sizes != ep.get_non_const_buffer_sizes()) {
      ep.set_non_const_buffer_sizes(m.new_buffer_sizes);
    }
  }
}

}  // namespace

PlanReport ReplanPackage(const PteFile& pte, PackageParts& pkg, const PlanReportOptions& options) {
  PlanReport report = AnalyzePlan(pte, options);
  RefuseUnderived(pte, report);
  EditPlan(pkg, report);
  return report;
}

ReplanResult Replan(const std::string& in, const std::string& out, const ReplanOptions& options) {
  ReplanResult r;
  if (out.empty()) {
    ReadOptions ro;
    ro.allow_legacy_ptd = true;
    LoadedFiles l = LoadFiles(in, options.ptd, ro);
    if (!l.pte) throw Error("usage", in + " is a .ptd file: plan reads a program (.pte)");
    RefuseNonPlanErrors(*l.pte);
    r.report = AnalyzePlan(*l.pte, options.plan);
    return r;
  }
  ValidInput input = LoadValidInput(in, options.ptd);
  PackageParts pkg = PackageFromPte(*input.pte, input.ptrs);
  InferredConfig inf = InferConfig(*input.pte, pkg, input.ptrs);
  inf.ApplyBlobAlignments(pkg);
  r.config = inf.config;
  r.input_reproducible = inf.exact;
  r.report = ReplanPackage(*input.pte, pkg, options.plan);
  WriteOptions wo = options.write;
  wo.inputs.insert(wo.inputs.end(), input.paths.begin(), input.paths.end());
  r.files = WritePackageFiles(pkg, r.config, out, wo);
  r.written = true;
  return r;
}

nlohmann::json ReplanJson(const ReplanResult& r) {
  nlohmann::json j = PlanJson(r.report);
  if (!r.written) return j;
  nlohmann::json files = nlohmann::json::array();
  files.push_back({{"path", r.files.pte.path}, {"size", r.files.pte.size}});
  for (const auto& p : r.files.ptds) files.push_back({{"path", p.path}, {"size", p.size}});
  j["written"] = {{"files", files}, {"input_reproducible", r.input_reproducible}};
  return j;
}

}  // namespace ptepack
