#include "serialize/api/read_api.h"

#include <cmath>
#include <cstring>

#include "config/backend_config.h"
#include "config/numbers.h"
#include "serialize/bpte/bpte.h"
#include "serialize/format/pte_format.h"
#include "serialize/insight/plan.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/describe.h"
#include "serialize/read/file_description.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"

namespace ptepack {
namespace {

nlohmann::json LayoutJson(int scalar_type, std::vector<int64_t> sizes, std::vector<int64_t> dim_order,
                          std::optional<uint64_t> bytes) {
  nlohmann::json j{{"dtype", ScalarTypeName(scalar_type)}, {"shape", sizes}, {"dim_order", dim_order}};
  j["bytes"] = bytes ? nlohmann::json(*bytes) : nlohmann::json(nullptr);
  return j;
}

// Adds to each external tensor of `d` its dtype, shape, dim order and bytes,
// and those of its .ptd entry (when a given .ptd holds the key), so that a
// script can compare them.
void AddExternalLayouts(nlohmann::json& d, const FileDescription& fd) {
  if (!fd.has_program || !d.contains("external_tensors")) return;
  for (auto& e : d["external_tensors"]) {
    const std::string method = e.value("method", "");
    const size_t vi = e.value("value", size_t{0});
    for (const MethodDescription& m : fd.methods) {
      if (!m.has_name || m.info.name != method || vi >= m.info.values.size()) continue;
      const std::optional<TensorInfo>& t = m.info.values[vi].tensor;
      if (!t) continue;
      nlohmann::json l = LayoutJson(static_cast<int>(t->dtype), std::vector<int64_t>(t->shape.begin(), t->shape.end()),
                                    std::vector<int64_t>(t->dim_order.begin(), t->dim_order.end()), t->nbytes);
      for (auto it = l.begin(); it != l.end(); ++it) e[it.key()] = it.value();
      break;
    }
    for (const PtdDescription& ptd : fd.ptds) {
      for (const PtdEntryDescription& pe : ptd.entries) {
        if (pe.key != e.value("key", "")) continue;
        nlohmann::json pj = pe.has_layout
                                ? LayoutJson(pe.scalar_type, std::vector<int64_t>(pe.sizes.begin(), pe.sizes.end()),
                                             std::vector<int64_t>(pe.dim_order.begin(), pe.dim_order.end()), pe.size)
                                : nlohmann::json{{"bytes", pe.size}};
        pj["file"] = ptd.file;
        e["ptd_entry"] = pj;
      }
    }
  }
}

// A .pte with external tensors verified without any .ptd: nothing about them
// was checked; say so (a warning, an error with --strict).
void NoteUncheckedExternal(PteFile& pte) {
  std::vector<std::string> keys = pte.ExternalKeys();
  if (keys.empty()) return;
  std::string list;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) list += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) list += ", ...";
  pte.mutable_report().Warn("external-not-checked",
                            std::to_string(keys.size()) + " external tensors need a .ptd; not checked (keys: " + list +
                                "); give the data files with --ptd",
                            std::nullopt, "--ptd FILE.ptd", "no .ptd");
}

// The settings the file does not pin down: the range that fits, the value
// chosen (ExecuTorch's default where it fits) and what the file shows.
nlohmann::json AmbiguityJson(const InferredConfig& inf) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : inf.ambiguous) {
    nlohmann::json e = {{"field", x.field}, {"chosen", x.chosen}, {"why", x.why}};
    const SettingFit fit{x.lo, x.hi, x.values};
    e["fits"] = x.hi ? nlohmann::json{{"min", x.lo}, {"max", x.hi}} : nlohmann::json{{"values", x.values}};
    e["fits"]["text"] = fit.Text();
    a.push_back(e);
  }
  return a;
}

