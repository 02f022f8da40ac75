// `ptepack inspect`: explain a file's layout.
#include <cstdlib>
#include <iostream>

#include "tools/read_common.h"

namespace ptepack::cli {

void RegisterInspect(CLI::App& app) {
  auto o = std::make_shared<Common>();
  auto* c = app.add_subcommand("inspect",
                               "Explain a file's layout: header fields, methods with inputs and outputs, "
                               "operators, delegates and where their data lives, segments, constants with "
                               "offsets and alignment, named data, external keys, mutable buffer names, "
                               "stack traces. Problems found are listed too.");
  AddCommon(c, *o);
  c->callback([o]() {
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    ro.allow_legacy_ptd = true;  // inspect explains legacy files; verify judges them
    LoadedFiles l = LoadFiles(o->file, o->ptds, ro);
    nlohmann::json d = InspectDocument(l);
    if (o->json) {
      std::cout << d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      // Names come from the file: escape control characters (terminal escapes).
      std::cout << EscapeControl(l.pte ? RenderPteText(d) : RenderPtdText(d), /*keep_newlines=*/true);
    }
    bool ok = l.pte ? l.pte->ok() : l.lone_ptd->ok();
    for (const auto& p : l.ptds) ok = ok && p->ok();
    g_exit = ok ? kOk : kInvalid;
  });
}

}  // namespace ptepack::cli
