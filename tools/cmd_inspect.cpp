// `ptepack inspect`: explain a file's layout.
#include <cstdlib>
#include <iostream>

#include "tools/read_common.h"

namespace ptepack::cli {
namespace {

// --method: only the named method (and its external tensors); --tensor: list
// the stored tensors whose name contains the pattern.
void FilterDescription(nlohmann::json& d, const std::string& method, const std::optional<std::string>& tensor) {
  if (!d.contains("methods")) return;
  if (!method.empty()) {
    nlohmann::json kept = nlohmann::json::array();
    std::string names;
    for (const auto& m : d["methods"]) {
      names += (names.empty() ? "" : ", ") + m["name"].get<std::string>();
      if (m["name"] == method) kept.push_back(m);
    }
    if (kept.empty()) throw Error("usage", "no method \"" + EscapeControl(method) + "\" (methods: " + names + ")");
    d["methods"] = kept;
    nlohmann::json ext = nlohmann::json::array();
    for (const auto& e : d["external_tensors"]) {
      if (e["method"] == method) ext.push_back(e);
    }
    d["external_tensors"] = ext;
  }
  if (!tensor) return;
  d["list_tensors"] = true;
  for (auto& m : d["methods"]) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& t : m["stored_tensors"]) {
      if (t["name"].get<std::string>().find(*tensor) != std::string::npos) kept.push_back(t);
    }
    m["stored_tensors"] = kept;
  }
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto o = std::make_shared<Common>();
  auto* c = app.add_subcommand("inspect",
                               "Explain a file's layout: header fields, methods with inputs and outputs, "
                               "operators, delegates and where their data lives, segments, constants with "
                               "offsets and alignment, named data, external keys, mutable buffer names, "
                               "stack traces. Problems found are listed too.");
  AddCommon(c, *o);
  auto method = std::make_shared<std::string>();
  auto tensor = std::make_shared<std::optional<std::string>>();
  c->add_option("--method", *method, "Show only this method");
  c->add_option("--tensor", *tensor,
                "List the stored tensors (constants, external, mutable initial state) whose name contains PATTERN "
                "(\"\" lists all): value index, dtype, shape, bytes, location");
  c->callback([o, method, tensor]() {
    if (o->ptds.empty() && InspectBpte(o->file, o->json)) return;
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    ro.allow_legacy_ptd = true;  // inspect explains legacy files; verify judges them
    LoadedFiles l = LoadFiles(o->file, o->ptds, ro);
    if (!l.pte) {  // a .ptd: streamed, one entry at a time
      if (o->json) {
        WritePtdJson(*l.lone_ptd, std::cout);
      } else {
        WritePtdText(*l.lone_ptd, [](const std::string& s) { std::cout << EscapeControl(s, /*keep_newlines=*/true); });
      }
      bool ok = l.lone_ptd->ok();
      for (const auto& p : l.ptds) ok = ok && p->ok();
      g_exit = ok ? kOk : kInvalid;
      return;
    }
    nlohmann::json d = InspectDocument(l);
    FilterDescription(d, *method, *tensor);
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
