// `ptepack map`: a picture of a file's byte layout (SVG or HTML).
#include <iostream>

#include "ptepack/error.h"
#include "serialize/api/insight_api.h"
#include "serialize/api/read_api.h"
#include "serialize/insight/byte_map.h"
#include "serialize/insight/plan_map.h"
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
    bool memory = false;
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
  a.Flag("--memory", &o->memory,
         "Draw the memory plan instead: per method and planned buffer, instruction index across and byte "
         "offset down, one box per planned tensor while its bytes hold needed data (hover: values, dtype, "
         "shape, interval, operators), the lower bound and the peak marked, overlaps in red");
  a.Flag("-q,--quiet", &o->quiet, "No summary");
  a.Run([o]() {
    const bool html = o->out.size() >= 5 && o->out.compare(o->out.size() - 5, 5, ".html") == 0;
    const bool svg = o->out.size() >= 4 && o->out.compare(o->out.size() - 4, 4, ".svg") == 0;
    if (!html && !svg) throw Error("usage", "map: the output must end in .svg or .html (found " + o->out + ")");
    VerifyOptions vo;
    vo.allow_legacy_ptd = o->allow_legacy_ptd;  // the verdict of verify
    const ReadOptions ro = ReadOptionsFor(vo);  // the one path from options to a reader
    if (o->memory) {
      if (o->log) throw Error("usage", "map: --log is for the byte map, not --memory");
      if (IsPtdFile(o->file))
        throw Error("usage", "map --memory: " + o->file + " is a .ptd file, which plans no memory");
      auto pte = PteFile::Open(o->file, ro);
      // A plan verify flags is what the picture shows (in red); other errors make the tables untrustworthy.
      for (const Finding& f : pte->report().findings()) {
        if (f.severity == Finding::Severity::kError && f.code.rfind("plan-", 0) != 0) throw Error(f);
      }
      const std::string doc = html ? MemoryMapHtml(*pte) : MemoryMapSvg(*pte);
      AtomicFile::Options ao;
      ao.inputs = {o->file};
      AtomicFile out(o->out, ao);
      out.Write(doc.data(), doc.size());
      out.Commit();
      if (!o->quiet) std::cout << o->out << ": memory plan\n";
      return;
    }
    const FileSize f = SizeOf(o->file, {}, o->allow_legacy_ptd).pte;  // the library's `size` of the file
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
