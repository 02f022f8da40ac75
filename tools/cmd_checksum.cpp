// `ptepack checksum`: XXH3 checksums of a file's regions, and manifests.
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "serialize/api/insight_api.h"
#include "serialize/api/read_api.h"
#include "serialize/bundle/bundle.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

namespace {

struct ChecksumOpts {
  std::vector<std::string> files, ptds;
  bool json = false;
  bool quiet = false;
  IntegrityOptions io;
};

}  // namespace

void RegisterChecksum(CLI::App& app) {
  auto o = std::make_shared<ChecksumOpts>();
  auto* c = app.add_subcommand("checksum",
                               "XXH3-64 checksums of the regions of .pte/.ptd files (program, each segment, "
                               "padding); write them to a JSON manifest or compare with one. Files are verified "
                               "first. Same as `verify --checksum`, for several files at once.");
  Args& a = NewArgs(c);
  a.Inputs("FILE", &o->files, ".pte and .ptd files", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "More .ptd files (the same as giving them as FILE; repeatable)", InputKind::kProgram,
           "F.ptd");
  a.Flag("--json", &o->json, "Print JSON (the manifest's form)");
  a.Flag("-q,--quiet", &o->quiet, "Print no checksums, only problems (for --manifest/--write-manifest)");
  a.Output("--write-manifest", &o->io.write_manifest, "Write the checksums to this JSON manifest", "M.json");
  a.Input("--manifest", &o->io.manifest, "Compare with this manifest; a difference exits 1 naming the segment",
          InputKind::kFile, "M.json");
  a.Run([o]() {
    o->files.insert(o->files.end(), o->ptds.begin(), o->ptds.end());
    o->ptds.clear();
    const ChecksumRun run = RunChecksums(o->files, o->io);
    const IntegrityResult& ir = run.ir;
    const std::vector<const Report*>& reports = run.reports;
    const bool ok = run.ok;
    if (o->json) {
      std::cout << ChecksumJson(run).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      for (const Report* r : reports) {
        for (const auto& f : r->findings()) std::cerr << f.ToString() << "\n";
      }
      if (!o->quiet) {
        for (const auto& f : ir.files) std::cout << RenderChecksumsText(f);
      }
      if (!o->io.write_manifest.empty() && !ir.files.empty() && !o->quiet) {
        std::cout << "manifest written: " << o->io.write_manifest << "\n";
      }
      if (!o->io.manifest.empty() && ok && !o->quiet)
        std::cout << "manifest " << o->io.manifest << ": all checksums match\n";
      if (!ok) std::cerr << "checksum: INVALID\n";
    }
    g_exit = ok ? kOk : kInvalid;
  });
}

}  // namespace ptepack::cli
