#include "tools/args.h"

#include <algorithm>
#include <map>

#include "config/numbers.h"
#include "ptepack/error.h"
#include "serialize/bpte/bpte.h"
#include "serialize/io/file_io.h"

namespace ptepack::cli {

namespace {

std::map<const CLI::Option*, ArgInfo>& Infos() {
  static std::map<const CLI::Option*, ArgInfo> infos;
  return infos;
}

[[noreturn]] void Usage(const std::string& message) { throw Error("usage", message); }

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// The one value of a single-valued option (nullptr when not given).
const std::string* Once(const std::string& label, const std::vector<std::string>& v) {
  if (v.empty()) return nullptr;
  if (v.size() > 1) {
    std::string all;
    for (const auto& x : v) all += (all.empty() ? "" : ", ") + Quote(x);
    Usage(label + ": given " + std::to_string(v.size()) + " times (" + all + "); give it once");
  }
  return &v.front();
}

}  // namespace

const ArgInfo* InfoOf(const CLI::Option* o) {
  auto it = Infos().find(o);
  return it == Infos().end() ? nullptr : &it->second;
}

std::string CommandPath(const CLI::App* c) {
  std::string path;
  for (; c && c->get_parent(); c = c->get_parent()) path = c->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

void CheckInput(const std::string& path, InputKind kind, const std::string& command) {
  if (kind == InputKind::kJudged) return;
  CheckInputFile(path);
  if (kind == InputKind::kProgram && bpte::IsBpteFile(path)) {
    throw Error("bpte-input",
                "a BundledProgram (.bpte), not a program: `ptepack bpte extract-program " + path +
                    " -o P.pte` writes the program it wraps, for `ptepack " + command + " P.pte`",
                path);
  }
}

CLI::Option* Args::Raw(const std::string& name, const std::string& help, ArgInfo info,
                       std::function<void(const std::string&, const std::vector<std::string>&)> convert) {
  raw_.emplace_back();
  std::vector<std::string>* store = &raw_.back();
  CLI::Option* o = c_->add_option(name, *store, help);
  const bool positional = o->get_positional();
  o->type_name(positional ? "" : info.value);  // a positional's name says it
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (!info.repeatable) o->expected(1);  // one value per occurrence; a second occurrence is refused below
  // `--ptd a.ptd b.pte`: b.pte stays a positional; `diff A B`: A takes one.
  if (!(info.repeatable && positional)) o->allow_extra_args(false);
  Infos()[o] = std::move(info);
  const std::string label = o->get_name();
  steps_.push_back([store, label, convert]() { convert(label, *store); });
  return o;
}

CLI::Option* Args::Input(const std::string& name, std::string* out, const std::string& help, InputKind kind,
                         const std::string& value) {
  const CLI::App* c = c_;
  return Raw(name, help, {value, {}, false, true}, [out, kind, c](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) {
      CheckInput(*s, kind, CommandPath(c));
      *out = *s;
    }
  });
}

CLI::Option* Args::Inputs(const std::string& name, std::vector<std::string>* out, const std::string& help,
                          InputKind kind, const std::string& value) {
  const CLI::App* c = c_;
  return Raw(name, help, {value, {}, true, true}, [out, kind, c](const std::string&, const auto& v) {
    for (const auto& s : v) CheckInput(s, kind, CommandPath(c));
    *out = v;
  });
}

CLI::Option* Args::Output(const std::string& name, std::string* out, const std::string& help,
                          const std::string& value) {
  return Raw(name, help, {value, {}, false, true}, [out](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) {
      if (s->empty()) Usage(label + ": the output's name is empty");
      *out = *s;
    }
  });
}

CLI::Option* Args::Text(const std::string& name, std::string* out, const std::string& help, const std::string& value) {
  return Raw(name, help, {value, {}, false, false}, [out](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) *out = *s;
  });
}

CLI::Option* Args::Text(const std::string& name, std::optional<std::string>* out, const std::string& help,
                        const std::string& value) {
  return Raw(name, help, {value, {}, false, false}, [out](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) *out = *s;
  });
}

CLI::Option* Args::Alignment(const std::string& name, std::optional<uint64_t>* out, const std::string& help) {
  return Raw(name, help, {"N", {}, false, false}, [out](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) *out = ParseAlignment(label, *s);
  });
}

CLI::Option* Args::Number(const std::string& name, uint64_t* out, uint64_t min, uint64_t max, const std::string& help) {
  return Raw(name, help, {"N", {}, false, false}, [out, min, max](const std::string& label, const auto& v) {
    if (const std::string* s = Once(label, v)) *out = ParseNumber(label, *s, min, max);
  });
}

CLI::Option* Args::Choice(const std::string& name, std::string* out, const std::vector<std::string>& choices,
                          const std::string& help) {
  std::string value;
  for (const auto& c : choices) value += (value.empty() ? "" : "|") + c;
  return Raw(name, help, {value, choices, false, false}, [out, choices](const std::string& label, const auto& v) {
    const std::string* s = Once(label, v);
    if (!s) return;
    if (std::find(choices.begin(), choices.end(), *s) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      Finding f;
      f.code = "bad-choice";
      f.message = label + ": must be one of " + list;
      f.found = Quote(*s);
      throw Error(std::move(f));
    }
    *out = *s;
  });
}

CLI::Option* Args::Bool(const std::string& name, std::optional<bool>* out, const std::string& help) {
  auto text = std::make_shared<std::string>();
  CLI::Option* o = Choice(name, text.get(), {"true", "false"}, help);
  steps_.push_back([text, out]() {
    if (!text->empty()) *out = *text == "true";
  });
  return o;
}

CLI::Option* Args::Flag(const std::string& name, bool* out, const std::string& help) {
  CLI::Option* o = c_->add_flag(name, *out, help);
  Infos()[o] = ArgInfo{};
  return o;
}

void Args::Run(std::function<void()> body) {
  c_->callback([this, body]() {
    for (const auto& step : steps_) step();
    body();
  });
}

Args& NewArgs(CLI::App* c) {
  static std::vector<std::unique_ptr<Args>> all;
  all.push_back(std::make_unique<Args>(c));
  return *all.back();
}

}  // namespace ptepack::cli
