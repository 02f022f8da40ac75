// `ptepack pack`: write a program from a JSON spec.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "serialize/api/package_access.h"
#include "tools/write_common.h"

namespace ptepack::cli {

void RegisterPack(CLI::App& app) {
  struct O {
    std::string config, spec;
    OutputFlags out;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "pack",
      "Build a program from a JSON description. SPEC is ExecuTorch's own JSON form of a Program (what "
      "`flatc --json` prints for program.fbs) extended with \"data\" files: see README, \"Pack specs\".");
  Args& a = NewArgs(c);
  a.Input("CONFIG.json", &o->config, "BackendConfig JSON file", InputKind::kFile)->required();
  a.Input("SPEC.json", &o->spec, "Program description JSON", InputKind::kFile)->required();
  AddOutputFlags(a, o->out, false);
  a.Run([o]() {
    ResolveOutput(o->out, "");
    BackendConfig cfg = LoadConfigFile(o->config);
    WriteAndReport(PackageOf(LoadSpec(o->spec)), cfg, {o->config, o->spec}, o->out);
  });
}

}  // namespace ptepack::cli