// The config the file was written with, as `repack` infers it, and whether
// each segment starts where that segment alignment puts it. Where it cannot
// be inferred (invalid file, external data not given) the reason is said.
void AddInferredConfig(nlohmann::json& d, const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  uint64_t segment_alignment = 0;
  try {
    if (!pte.ok()) throw Error("invalid", "the file has errors");
    PackageParts pkg = PackageFromPte(pte, ptds);
    InferredConfig inf = InferConfig(pte, pkg, ptds);
    d["config"] = ConfigToJson(inf.config);
    d["config"]["reproduces_file_exactly"] = inf.exact;
    d["config"]["ambiguous"] = AmbiguityJson(inf);
    segment_alignment = inf.config.segment_alignment;
  } catch (const Error& e) {
    d["config"] = {{"inferred", false}, {"reason", e.finding().message}};
  }
  if (segment_alignment == 0 || !d.contains("segments")) return;
  for (auto& s : d["segments"]) {
    s["segment_alignment"] = segment_alignment;
    s["aligned"] = s["file_offset"].get<uint64_t>() % segment_alignment == 0;
  }
}

// Adds to each method of `d` its memory plan: the planned bytes, the lower
// bound no plan can beat and how far above it the plan is (serialize/insight/
// plan.h, no planner run), or why the lifetimes could not be derived. Left out
// for a file with errors outside the plan (its tables cannot be trusted).
void AddMemoryPlan(nlohmann::json& d, const PteFile& pte) {
  if (!pte.program() || !d.contains("methods")) return;
  for (const Finding& f : pte.report().findings()) {
    if (f.severity == Finding::Severity::kError && f.code.rfind("plan-", 0) != 0) return;
  }
  PlanReportOptions o;
  o.run_planners = false;
  const PlanReport r = AnalyzePlan(pte, o);
  auto& methods = d["methods"];
  for (size_t i = 0; i < r.methods.size() && i < methods.size(); ++i) {
    const MethodPlan& m = r.methods[i];
    if (methods[i].value("name", "") != m.name) continue;
    nlohmann::json j = {{"planned", m.size_now}, {"planned_tensors", m.planned_tensors}};
    if (m.not_checked.empty()) {
      j["lower_bound"] = m.lower_bound;
      j["above_lower_bound_percent"] = std::round(PercentAbove(m.size_now, m.lower_bound) * 100) / 100;
    } else {
      j["lower_bound"] = nullptr;
      j["not_checked"] = m.not_checked;
    }
    methods[i]["memory_plan"] = j;
  }
}

}  // namespace

FileKind KindOf(const Bytes& head) {
  if (head.size >= 8 && std::memcmp(head.data + 4, kFlatTensorId, 4) == 0) return FileKind::kPtd;
  if (bpte::HasIdentifier(head.data, head.size)) return FileKind::kBpte;
  return FileKind::kPte;
}

FileKind KindOfFile(const std::string& path) { return KindOf(MappedFile::Open(path)->All()); }

bool IsPtdFile(const std::string& path) { return KindOfFile(path) == FileKind::kPtd; }

std::vector<const PtdFile*> LoadedFiles::ptd_ptrs() const {
  std::vector<const PtdFile*> v;
  for (const auto& p : ptds) v.push_back(p.get());
  return v;
}

std::vector<const Report*> LoadedFiles::reports() const {
  std::vector<const Report*> r;
  if (pte) r.push_back(&pte->report());
  if (lone_ptd) r.push_back(&lone_ptd->report());
  for (const auto& p : ptds) r.push_back(&p->report());
  return r;
}

LoadedFiles LoadFiles(Bytes data, const std::string& name, const std::vector<std::string>& ptd_paths,
                      const ReadOptions& ro) {
  LoadedFiles l;
  if (KindOf(data) == FileKind::kPtd) {
    l.lone_ptd = PtdFile::FromBytes(std::move(data), name, ro);
    return l;
  }
  l.pte = PteFile::FromBytes(std::move(data), name, ro);
  for (const auto& p : ptd_paths) l.ptds.push_back(PtdFile::Open(p, ro));
  if (!ptd_paths.empty()) l.pte->CheckExternalKeys(l.ptd_ptrs());
  return l;
}

LoadedFiles LoadFiles(const std::string& file, const std::vector<std::string>& ptd_paths, const ReadOptions& ro) {
  return LoadFiles(MappedFile::Open(file)->All(), file, ptd_paths, ro);
}

