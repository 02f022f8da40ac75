#include "serialize/api/insight_api.h"

#include <memory>

#include "ptepack/error.h"
#include "serialize/api/read_api.h"
#include "serialize/insight/diff.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

std::vector<const PtdFile*> Ptrs(const std::vector<std::unique_ptr<PtdFile>>& v) {
  std::vector<const PtdFile*> out;
  for (const auto& p : v) out.push_back(p.get());
  return out;
}

}  // namespace

SizeReport SizeOf(const std::string& file, const std::vector<std::string>& ptds, bool allow_legacy_ptd) {
  ReadOptions ro;
  ro.allow_legacy_ptd = allow_legacy_ptd;  // the verdict of verify
  SizeReport r;
  if (IsPtdFile(file)) {
    r.pte = AnalyzePtdSize(*PtdFile::Open(file, ro));  // throws the file's first error
    return r;
  }
  auto pte = PteFile::Open(file, ro);
  std::vector<std::unique_ptr<PtdFile>> owned;
  for (const auto& p : ptds) owned.push_back(PtdFile::Open(p, ro));
  return AnalyzeSize(*pte, Ptrs(owned));  // throws the first error of the program or a .ptd
}

nlohmann::json SizeJsonOf(const std::string& file, const std::vector<std::string>& ptds, size_t top, SizeSort sort,
                          bool allow_legacy_ptd) {
  return SizeJson(SizeOf(file, ptds, allow_legacy_ptd), top, sort);
}

DiffResult DiffOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                  const std::vector<std::string>& ptd_b, const std::string& ptd_flags) {
  for (const auto* f : {&a, &b}) {
    if (IsPtdFile(*f)) throw Error("usage", *f + " is a .ptd file; give it with " + ptd_flags + " beside its program");
  }
  auto pa = PteFile::Open(a);
  auto pb = PteFile::Open(b);
  std::vector<std::unique_ptr<PtdFile>> da, db;
  for (const auto& p : ptd_a) da.push_back(PtdFile::Open(p));
  for (const auto& p : ptd_b) db.push_back(PtdFile::Open(p));
  return DiffPrograms(*pa, Ptrs(da), *pb, Ptrs(db));
}

nlohmann::json DiffJsonOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                          const std::vector<std::string>& ptd_b, bool* different) {
  const DiffResult r = DiffOf(a, ptd_a, b, ptd_b);
  if (different) *different = r.verdict == DiffVerdict::kDifferent;
  return DiffJson(r);
}

ChecksumRun RunChecksums(const std::vector<std::string>& files, const IntegrityOptions& options) {
  ChecksumRun run;
  for (const auto& f : files) {
    if (IsPtdFile(f)) {
      run.ptds.push_back(PtdFile::Open(f));
      run.reports.push_back(&run.ptds.back()->report());
    } else {
      run.ptes.push_back(PteFile::Open(f));
      run.reports.push_back(&run.ptes.back()->report());
    }
  }
  for (const Report* r : run.reports) run.ok = run.ok && r->ok();
  if (run.ok) {
    std::vector<const PteFile*> pp;
    for (const auto& p : run.ptes) pp.push_back(p.get());
    run.ir = RunIntegrity(pp, Ptrs(run.ptds), options);
    for (const auto& r : run.ir.reports) run.reports.push_back(&r);
    run.ok = run.ir.ok();
  }
  return run;
}

nlohmann::json ChecksumJson(const ChecksumRun& run) {
  nlohmann::json j = ManifestJson(run.ir.files);
  j["valid"] = run.ok;
  j["findings"] = FindingsJson(run.reports);
  return j;
}

nlohmann::json ChecksumJsonOf(const std::vector<std::string>& files, const IntegrityOptions& options) {
  return ChecksumJson(RunChecksums(files, options));
}

}  // namespace ptepack
