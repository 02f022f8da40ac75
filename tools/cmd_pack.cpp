// `ptepack pack`: write a program from a JSON spec.
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

void RegisterPack(CLI::App& app) {
  struct O {
    std::string config, spec;
    OutputFlags out;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "pack",
      "Build a program from a JSON description. SPEC is ExecuTorch's own JSON form of a Program (what "
      "`flatc --json` prints for program.fbs) extended with \"data\" files: see README, \"pack spec\".");
  c->add_option("CONFIG", o->config, "BackendConfig JSON file")->required()->check(CLI::ExistingFile);
  c->add_option("SPEC", o->spec, "Program description JSON")->required()->check(CLI::ExistingFile);
  AddOutputFlags(c, o->out, false);
  c->callback([o]() {
    ResolveOutput(o->out, "");
    BackendConfig cfg = LoadConfigFile(o->config);
    WriteAndReport(LoadSpec(o->spec), cfg, {o->config, o->spec}, o->out);
  });
}

}  // namespace ptepack::cli