ReadOptions ReadOptionsFor(const VerifyOptions& o) {
  // 0: no extra check; anything else is an alignment, checked as the CLI's and Python's are.
  if (o.segment_alignment) CheckAlignmentValue("segment_alignment", o.segment_alignment, "bad-number");
  if (o.tensor_alignment) CheckAlignmentValue("tensor_alignment", o.tensor_alignment, "bad-number");
  ReadOptions ro;
  ro.segment_alignment = o.segment_alignment;
  ro.tensor_alignment = o.tensor_alignment;
  ro.allow_legacy_ptd = o.allow_legacy_ptd;
  return ro;
}

// A program whose tensors live in .ptd files cannot be rewritten without
// them. (verify without --ptd checks the program alone and says so.)
namespace {
void RequireExternalData(const std::string& in, const ValidInput& i) {
  auto probe = PteFile::Open(in);
  probe->CheckExternalKeys(i.ptrs);
  for (const auto& f : probe->report().findings()) {
    if (f.code != "dangling-external-key") continue;
    Finding e = f;
    e.code = "missing-ptd";
    e.message = f.message + (i.ptds.empty() ? "; the program keeps tensors in a separate .ptd data file: give it with "
                                              "--ptd FILE.ptd"
                                            : "; give the .ptd file that holds it with --ptd");
    throw Error(std::move(e));
  }
}
}  // namespace

ValidInput LoadValidInput(const std::string& in, const std::vector<std::string>& ptds) {
  ValidInput i;
  i.pte = PteFile::Open(in);
  i.paths.push_back(in);
  for (const auto& p : ptds) {
    i.ptds.push_back(PtdFile::Open(p));
    i.ptrs.push_back(i.ptds.back().get());
    i.paths.push_back(p);
  }
  i.pte->report().ThrowIfError();
  for (const auto& p : i.ptds) p->report().ThrowIfError();
  RequireExternalData(in, i);
  return i;
}

nlohmann::json InspectDocument(const LoadedFiles& l) {
  if (!l.pte) return DescribePtd(*l.lone_ptd);
  // Read once into the description; the JSON is rendered from it alone. The
  // inferred config and the memory plan are analyses of the file, added after.
  const FileDescription fd = DescribeFile(*l.pte, l.ptd_ptrs());
  nlohmann::json d = DescribePteJson(fd);
  AddExternalLayouts(d, fd);
  AddInferredConfig(d, *l.pte, l.ptd_ptrs());
  AddMemoryPlan(d, *l.pte);
  return d;
}

Verdict Judge(LoadedFiles& l, bool strict) {
  if (l.pte && l.ptds.empty() && l.pte->program()) NoteUncheckedExternal(*l.pte);
  Verdict v;
  for (const Report* r : l.reports()) {
    v.ok = v.ok && r->ok();
    for (const auto& f : r->findings()) {
      if (f.severity != Finding::Severity::kWarning) continue;
      ++v.warnings;
      if (f.code == "external-not-checked") {
        v.external_unchecked = l.pte ? l.pte->ExternalKeys().size() : 0;
        v.unchecked.push_back("external tensors (no --ptd)");
      }
      if (f.code == "legacy-format") v.unchecked.push_back("a legacy-layout .ptd, accepted for older runtimes only");
      if (f.code == "plan-not-checked") v.unchecked.push_back(f.message);
    }
  }
  if (strict && v.warnings > 0) v.ok = false;
  return v;
}

nlohmann::json VerdictJson(const std::string& file, const Verdict& v, bool strict,
                           const std::vector<const Report*>& reports) {
  return nlohmann::json{{"file", file},
                        {"valid", v.ok},
                        {"strict", strict},
                        {"not_checked", v.unchecked},
                        {"findings", FindingsJson(reports)}};
}

bool BpteVerdictOk(const bpte::BpteFile& f, bool strict) {
  const size_t warnings = f.report().findings().size() - f.report().error_count();
  return f.ok() && !(strict && warnings > 0);
}

nlohmann::json BpteVerdictJson(const bpte::BpteFile& f, const std::string& file, bool strict) {
  return nlohmann::json{{"file", file},
                        {"format", "bpte"},
                        {"valid", BpteVerdictOk(f, strict)},
                        {"strict", strict},
                        {"not_checked", nlohmann::json::array()},
                        {"findings", FindingsJson({&f.report()})}};
}

