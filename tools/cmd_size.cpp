// `ptepack size`: where every byte of a program (and its .ptd files) goes.
#include <iostream>

#include "serialize/api/insight_api.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

void RegisterSize(CLI::App& app) {
  struct Options {
    std::string file;
    std::vector<std::string> ptds;
    uint64_t top = 10;
    std::string sort = "bytes";
    bool json = false;
    bool allow_legacy_ptd = false;
  };
  auto o = std::make_shared<Options>();
  auto* c = app.add_subcommand("size",
                               "Where every byte goes: header, the flatbuffer's parts (execution plans, values, "
                               "instructions, operators, strings, stack traces, ...), segments by kind, padding by "
                               "cause, .ptd contents; the largest tensors and delegates; runtime memory per method. "
                               "Parts add up to the file size exactly.");
  Args& a = NewArgs(c);
  a.Input("FILE", &o->file, "A .pte program (or a .ptd data file)", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "External data file the program refers to (repeatable)", InputKind::kProgram, "F.ptd");
  a.Number("--top", &o->top, 0, 1000000, "How many tensors and delegates to list (default 10)");
  a.Choice("--sort", &o->sort, {"bytes", "name"},
           "Order of the tensor and delegate lists: bytes (largest first) or name");
  a.Flag("--json", &o->json, "Print machine-readable JSON instead of text");
  a.Flag("--allow-legacy-ptd", &o->allow_legacy_ptd,
         "Accept .ptd files in the FlatTensor layout of before June 2025, as verify --allow-legacy-ptd does");
  a.Run([o]() {
    const SizeSort sort = o->sort == "name" ? SizeSort::kName : SizeSort::kBytes;
    // A file with errors is not broken down (its tables cannot be trusted): its first
    // error stops the command (exit 2), as for every command but verify/inspect/checksum.
    const SizeReport r = SizeOf(o->file, o->ptds, o->allow_legacy_ptd);
    const nlohmann::json j = SizeJson(r, o->top, sort);
    const std::string text = RenderSizeText(r, o->top, sort);
    if (o->json) {
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << EscapeControl(text, /*keep_newlines=*/true);
    }
    g_exit = kOk;
  });
}

}  // namespace ptepack::cli
