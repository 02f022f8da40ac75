// `ptepack repack`: rewrite a program under another config.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "serialize/api/repack_json.h"
#include "tools/write_common.h"

namespace ptepack::cli {

namespace {

// Says whether the input was reproduced; with --expect-identical a
// difference is an error (exit 3, and the --json error object).
void ReportIdentity(const IdentityCheck& id, bool expect, const OutputFlags& f) {
  if (!id.checked) return;
  if (id.identical) {
    if (!f.quiet && !f.json) std::cerr << "ptepack: the output is the input byte for byte\n";
    return;
  }
  const ByteDifference& d = id.differences.front();
  std::string msg = "the output is not the input byte for byte: " + d.ToString();
  if (!expect) {
    if (!f.quiet) std::cerr << "ptepack: note: " << msg << "\n";
    return;
  }
  std::cerr << "ptepack: error: " << msg << " [not-identical]\n";
  if (f.json) {
    nlohmann::json j = {{"error",
                         {{"code", "not-identical"},
                          {"message", msg},
                          {"file", d.file},
                          {"offset", d.offset},
                          {"exit_code", kNotIdentical}}}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  g_exit = kNotIdentical;
}

}  // namespace

void RegisterRepack(CLI::App& app) {
  struct O {
    std::string in;
    std::vector<std::string> ptds;
    Overrides ov;
    OutputFlags out;
    bool upgrade_ptd = false;
    bool expect_identical = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "repack",
      "Rewrite a program with a different layout. Starts from the config that reproduces the input byte for "
      "byte (inferred), then applies --config and the flags. .ptd files given with --ptd are rewritten next to "
      "the output under their own names.");
  Args& a = NewArgs(c);
  a.Input("IN.pte", &o->in, "Input .pte", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "The input's .ptd files (repeatable)", InputKind::kProgram, "F.ptd");
  AddOverrides(a, o->ov);
  a.Flag("--upgrade-ptd", &o->upgrade_ptd,
         "Rewrite .ptd files in the legacy (pre June 2025) FlatTensor layout in the current layout, which "
         "current ExecuTorch runtimes require");
  a.Flag("--expect-identical", &o->expect_identical,
         "Fail with exit status 3 unless the output is the input byte for byte (no layout flags; the first "
         "difference is named). The whole output (.pte and .ptd files, padding included) is compared with "
         "the input before anything is written: exit 3 leaves nothing behind");
  c->footer(
      "Without layout flags repack reports whether it reproduced the input byte for byte and, where not, the first "
      "differing offset and region. Exit status: 0 written; 2 usage, I/O or configuration error; 3 "
      "--expect-identical and the output differs from the input.");
  AddOutputFlags(a, o->out, true);
  a.Run([o]() {
    ResolveOutput(o->out, o->in);
    RepackOptions ro;
    ro.ptd = o->ptds;
    ro.edit = [o](BackendConfig& cfg) { Apply(o->ov, cfg); };
    ro.upgrade_ptd = o->upgrade_ptd;
    ro.write = MakeWriteOptions(o->out);
    ro.expect_identical = o->expect_identical;
    RepackResult r = Repack(o->in, o->out.out, ro);
    const bool differs = r.identity.checked && !r.identity.identical;
    if (!r.written.pte.path.empty() && !(o->expect_identical && differs && o->out.json)) {
      ReportWritten(r.written, r.config, o->out,
                    {{"input_reproducible", r.input_reproducible}, {"identity", IdentityJson(r.identity)}});
    }
    ReportIdentity(r.identity, o->expect_identical, o->out);
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
