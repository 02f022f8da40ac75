// `ptepack diff`: a semantic diff of two programs.
#include <iostream>
#include <memory>

#include "ptepack/error.h"
#include "serialize/api/insight_api.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {
namespace {

struct DiffOptions {
  std::string a, b;
  std::vector<std::string> ptd_a, ptd_b;
  bool json = false;
  bool quiet = false;
};

}  // namespace

void RegisterDiff(CLI::App& app) {
  auto o = std::make_shared<DiffOptions>();
  auto* c = app.add_subcommand(
      "diff",
      "Compare two programs by content: inferred config and layout, methods added or removed, per method the "
      "operators, instruction and value counts, inputs/outputs and planned memory; constants changed, moved or "
      "the same (XXH3 of their bytes); delegates (backend, payload, compile specs); named data; sizes.\n"
      "Exit status (as diff(1)): 0 the same content -- byte-identical, or \"layout only\" (the same program and "
      "data stored with another alignment, flatbuffer order, or in another .ptd) or \"memory plan only\" (planned "
      "tensors at other offsets, planned buffers of other sizes; both plans pass verify's checks); 1 the content "
      "differs; 2 an error (unreadable or invalid input, usage).");
  Args& a = NewArgs(c);
  a.Input("A.pte", &o->a, "The first program (.pte)", InputKind::kProgram)->required();
  a.Input("B.pte", &o->b, "The second program (.pte)", InputKind::kProgram)->required();
  a.Inputs("--ptd-a", &o->ptd_a, "A .ptd file the first program is loaded with (repeatable)", InputKind::kProgram,
           "F.ptd");
  a.Inputs("--ptd-b", &o->ptd_b, "A .ptd file the second program is loaded with (repeatable)", InputKind::kProgram,
           "F.ptd");
  a.Flag("--json", &o->json, "Print machine-readable JSON instead of text");
  a.Flag("-q,--quiet", &o->quiet, "Print nothing; the exit status says same (0) or different (1)");
  a.Run([o]() {
    const DiffResult r = DiffOf(o->a, o->ptd_a, o->b, o->ptd_b, "--ptd-a/--ptd-b");
    if (o->quiet) {
      // exit status only, as cmp -s
    } else if (o->json) {
      std::cout << DiffJson(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << EscapeControl(RenderDiffText(r), /*keep_newlines=*/true);
    }
    g_exit = r.verdict == DiffVerdict::kDifferent ? kInvalid : kOk;
  });
}

}  // namespace ptepack::cli
