// `ptepack verify`: check a file as ExecuTorch's runtime would, and more.
#include <cstdlib>
#include <iostream>

#include "tools/read_common.h"

namespace ptepack::cli {

void RegisterVerify(CLI::App& app) {
  auto o = std::make_shared<Common>();
  auto io = std::make_shared<IntegrityOptions>();
  auto checksum = std::make_shared<bool>(false);
  auto strict = std::make_shared<bool>(false);
  auto* c = app.add_subcommand("verify",
                               "Check a file: headers, FlatBuffers verifier, every segment, offset, size, "
                               "alignment, index and string. Exits 0 if valid, 1 with the problems otherwise.");
  AddCommon(c, *o);
  c->add_flag("--strict", *strict,
              "Warnings fail too (misaligned constants, deprecated constant_buffer, external tensors not "
              "checked for lack of a --ptd, ...)");
  c->add_flag("--checksum", *checksum,
              "Also compute XXH3-64 checksums of the program region, of each segment and of the padding "
              "(reads all data; without it verify only reads headers and flatbuffers)");
  c->add_option("--write-manifest", io->write_manifest,
                "Write the checksums to this JSON manifest (implies --checksum; only for valid files)");
  c->add_option("--manifest", io->manifest,
                "Compare the checksums with this manifest (implies --checksum); a difference is an error "
                "naming the segment")
      ->check(CLI::ExistingFile);
  c->callback([o, io, checksum, strict]() {
    if (o->ptds.empty() && io->manifest.empty() && io->write_manifest.empty() && !*checksum &&
        VerifyBpte(o->file, o->json, *strict)) {
      return;
    }
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    ro.allow_legacy_ptd = o->allow_legacy_ptd;
    LoadedFiles l = LoadFiles(o->file, o->ptds, ro);
    const Verdict verdict = Judge(l, *strict);
    std::vector<const Report*> reports = l.reports();
    bool ok = verdict.ok;
    const size_t warnings = verdict.warnings;
    const std::vector<std::string>& unchecked = verdict.unchecked;
    const size_t external_unchecked = verdict.external_unchecked;
    const bool sums = *checksum || !io->write_manifest.empty() || !io->manifest.empty();
    IntegrityResult ir;
    if (sums && ok) {
      std::vector<const PteFile*> ptes;
      std::vector<const PtdFile*> ptds = l.ptd_ptrs();
      if (l.pte) ptes.push_back(l.pte.get());
      if (l.lone_ptd) ptds.insert(ptds.begin(), l.lone_ptd.get());
      ir = RunIntegrity(ptes, ptds, *io);
      for (const auto& r : ir.reports) reports.push_back(&r);
      ok = ir.ok();
    }
    if (o->json) {
      nlohmann::json j = VerdictJson(o->file, verdict, *strict, reports);
      j["valid"] = ok;
      if (!ir.files.empty()) j["checksums"] = ManifestJson(ir.files)["files"];
      if (!io->write_manifest.empty() && !ir.files.empty()) j["manifest_written"] = io->write_manifest;
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      for (const Report* r : reports) {
        for (const auto& f : r->findings()) std::cerr << EscapeControl(f.ToString()) << "\n";
      }
      for (const auto& f : ir.files) std::cout << RenderChecksumsText(f);
      if (sums && ir.files.empty()) std::cerr << o->file << ": checksums skipped: the file is not valid\n";
      if (!io->write_manifest.empty() && !ir.files.empty()) {
        std::cout << "manifest written: " << io->write_manifest << "\n";
      }
      if (!io->manifest.empty() && !ir.files.empty() && ok) {
        std::cout << "manifest " << io->manifest << ": all checksums match\n";
      }
      if (ok) {
        std::string note;
        if (external_unchecked > 0) {
          // Only the program was checked (repack would refuse it, naming the missing data).
          note = " (program only: " + std::to_string(external_unchecked) +
                 " tensor(s) live in a .ptd data file that was not given; pass it with --ptd to check them)";
        }
        std::vector<std::string> others;  // the external tensors are said above
        for (const auto& u : unchecked) {
          if (u != "external tensors (no --ptd)") others.push_back(u);
        }
        if (!others.empty()) {
          note += " (not checked: ";
          for (size_t i = 0; i < others.size(); ++i) note += (i ? "; " : "") + others[i];
          note += ")";
        }
        if (warnings > 0) note += " with " + std::to_string(warnings) + " warning" + (warnings > 1 ? "s" : "");
        std::cout << o->file << ": OK" << note << "\n";
      } else {
        std::cerr << o->file << ": INVALID" << (*strict && warnings > 0 ? " (--strict: warnings fail)" : "") << "\n";
      }
    }
    g_exit = ok ? kOk : kInvalid;
  });
}

}  // namespace ptepack::cli
