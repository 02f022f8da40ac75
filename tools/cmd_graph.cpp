// `ptepack graph`: each method's instructions as a dataflow graph.
#include <iostream>

#include "ptepack/error.h"
#include "serialize/api/read_api.h"
#include "serialize/insight/graph.h"
#include "serialize/io/file_io.h"
#include "serialize/read/pte_reader.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {
namespace {

struct GraphCliOptions {
  std::string file, out, method;
  bool quiet = false;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void RegisterGraph(CLI::App& app) {
  auto o = std::make_shared<GraphCliOptions>();
  auto* c = app.add_subcommand(
      "graph",
      "Draw each method's instruction chain as a dataflow graph: operator and delegate-call nodes (backend id, "
      "processed size), tensor values as edges (value index, dtype, shape) from the instruction that first names "
      "them to each later user; inputs, outputs and constants marked. -o FILE.dot writes Graphviz DOT (always "
      "available); FILE.svg and FILE.html run Graphviz `dot` (Debian package graphviz). Without -o, DOT goes to "
      "stdout.");
  Args& a = NewArgs(c);
  a.Input("FILE", &o->file, "A .pte program", InputKind::kProgram)->required();
  a.Text("--method", &o->method, "Only this method (default: all)", "NAME");
  a.Output("-o,--output", &o->out, "Output: .dot/.gv (DOT), .svg or .html (through Graphviz)", "G.dot|G.svg|G.html");
  a.Flag("-q,--quiet", &o->quiet, "No summary on stderr");
  a.Run([o]() {
    std::string format = "dot";
    if (EndsWith(o->out, ".svg")) {
      format = "svg";
    } else if (EndsWith(o->out, ".html") || EndsWith(o->out, ".htm")) {
      format = "html";
    } else if (!o->out.empty() && !EndsWith(o->out, ".dot") && !EndsWith(o->out, ".gv")) {
      throw Error("usage", "-o " + o->out + ": the output's name must end in .dot, .gv, .svg or .html");
    }
    auto pte = PteFile::Open(o->file);
    pte->report().ThrowIfError();  // an invalid file stops the command (exit 2), as in size, map, diff
    std::string text = GraphDot(*pte, GraphOptions{o->method});
    if (format != "dot") text = RunGraphviz(text, "svg");
    if (format == "html") text = SvgToHtml(text, "ptepack graph: " + o->file);
    if (o->out.empty()) {
      std::cout << text;
      return;
    }
    CheckOutputPath(o->out);
    AtomicFile f(o->out, AtomicFile::Options{{o->file}});
    f.Write(text.data(), text.size());
    f.Commit();
    if (!o->quiet) std::cerr << "wrote " << o->out << " (" << text.size() << " bytes)\n";
  });
}

}  // namespace ptepack::cli
