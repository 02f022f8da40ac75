// `ptepack verify`: check files as ExecuTorch's runtime would, and more.
#include <cstdlib>
#include <iostream>

#include "tools/read_common.h"

namespace ptepack::cli {
namespace {

struct VerifyOpts {
  Common common;
  VerifyOptions vo;  // the library's options: --strict, --checksum and the manifests
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

// A BundledProgram, after its findings: OK with its test suites, or INVALID.
void PrintBpteVerdict(const Verification& v, bool quiet) {
  const bpte::BpteFile& f = *v.bpte;
  const size_t warnings = f.report().findings().size() - f.report().error_count();
  if (!v.ok) {
    std::cerr << v.file << ": INVALID" << (v.strict && warnings > 0 ? " (--strict: warnings fail)" : "") << "\n";
  } else if (!quiet) {
    size_t cases = 0;
    for (const auto& s : f.content().suites) cases += s.test_cases.size();
    std::cout << v.file << ": OK (BundledProgram: " << f.content().suites.size() << " method test suite(s), " << cases
              << " test case(s))" << (warnings ? " with " + std::to_string(warnings) + " warning(s)" : std::string())
              << "\n";
  }
}

void PrintText(const Verification& v, const VerifyOptions& vo, bool quiet) {
  for (const Report* r : v.reports) {
    for (const auto& f : r->findings()) std::cerr << EscapeControl(f.ToString()) << "\n";
  }
  if (v.bpte) return PrintBpteVerdict(v, quiet);
  const auto& sums = v.integrity.files;
  if (!quiet) {
    for (const auto& f : sums) std::cout << RenderChecksumsText(f);
  }
  if (v.sums && sums.empty()) std::cerr << v.file << ": checksums skipped: the file is not valid\n";
  if (!v.manifest_written.empty() && !quiet) std::cout << "manifest written: " << v.manifest_written << "\n";
  if (!vo.manifest.empty() && !sums.empty() && v.ok && !quiet) {
    std::cout << "manifest " << vo.manifest << ": all checksums match\n";
  }
  if (!v.ok) {
    std::cerr << v.file << ": INVALID" << (v.strict && v.verdict.warnings > 0 ? " (--strict: warnings fail)" : "")
              << "\n";
  } else if (!quiet) {
    std::cout << v.file << ": OK" << OkNote(v.verdict) << "\n";
  }
}

// Judges one file (the library's RunVerify: what VerifyJson returns is what --json prints);
// prints it as text, or returns its JSON in `json`.
int VerifyOne(const Input& in, const VerifyOpts& o, nlohmann::json* json) {
  const VerifyOptions vo = OptionsFor(in, o.common, o.vo);
  const Verification v = in.file == "-" ? RunVerify(ReadStdin(), in.name(), vo) : RunVerify(in.file, vo);
  if (json) {
    *json = v.Json();
  } else {
    PrintText(v, vo, o.common.quiet);
  }
  return v.ok ? kOk : kInvalid;
}

// Several files: each judged; JSON {"files": [...], "valid", "summary"}; exit = the worst.
void Run(const CLI::App* c, const VerifyOpts& o) {
  const std::vector<Input> inputs = Inputs(c, o.common);
  if (inputs.size() > 1 && (!o.vo.write_manifest.empty() || !o.vo.manifest.empty())) {
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
  a.Flag("--strict", &o->vo.strict,
         "Warnings fail too (misaligned constants, deprecated constant_buffer, external tensors not "
         "checked for lack of a --ptd, ...)");
  a.Flag("--checksum", &o->vo.checksum,
         "Also compute XXH3-64 checksums of the program region, of each segment and of the padding "
         "(reads all data; without it verify only reads headers and flatbuffers)");
  a.Output("--write-manifest", &o->vo.write_manifest,
           "Write the checksums to this JSON manifest (implies --checksum; only for valid files)", "M.json");
  a.Input("--manifest", &o->vo.manifest,
          "Compare the checksums with this manifest (implies --checksum); a difference is an error "
          "naming the segment",
          InputKind::kFile, "M.json");
  a.Run([c, o]() { Run(c, *o); });
}

}  // namespace ptepack::cli
