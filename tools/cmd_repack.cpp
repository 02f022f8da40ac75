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
    Input in = LoadInput(o->in, o->ptds);
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    InferredConfig inf = InferConfig(*in.pte, pkg, in.ptrs);
    BackendConfig cfg = inf.config;
    Apply(o->ov, cfg);
    if (o->upgrade_ptd) {
      for (auto& ef : pkg.external) UpgradeLegacy(ef);
    }
    WriteAndReport(pkg, cfg, in.paths, o->out, {{"input_reproducible", inf.exact}});
    // --emit-* true cannot bring back what the input no longer has: say so.
    bool traces = false, names = false;
    if (const auto* plans = in.pte->program() ? in.pte->program()->execution_plan() : nullptr) {
      for (const auto* plan : *plans) {
        if (plan->chains()) {
          for (const auto* ch : *plan->chains()) traces = traces || (ch->stacktrace() && ch->stacktrace()->size());
        }
        if (!plan->values()) continue;
        for (const auto* v : *plan->values()) {
          if (v->val_type() != executorch_flatbuffer::KernelTypes::Tensor || !v->val()) continue;
          const auto* eti = v->val_as_Tensor()->extra_tensor_info();
          names = names || (eti && eti->fully_qualified_name() &&
                            eti->location() != executorch_flatbuffer::TensorDataLocation::EXTERNAL);
        }
      }
    }
    if (o->ov.emit_stacktrace.value_or(false) && !traces) {
      std::cerr << "ptepack: note: " << o->in
                << " has no stack traces; --emit-stacktrace true cannot add them (re-export with them)\n";
    }
    if (o->ov.emit_mutable_buffer_names.value_or(false) && !names) {
      std::cerr << "ptepack: note: " << o->in
                << " has no mutable buffer names; --emit-mutable-buffer-names true cannot add them\n";
    }
  });
}

}  // namespace ptepack::cli
