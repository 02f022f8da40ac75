// `ptepack repack`: rewrite a program under another config.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/write_common.h"

namespace ptepack::cli {

void RegisterRepack(CLI::App& app) {
  struct O {
    std::string in;
    std::vector<std::string> ptds;
    Overrides ov;
    OutputFlags out;
    bool upgrade_ptd = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "repack",
      "Rewrite a program with a different layout. Starts from the config that reproduces the input byte for "
      "byte (inferred), then applies --config and the flags. .ptd files given with --ptd are rewritten next to "
      "the output under their own names.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's .ptd files")->check(CLI::ExistingFile);
  AddOverrides(c, o->ov);
  c->add_flag("--upgrade-ptd", o->upgrade_ptd,
              "Rewrite .ptd files in the legacy (pre June 2025) FlatTensor layout in the current layout, which "
              "current ExecuTorch runtimes require");
  AddOutputFlags(c, o->out, true);
  c->callback([o]() {
    ResolveOutput(o->out, o->in);
    RepackOptions ro;
    ro.ptd = o->ptds;
    ro.edit = [o](BackendConfig& cfg) { Apply(o->ov, cfg); };
    ro.upgrade_ptd = o->upgrade_ptd;
    ro.write = MakeWriteOptions(o->out);
    RepackResult r = Repack(o->in, o->out.out, ro);
    ReportWritten(r.written, r.config, o->out, {{"input_reproducible", r.input_reproducible}});
    // --emit-* true cannot bring back what the input no longer has: say so.
    if (o->ov.emit_stacktrace.value_or(false) && !r.input_has_stacktrace) {
      std::cerr << "ptepack: note: " << o->in
                << " has no stack traces; --emit-stacktrace true cannot add them (re-export with them)\n";
    }
    if (o->ov.emit_mutable_buffer_names.value_or(false) && !r.input_has_mutable_buffer_names) {
      std::cerr << "ptepack: note: " << o->in
                << " has no mutable buffer names; --emit-mutable-buffer-names true cannot add them\n";
    }
  });
}

}  // namespace ptepack::cli
