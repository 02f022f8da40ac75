// `ptepack split`: move constants (and mutable weights) into .ptd files.
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

void RegisterSplit(CLI::App& app) {
  struct O {
    std::string in, tag;
    std::vector<std::string> ptds;
    bool mutable_weights = false;
    Overrides ov;
    OutputFlags out;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "split",
      "Move constant tensors (and with --mutable-weights, trainable weights) out of a program into TAG.ptd "
      "next to the output. Tensors keep their names as keys; unnamed constants are keyed constant_<index>.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's existing .ptd files")->check(CLI::ExistingFile);
  c->add_option("--external-constants", o->tag, "Tag of the data file to create (TAG.ptd)")->required();
  c->add_flag("--mutable-weights", o->mutable_weights, "Also move mutable weights with an initial state");
  AddOverrides(c, o->ov);
  AddOutputFlags(c, o->out, true);
  c->callback([o]() {
    ResolveOutput(o->out, o->in);
    SplitOptions so;
    so.tag = o->tag;
    so.mutable_weights = o->mutable_weights;
    so.ptd = o->ptds;
    so.edit = [o](BackendConfig& cfg) { Apply(o->ov, cfg); };
    so.write = MakeWriteOptions(o->out);
    RepackResult rr = Split(o->in, o->out.out, so);
    ReportWritten(rr.written, rr.config, o->out);
    const WriteResult& r = rr.written;
    if (r.ptds.empty()) {
      std::cerr << "ptepack: note: " << o->in << " has no constants to move (none stored in the program"
                << (o->mutable_weights ? ", no mutable weights" : "") << "); no " << o->tag << ".ptd was "
                << (o->out.dry_run ? "planned" : "written") << "\n";
    }
  });
}

}  // namespace ptepack::cli
