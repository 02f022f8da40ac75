// The CLI's one argument layer. Every command declares its arguments through an Args
// (commands are registered in tools/ptepack.cpp) and so gets the same answer to each kind
// of mistake, found before the command's body runs:
//
//   - an input that is missing, unreadable, a directory or not a regular file: the
//     library's own located error (open-failed, not-regular-file) naming the file, as the
//     library and Python give it; a BundledProgram where a program is wanted: bpte-input,
//     naming the `ptepack bpte` command to use;
//   - a number: config/numbers.h's parser (the one Python's keyword arguments go through):
//     a negative, empty, overflowing or out-of-range value, or an alignment that is not a
//     power of two, gets the same bad-number message naming the option;
//   - a choice (true|false, flatc|python|...): bad-choice, naming the choices;
//   - a single-valued option given twice: usage, naming it;
//   - a repeatable option takes exactly one value per occurrence, so it never swallows a
//     positional argument that follows it.
//
// The errors are ptepack::Error; main() prints each once (`ptepack: FILE: error ...
// [code]`), with --json also {"error": {code, message, file, offset, exit_code}} on
// stdout, and exits 2 (README, "Exit status").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptepack::cli {

enum class InputKind {
  kProgram,  // a .pte or .ptd to read: checked before the command runs; a .bpte is refused
  kFile,     // any other file read whole (JSON, bundle, .bpte): checked before the command runs
  kJudged,   // verify/inspect: each file is opened and judged by the command (`-` is stdin)
};

// What the man page, --help and the completion scripts show of an option beyond what
// CLI11 knows: the value's name (N, FILE, DIR, ...), its choices, whether it repeats.
struct ArgInfo {
  std::string value;                 // "" for a flag
  std::vector<std::string> choices;  // the values allowed, when a fixed set
  bool repeatable = false;
  bool path = false;  // a file or directory name (complete file names)
};
// The ArgInfo of an option an Args declared, or nullptr.
const ArgInfo* InfoOf(const CLI::Option* o);

// "repack", "bundle create": the command `c` is, as typed after `ptepack`.
std::string CommandPath(const CLI::App* c);

// The checks of one input file (what Args does before the command runs; for inputs a
// command learns of later). Throws ptepack::Error.
void CheckInput(const std::string& path, InputKind kind, const std::string& command);

class Args {
 public:
  explicit Args(CLI::App* c) : c_(c) {}
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  CLI::App* app() const { return c_; }

  // `name` is a positional ("IN.pte") or an option ("--config", "-o,--output").
  CLI::Option* Input(const std::string& name, std::string* out, const std::string& help, InputKind kind,
                     const std::string& value = "FILE");
  // A positional list, or a repeatable option (one FILE per occurrence).
  CLI::Option* Inputs(const std::string& name, std::vector<std::string>* out, const std::string& help, InputKind kind,
                      const std::string& value = "FILE");
  // A file or directory to write (the writer checks it).
  CLI::Option* Output(const std::string& name, std::string* out, const std::string& help,
                      const std::string& value = "FILE");
  CLI::Option* Text(const std::string& name, std::string* out, const std::string& help,
                    const std::string& value = "TEXT");
  CLI::Option* Text(const std::string& name, std::optional<std::string>* out, const std::string& help,
                    const std::string& value = "TEXT");
  // A power of two from 1 to 2^30.
  CLI::Option* Alignment(const std::string& name, std::optional<uint64_t>* out, const std::string& help);
  CLI::Option* Number(const std::string& name, uint64_t* out, uint64_t min, uint64_t max, const std::string& help);
  CLI::Option* Choice(const std::string& name, std::string* out, const std::vector<std::string>& choices,
                      const std::string& help);
  // true|false.
  CLI::Option* Bool(const std::string& name, std::optional<bool>* out, const std::string& help);
  CLI::Option* Flag(const std::string& name, bool* out, const std::string& help);

  // The command's body: runs after every argument declared above has been converted and
  // checked, in the order given on the command line's declaration.
  void Run(std::function<void()> body);

 private:
  // A value option bound to raw text, converted by `convert` (given the texts) before the body.
  CLI::Option* Raw(const std::string& name, const std::string& help, ArgInfo info,
                   std::function<void(const std::string& label, const std::vector<std::string>&)> convert);

  CLI::App* c_;
  std::deque<std::vector<std::string>> raw_;  // stable addresses: CLI11 writes into them
  std::vector<std::function<void()>> steps_;
};

// A command's Args, alive as long as the app (owned by a registry in args.cpp).
Args& NewArgs(CLI::App* c);

}  // namespace ptepack::cli
