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

// `--tensor PATTERN` that no stored tensor's name contains: said, not left as silence.
std::string NoTensorMatches(const nlohmann::json& d, const std::optional<std::string>& tensor) {
  if (!tensor || !d.contains("methods")) return "";
  for (const auto& m : d["methods"]) {
    if (!m["stored_tensors"].empty()) return "";
  }
  return "no stored tensor's name contains \"" + *tensor + "\" (`--tensor \"\"` lists them all)\n";
}

struct InspectOpts {
  Common common;
  std::string method;
  std::optional<std::string> tensor;
  bool verbose = false;
};

// One file: printed as text, or (json != null) returned as JSON; `stream` prints a lone
// .ptd's JSON entry by entry instead (one file only).
int InspectOne(const Input& in, const InspectOpts& o, nlohmann::json* json, bool stream) {
  const VerifyOptions vo = OptionsFor(in, o.common);
  const Inspection i = in.file == "-" ? RunInspect(ReadStdin(), in.name(), vo) : RunInspect(in.file, vo);
  const int rc = i.ok ? kOk : kInvalid;
  const LoadedFiles& l = i.files;
  if (i.bpte) {
    if (json) *json = i.Json();
    if (!json) std::cout << EscapeControl(bpte::RenderBpteText(i.Json()), /*keep_newlines=*/true);
    return rc;
  }
  if (!l.pte && (stream || !json)) {  // a .ptd: streamed, one entry at a time
    if (json) {
      WritePtdJson(*l.lone_ptd, std::cout);
    } else {
      WritePtdText(*l.lone_ptd, [](const std::string& s) { std::cout << EscapeControl(s, /*keep_newlines=*/true); });
    }
    return rc;
  }
  nlohmann::json d = i.Json();
  FilterDescription(d, o.method, o.tensor);
  if (json) {
    *json = std::move(d);
  } else {
    // Names come from the file: escape control characters (terminal escapes).
    std::cout << EscapeControl(l.pte ? RenderPteText(d, o.verbose) : RenderPtdText(d), /*keep_newlines=*/true)
              << EscapeControl(NoTensorMatches(d, o.tensor), /*keep_newlines=*/true);
  }
  return rc;
}

// Several files: text with a `==> FILE <==` line before each; JSON {"files": [...], "valid"}.
void Run(const CLI::App* c, const InspectOpts& o) {
  const std::vector<Input> inputs = Inputs(c, o.common);
  const bool one = inputs.size() == 1;
  nlohmann::json files = nlohmann::json::array();
  const int worst = ForEachInput(
      inputs,
      [&](const Input& in) {
        if (one && o.common.json) {
          nlohmann::json d;
          int rc = InspectOne(in, o, &d, /*stream=*/true);
          if (!d.is_null()) std::cout << d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
          return rc;
        }
        if (o.common.json) {
          nlohmann::json d;
          int rc = InspectOne(in, o, &d, /*stream=*/false);
          files.push_back({{"file", in.name()}, {"exit_code", rc}, {"description", std::move(d)}});
          return rc;
        }
        if (!one) std::cout << (&in == &inputs.front() ? "" : "\n") << "==> " << EscapeControl(in.name()) << " <==\n";
        return InspectOne(in, o, nullptr, /*stream=*/true);
      },
      [&](const Input& in, const Error& e) {
        if (o.common.json) files.push_back(ErrorJson(in.name(), e));
      });
  g_exit = worst;
  if (!one && o.common.json) {
    nlohmann::json j = {{"files", files}, {"valid", worst == kOk}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto o = std::make_shared<InspectOpts>();
  auto* c = app.add_subcommand("inspect",
                               "Explain a file's layout: header fields, methods with inputs and outputs, "
                               "operators, delegates and where their data lives, segments, constants with "
                               "offsets and alignment, named data, external keys, mutable buffer names, "
                               "stack traces. Problems found are listed too. Several files are explained one "
                               "after the other (exit code: the worst).");
  Args& a = NewArgs(c);
  AddCommon(a, o->common, /*quiet=*/false);
  a.Text("--method", &o->method, "Show only this method", "NAME");
  a.Text("--tensor", &o->tensor,
         "List the stored tensors (constants, external, mutable initial state) whose name contains PATTERN "
         "(\"\" lists all): value index, dtype, shape, bytes, location",
         "PATTERN");
  a.Flag("-v,--verbose", &o->verbose,
         "Also list each setting the file cannot tell (what fits, the value chosen, why); --json always has them");
  a.Run([c, o]() { Run(c, *o); });
}

}  // namespace ptepack::cli