namespace {

// A BundledProgram is judged as one unless .ptd files or checksums are asked for (which
// only a program or a .ptd has: it is then read as a program, and its identifier named).
bool JudgeAsBpte(const Bytes& data, const VerifyOptions& o, bool sums) {
  return o.ptd.empty() && !sums && KindOf(data) == FileKind::kBpte;
}

// Judges the files read and, when they are valid and checksums are asked for, checksums
// them (writing or comparing a manifest).
void JudgeAndSum(Verification& v, const VerifyOptions& o) {
  LoadedFiles& l = v.files;
  v.verdict = Judge(l, o.strict);
  v.reports = l.reports();
  v.ok = v.verdict.ok;
  if (!v.sums || !v.ok) return;
  std::vector<const PteFile*> ptes;
  std::vector<const PtdFile*> ptds = l.ptd_ptrs();
  if (l.pte) ptes.push_back(l.pte.get());
  if (l.lone_ptd) ptds.insert(ptds.begin(), l.lone_ptd.get());
  v.integrity = RunIntegrity(ptes, ptds, IntegrityOptions{o.write_manifest, o.manifest});
  for (const auto& r : v.integrity.reports) v.reports.push_back(&r);
  v.ok = v.integrity.ok();
  if (!v.integrity.files.empty()) v.manifest_written = o.write_manifest;
}

}  // namespace

Verification RunVerify(Bytes data, const std::string& name, const VerifyOptions& options) {
  const ReadOptions ro = ReadOptionsFor(options);  // the options are checked for a .bpte too
  Verification v;
  v.file = name;
  v.strict = options.strict;
  v.sums = options.checksum || !options.write_manifest.empty() || !options.manifest.empty();
  if (JudgeAsBpte(data, options, v.sums)) {
    v.bpte = bpte::BpteFile::FromBytes(std::move(data), name);
    v.ok = BpteVerdictOk(*v.bpte, options.strict);
    v.reports = {&v.bpte->report()};
    return v;
  }
  v.files = LoadFiles(std::move(data), name, options.ptd, ro);
  JudgeAndSum(v, options);
  return v;
}

Verification RunVerify(const std::string& path, const VerifyOptions& options) {
  ReadOptionsFor(options);  // bad options are said before the file is opened
  return RunVerify(MappedFile::Open(path)->All(), path, options);
}

nlohmann::json Verification::Json() const {
  if (bpte) return BpteVerdictJson(*bpte, file, strict);
  nlohmann::json j = VerdictJson(file, verdict, strict, reports);
  j["valid"] = ok;
  if (!integrity.files.empty()) j["checksums"] = ManifestJson(integrity.files)["files"];
  if (!manifest_written.empty()) j["manifest_written"] = manifest_written;
  return j;
}

VerifyResult Verify(const std::string& path, const VerifyOptions& options) {
  const Verification v = RunVerify(path, options);
  VerifyResult r;
  r.valid = v.ok;
  if (!v.bpte) r.not_checked = v.verdict.unchecked;
  for (const Report* rep : v.reports)
    r.findings.insert(r.findings.end(), rep->findings().begin(), rep->findings().end());
  return r;
}

std::string VerifyJson(const std::string& path, const VerifyOptions& options, int indent) {
  return RunVerify(path, options).Json().dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Inspection RunInspect(Bytes data, const std::string& name, const VerifyOptions& options) {
  const ReadOptions ro = ReadOptionsFor(options);
  Inspection in;
  if (options.ptd.empty() && KindOf(data) == FileKind::kBpte) {
    in.bpte = bpte::BpteFile::FromBytes(std::move(data), name);
    in.ok = in.bpte->ok();
    return in;
  }
  // A legacy .ptd is explained either way; its verdict ("valid") is Verify's.
  in.files = LoadFiles(std::move(data), name, options.ptd, ro);
  in.ok = true;
  for (const Report* r : in.files.reports()) in.ok = in.ok && r->ok();
  return in;
}

Inspection RunInspect(const std::string& path, const VerifyOptions& options) {
  ReadOptionsFor(options);  // bad options are said before the file is opened
  return RunInspect(MappedFile::Open(path)->All(), path, options);
}

nlohmann::json Inspection::Json() const { return bpte ? bpte::DescribeBpte(*bpte) : InspectDocument(files); }

std::string InspectJson(const std::string& path, const VerifyOptions& options, int indent) {
  return RunInspect(path, options).Json().dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ptepack
