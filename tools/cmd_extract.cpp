// `ptepack extract`: a program's parts as files (spec.json, config.json, blobs).
#include <iostream>

#include "serialize/api/extract.h"
#include "tools/write_common.h"

namespace ptepack::cli {

void RegisterExtract(CLI::App& app) {
  struct O {
    std::string in, dir;
    std::vector<std::string> ptds;
    bool force = false, dry_run = false, quiet = false, json = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "extract",
      "Write a program's parts to a directory: program.json (the flatbuffer as JSON, as laid out), one file "
      "per segment, constant, delegate payload, mutable buffer and named blob, spec.json and config.json "
      "(`ptepack pack config.json spec.json -o X.pte` rebuilds the input byte for byte) and index.json "
      "describing them. The directory is filled under a temporary name and renamed into place when "
      "complete; an existing non-empty directory is replaced only with --force.");
  Args& a = NewArgs(c);
  a.Input("IN.pte", &o->in, "Input .pte", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "The input's .ptd files (repeatable)", InputKind::kProgram, "F.ptd");
  a.Output("-o,--output", &o->dir, "Output directory (created)", "DIR")->required();
  a.Flag("--force", &o->force, "Replace an existing non-empty output directory");
  a.Flag("--dry-run", &o->dry_run, "List the files that would be written; write nothing");
  a.Flag("-q,--quiet", &o->quiet, "No progress on stderr and no summary");
  a.Flag("--json", &o->json,
         "Print a JSON summary: the directory, each file with its size, whether pack reproduces the input, "
         "the config");
  a.Run([o]() {
    const ExtractRun r =
        Extract(o->in, o->ptds, o->dir, o->force, o->dry_run, ProgressPrinter(o->quiet, "writing files"));
    const Extraction& x = r.extraction;
    if (o->json) {
      std::cout << r.Json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return;
    }
    if (o->dry_run) {
      std::cout << "would write " << (r.target.non_empty ? "(replacing the directory) " : "") << r.target.dir << "/:\n";
      for (const auto& f : x.files) std::cout << "  " << f.name << " (" << f.data.size << " bytes)\n";
      return;
    }
    if (o->quiet) return;
    std::cout << "extracted to " << o->dir << "\n";
    if (!x.reproduces_input()) {
      std::cout << "note: `pack config.json spec.json` writes an equivalent file, not the same bytes (" << x.note()
                << ")\n";
    }
  });
}

}  // namespace ptepack::cli
