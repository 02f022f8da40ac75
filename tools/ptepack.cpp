// ptepack: inspect, verify, pack, repack, split and extract ExecuTorch
// .pte/.ptd files without Python.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "ptepack/error.h"
#include "ptepack/version.h"
#include "serialize/io/file_io.h"
#include "serialize/io/heap.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

int g_exit = kOk;

std::function<void(uint64_t, uint64_t)> ProgressPrinter(bool quiet, const char* what) {
  if (quiet || !::isatty(STDERR_FILENO)) return nullptr;
  return [last = -1, what](uint64_t done, uint64_t total) mutable {
    int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (pct == last) return;
    last = pct;
    std::fprintf(stderr, "\r%s: %3d%% (%llu / %llu MiB)", what, pct, static_cast<unsigned long long>(done >> 20),
                 static_cast<unsigned long long>(total >> 20));
    if (done >= total) std::fprintf(stderr, "\n");
  };
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

bool WantsJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") return true;
  }
  return false;
}

// With --json, a script parsing stdout sees failures too.
void PrintJsonError(int argc, char** argv, const std::string& code, const std::string& message,
                    const std::string& file = "", std::optional<uint64_t> offset = std::nullopt) {
  if (!WantsJson(argc, argv)) return;
  nlohmann::json j = {{"error", {{"code", code}, {"message", message}, {"exit_code", kFailed}}}};
  if (!file.empty()) j["error"]["file"] = file;
  if (offset) j["error"]["offset"] = *offset;
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// `ptepack help [CMD]` (prints the help) and a mistyped subcommand (a
// usage error naming the nearest command): the exit code, or nullopt to parse
// the command line as usual.
std::optional<int> HelpOrUnknown(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  std::string word = argv[1];
  std::vector<std::string> names, shown;  // shown: not the hidden ones
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
    if (!sub->get_group().empty()) shown.push_back(sub->get_name());
  }
  if (word == "help") {
    if (argc == 2) {
      std::cout << app.help();
      return kOk;
    }
    // `help bundle create`: the deepest command the words name.
    CLI::App* cmd = &app;
    int i = 2;
    for (; i < argc; ++i) {
      CLI::App* next = nullptr;
      for (auto* sub : cmd->get_subcommands([](CLI::App*) { return true; })) {
        if (sub->get_name() == argv[i]) next = sub;
      }
      if (!next) break;
      cmd = next;
    }
    if (cmd != &app && i == argc) {
      const std::string parent = CommandPath(cmd->get_parent());
      std::cout << cmd->help(app.get_name() + (parent.empty() ? "" : " " + parent));
      return kOk;
    }
    if (cmd != &app) {
      std::string msg = "no command \"" + CommandPath(cmd) + " " + EscapeControl(argv[i]) + "\"";
      std::string subs;
      for (const auto* s : cmd->get_subcommands([](CLI::App*) { return true; })) subs += " " + s->get_name();
      if (!subs.empty()) msg += " (`ptepack " + CommandPath(cmd) + "` has:" + subs + ")";
      std::cerr << "ptepack: error: " << msg << " [usage]\n";
      PrintJsonError(argc, argv, "usage", msg);
      return kFailed;
    }
    word = argv[2];
  }
  if (std::find(names.begin(), names.end(), word) != names.end()) return std::nullopt;
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& n : shown) {
    size_t d = EditDistance(word, n);
    if (d < best_d) best_d = d, best = n;
  }
  std::string msg = "unknown subcommand \"" + EscapeControl(word) + "\"";
  if (best_d <= 3) msg += "; did you mean \"" + best + "\"?";
  msg += " (commands:";
  for (const auto& n : shown) msg += " " + n;
  msg += "; `ptepack help CMD` for one)";
  std::cerr << "ptepack: error: " << msg << " [usage]\n";
  PrintJsonError(argc, argv, "usage", msg);
  return kFailed;
}

// A command line CLI11 could not parse (a missing argument, an unknown flag, an extra
// positional): one line of ours naming the command, and its help.
int UsageError(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const CLI::App* cmd = &app;
  for (;;) {
    auto subs = cmd->get_subcommands();
    if (subs.empty()) break;
    cmd = subs.front();
  }
  const std::string path = CommandPath(cmd);
  std::string what = e.what();
  for (char& c : what) c = c == '\n' ? ' ' : c;
  if (!what.empty() && what.back() == ' ') what.pop_back();
  const std::string msg = (path.empty() ? "" : path + ": ") + what + " (`ptepack help" +
                          (path.empty() ? "" : " " + path) + "` lists the arguments)";
  std::cerr << "ptepack: error: " << msg << " [usage]\n";
  PrintJsonError(argc, argv, "usage", msg);
  return kFailed;
}

}  // namespace

}  // namespace ptepack::cli

int main(int argc, char** argv) {
  using namespace ptepack::cli;
  ptepack::PrepareHeap();  // this process is ptepack's: huge pages and reuse for its heap (serialize/io/heap.h)
  CLI::App app{
      "ptepack: write, read, check and repack ExecuTorch program files (.pte) and their "
      "external data files (.ptd) natively, without Python.\nExit status: " +
      std::string(kExitStatusHelp)};
  app.name("ptepack");  // usage lines say `ptepack CMD`, for `help CMD` and `CMD --help` alike
  ptepack::InstallInterruptHandlers();
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ptepack ") + PTEPACK_VERSION_STRING);
  app.footer(
      "Also: `ptepack help CMD [SUBCMD]` prints a command's help; `ptepack completion bash|zsh` prints a shell "
      "completion script; `ptepack --man` prints the man page.");
  // Each command declares its arguments through tools/args.h's Args, which checks them
  // before the command's body runs: an input that cannot be read gets the library's
  // located error (open-failed, not-regular-file) and a .bpte where a program is wanted
  // bpte-input; every number goes through config/numbers.h (bad-number), every choice is
  // named (bad-choice); a single-valued option given twice is a usage error; a repeatable
  // option takes one value per occurrence. Whatever a command throws (ptepack::Error) is
  // printed once below, with --json also as {"error": ...} on stdout, and exits 2; a
  // command sets g_exit for the other codes (README, "Exit status").
  RegisterInspect(app);
  RegisterVerify(app);
  RegisterPack(app);
  RegisterRepack(app);
  RegisterSplit(app);
  RegisterExtract(app);
  RegisterChecksum(app);
  RegisterBundle(app);
  RegisterDiff(app);
  RegisterGraph(app);
  RegisterSize(app);
  RegisterMap(app);
  RegisterPlan(app);
  RegisterBpte(app);
  RegisterCompletion(app);
  if (argc == 2 && std::string(argv[1]) == "--man") {  // hidden: the man page
    std::cout << ManPage(app);
    return kOk;
  }
  // `ptepack help [CMD]`, and a mistyped subcommand named with a suggestion.
  if (auto rc = HelpOrUnknown(app, argc, argv)) return *rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return UsageError(app, e, argc, argv);
  } catch (const ptepack::Error& e) {
    std::cerr << "ptepack: " << e.what() << "\n";
    const auto& f = e.finding();
    PrintJsonError(argc, argv, f.code, f.message, f.file, f.offset);
    ptepack::ReraiseInterrupt();
    return kFailed;
  } catch (const std::exception& e) {
    std::cerr << "ptepack: " << e.what() << "\n";
    PrintJsonError(argc, argv, "failed", e.what());
    return kFailed;
  }
  // A signal that arrived after the outputs were complete and in place.
  ptepack::ReraiseInterrupt();
  return g_exit;
}
