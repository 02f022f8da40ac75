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
  Args& a = NewArgs(c);
  a.Input("IN.pte", &o->in, "Input .pte", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "The input's existing .ptd files (repeatable)", InputKind::kProgram, "F.ptd");
  a.Text("--external-constants", &o->tag, "Tag of the data file to create (TAG.ptd)", "TAG")->required();
  a.Flag("--mutable-weights", &o->mutable_weights, "Also move mutable weights with an initial state");
  AddOverrides(a, o->ov);
  AddOutputFlags(a, o->out, true);
  a.Run([o]() {
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
