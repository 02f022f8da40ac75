// `ptepack map`: a picture of a file's byte layout (SVG or HTML).
#include <iostream>

#include "ptepack/error.h"
#include "serialize/api/read_api.h"
#include "serialize/insight/byte_map.h"
#include "serialize/io/file_io.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

void RegisterMap(CLI::App& app) {
  struct Options {
    std::string file, out;
    bool log = false;
    bool quiet = false;
    bool allow_legacy_ptd = false;
  };
  auto o = std::make_shared<Options>();
  auto* c = app.add_subcommand("map",
                               "Draw the file's byte layout: header, flatbuffer, each segment and the padding "
                               "between them as proportional bands coloured by kind, with hover titles (name, "
                               "offset, size) and a legend. Writes SVG, or HTML when OUT ends in .html.");
  Args& a = NewArgs(c);
  a.Input("FILE", &o->file, "A .pte program (or a .ptd data file)", InputKind::kProgram)->required();
  a.Output("-o,--output", &o->out, "Output file: NAME.svg or NAME.html", "MAP.svg|MAP.html")->required();
  a.Flag("--log", &o->log, "Band widths proportional to log2(1 + bytes), so that small parts show");
  a.Flag("--allow-legacy-ptd", &o->allow_legacy_ptd,
         "Accept .ptd files in the FlatTensor layout of before June 2025, as verify --allow-legacy-ptd does");
  a.Flag("-q,--quiet", &o->quiet, "No summary");
  a.Run([o]() {
    const bool html = o->out.size() >= 5 && o->out.compare(o->out.size() - 5, 5, ".html") == 0;
    const bool svg = o->out.size() >= 4 && o->out.compare(o->out.size() - 4, 4, ".svg") == 0;
    if (!html && !svg) throw Error("usage", "map: the output must end in .svg or .html (found " + o->out + ")");
    ReadOptions ro;
    ro.allow_legacy_ptd = o->allow_legacy_ptd;  // the verdict of verify
    FileSize f;
    if (IsPtdFile(o->file)) {
      f = AnalyzePtdSize(*PtdFile::Open(o->file, ro));
    } else {
      auto pte = PteFile::Open(o->file, ro);
      f = AnalyzeSize(*pte, {}).pte;
    }
    ByteMapOptions mo;
    mo.log_scale = o->log;
    const std::string doc = html ? ByteMapHtml(f, mo) : ByteMapSvg(f, mo);
    AtomicFile::Options ao;
    ao.inputs = {o->file};
    AtomicFile out(o->out, ao);
    out.Write(doc.data(), doc.size());
    out.Commit();
    if (!o->quiet) std::cout << o->out << ": " << f.bands.size() << " bands\n";
  });
}

}  // namespace ptepack::cli
