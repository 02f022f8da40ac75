// Subcommands of the ptepack CLI. Each lives in its own cmd_*.cpp and
// registers itself on the app; `main` only dispatches.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ptepack::cli {

// Exit codes shared by all commands.
enum Exit : int {
  kOk = 0,
  kInvalid = 1,       // the input file is not valid (verify found errors)
  kFailed = 2,        // usage, I/O or configuration error
  kNotIdentical = 3,  // repack --expect-identical: the output is not the input byte for byte
};

// The exit codes in one sentence (--help, the man page; README, "Exit status").
inline constexpr const char* kExitStatusHelp =
    "0 success (verify/inspect/checksum: every file valid; diff: the same content); 1 the answer is no: a file is "
    "not valid or differs from the manifest (verify, inspect, checksum), the content differs (diff); 2 an error, "
    "nothing written: usage, a bad number or choice, an input that cannot be read, an input that is not valid given "
    "to any other command (its first error), bad JSON or config, I/O, an output that would not be valid; 3 repack "
    "--expect-identical and the output is not the input byte for byte.";

// A command sets this to its exit code from its callback.
extern int g_exit;

void RegisterInspect(CLI::App& app);
void RegisterVerify(CLI::App& app);
void RegisterPack(CLI::App& app);
void RegisterRepack(CLI::App& app);
void RegisterSplit(CLI::App& app);
void RegisterExtract(CLI::App& app);
void RegisterChecksum(CLI::App& app);
void RegisterBundle(CLI::App& app);
void RegisterDiff(CLI::App& app);
void RegisterGraph(CLI::App& app);
void RegisterSize(CLI::App& app);
void RegisterMap(CLI::App& app);
void RegisterPlan(CLI::App& app);
// Hidden: `ptepack completion bash|zsh`, generated from the parser (tools/cmd_completion.cpp).
void RegisterCompletion(CLI::App& app);
// The man page (roff), generated from the parser: `ptepack --man`.
std::string ManPage(const CLI::App& app);
void RegisterBpte(CLI::App& app);

// `s` with control characters (and DEL) shown as \xNN, so that names read
// from a file cannot drive the user's terminal.
inline std::string EscapeControl(const std::string& s, bool keep_newlines = false) {
  std::string out;
  for (unsigned char c : s) {
    if ((c < 0x20 || c == 0x7f) && !(keep_newlines && (c == '\n' || c == '\t'))) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Prints progress for long writes on stderr when it is a terminal.
std::function<void(uint64_t, uint64_t)> ProgressPrinter(bool quiet, const char* what = "writing segments");

}  // namespace ptepack::cli
