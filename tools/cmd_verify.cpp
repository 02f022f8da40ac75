// `ptepack verify`: check files as ExecuTorch's runtime would, and more.
#include <cstdlib>
#include <iostream>

#include "tools/read_common.h"

namespace ptepack::cli {
namespace {

struct VerifyOpts {
  Common common;
  IntegrityOptions io;
  bool checksum = false;
  bool strict = false;
  bool sums() const { return checksum || !io.write_manifest.empty() || !io.manifest.empty(); }
};

// " (program only: ...) (not checked: ...) with N warnings" after "FILE: OK".
std::string OkNote(const Verdict& v) {
  std::string note;
  if (v.external_unchecked > 0) {
    // Only the program was checked (repack would refuse it, naming the missing data).
    note = " (program only: " + std::to_string(v.external_unchecked) +
           " tensor(s) live in a .ptd data file that was not given; pass it with --ptd to check them)";
  }
  std::vector<std::string> others;  // the external tensors are said above
  for (const auto& u : v.unchecked) {
    if (u != "external tensors (no --ptd)") others.push_back(u);
  }
  if (!others.empty()) {
    note += " (not checked: ";
    for (size_t i = 0; i < others.size(); ++i) note += (i ? "; " : "") + others[i];
    note += ")";
  }
  if (v.warnings > 0) note += " with " + std::to_string(v.warnings) + " warning" + (v.warnings > 1 ? "s" : "");
  return note;
}

void PrintText(const std::string& file, const VerifyOpts& o, const Verdict& v, bool ok,
               const std::vector<const Report*>& reports, const IntegrityResult& ir) {
  for (const Report* r : reports) {
    for (const auto& f : r->findings()) std::cerr << EscapeControl(f.ToString()) << "\n";
  }
  if (!o.common.quiet) {
    for (const auto& f : ir.files) std::cout << RenderChecksumsText(f);
  }
  if (o.sums() && ir.files.empty()) std::cerr << file << ": checksums skipped: the file is not valid\n";
  if (!o.io.write_manifest.empty() && !ir.files.empty() && !o.common.quiet) {
    std::cout << "manifest written: " << o.io.write_manifest << "\n";
  }
  if (!o.io.manifest.empty() && !ir.files.empty() && ok && !o.common.quiet) {
    std::cout << "manifest " << o.io.manifest << ": all checksums match\n";
  }
  if (!ok) {
    std::cerr << file << ": INVALID" << (o.strict && v.warnings > 0 ? " (--strict: warnings fail)" : "") << "\n";
  } else if (!o.common.quiet) {
    std::cout << file << ": OK" << OkNote(v) << "\n";
  }
}

// Judges one file; prints it as text, or returns its JSON in `json`.
int VerifyOne(const Input& in, const VerifyOpts& o, nlohmann::json* json) {
  if (in.file != "-" && in.ptds.empty() && !o.sums()) {
    if (auto rc = VerifyBpte(in.file, o.strict, o.common.quiet, json)) return *rc;
  }
  ReadOptions ro;
  ro.segment_alignment = o.common.segment_alignment.value_or(0);
  ro.tensor_alignment = o.common.tensor_alignment.value_or(0);
  ro.allow_legacy_ptd = o.common.allow_legacy_ptd;
  LoadedFiles l = LoadInput(in, ro);
  const Verdict verdict = Judge(l, o.strict);
  std::vector<const Report*> reports = l.reports();
  bool ok = verdict.ok;
  IntegrityResult ir;
  if (o.sums() && ok) {
    std::vector<const PteFile*> ptes;
    std::vector<const PtdFile*> ptds = l.ptd_ptrs();
    if (l.pte) ptes.push_back(l.pte.get());
    if (l.lone_ptd) ptds.insert(ptds.begin(), l.lone_ptd.get());
    ir = RunIntegrity(ptes, ptds, o.io);
    for (const auto& r : ir.reports) reports.push_back(&r);
    ok = ir.ok();
  }
  if (json) {
    nlohmann::json& j = *json;
    j = VerdictJson(in.name(), verdict, o.strict, reports);
    j["valid"] = ok;
    if (!ir.files.empty()) j["checksums"] = ManifestJson(ir.files)["files"];
    if (!o.io.write_manifest.empty() && !ir.files.empty()) j["manifest_written"] = o.io.write_manifest;
  } else {
    PrintText(in.name(), o, verdict, ok, reports, ir);
  }
  return ok ? kOk : kInvalid;
}

// Several files: each judged; JSON {"files": [...], "valid", "summary"}; exit = the worst.
void Run(const CLI::App* c, const VerifyOpts& o) {
  const std::vector<Input> inputs = Inputs(c, o.common);
  if (inputs.size() > 1 && (!o.io.write_manifest.empty() || !o.io.manifest.empty())) {
    throw Error("usage", "--write-manifest/--manifest take one FILE (use `ptepack checksum` for several)");
  }
  nlohmann::json files = nlohmann::json::array();
  size_t counts[3] = {0, 0, 0};
  const int worst = ForEachInput(
      inputs,
      [&](const Input& in) {
        nlohmann::json j;
        int rc = VerifyOne(in, o, o.common.json ? &j : nullptr);
        if (o.common.json) files.push_back(std::move(j));
        ++counts[rc];
        return rc;
      },
      [&](const Input& in, const Error& e) {
        ++counts[kFailed];
        if (o.common.json) files.push_back(ErrorJson(in.name(), e));
      });
  g_exit = worst;
  if (inputs.size() == 1) {
    if (o.common.json) std::cout << files[0].dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  const std::string summary = std::to_string(inputs.size()) + " files: " + std::to_string(counts[kOk]) + " valid, " +
                              std::to_string(counts[kInvalid]) + " invalid, " + std::to_string(counts[kFailed]) +
                              " unreadable";
  if (o.common.json) {
    nlohmann::json j = {{"files", files}, {"valid", worst == kOk}, {"summary", summary}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (!o.common.quiet || worst != kOk) {
    (worst == kOk ? std::cout : std::cerr) << "verify: " << summary << "\n";
  }
}

}  // namespace

void RegisterVerify(CLI::App& app) {
  auto o = std::make_shared<VerifyOpts>();
  auto* c = app.add_subcommand("verify",
                               "Check files: headers, FlatBuffers verifier, every segment, offset, size, "
                               "alignment, index and string. Exits 0 if all are valid, 1 if one is invalid, 2 if "
                               "one cannot be read (the worst); several files are judged one by one.");
  Args& a = NewArgs(c);
  AddCommon(a, o->common, /*quiet=*/true);
  a.Flag("--strict", &o->strict,
         "Warnings fail too (misaligned constants, deprecated constant_buffer, external tensors not "
         "checked for lack of a --ptd, ...)");
  a.Flag("--checksum", &o->checksum,
         "Also compute XXH3-64 checksums of the program region, of each segment and of the padding "
         "(reads all data; without it verify only reads headers and flatbuffers)");
  a.Output("--write-manifest", &o->io.write_manifest,
           "Write the checksums to this JSON manifest (implies --checksum; only for valid files)", "M.json");
  a.Input("--manifest", &o->io.manifest,
          "Compare the checksums with this manifest (implies --checksum); a difference is an error "
          "naming the segment",
          InputKind::kFile, "M.json");
  a.Run([c, o]() { Run(c, *o); });
}

}  // namespace ptepack::cli
