// Subcommands of the ptepack CLI. Each lives in its own cmd_*.cpp and
// registers itself on the app; `main` only dispatches.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ptepack::cli {

// Exit codes shared by all commands.
enum Exit : int {
  kOk = 0,
  kInvalid = 1,  // the input file is not valid (verify found errors)
  kFailed = 2,   // usage, I/O or configuration error
};

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

// True if `path` starts like a .ptd (FlatTensor) file.
bool IsPtdFile(const std::string& path);

// Prints progress for long writes on stderr when it is a terminal.
std::function<void(uint64_t, uint64_t)> ProgressPrinter(bool quiet);

}  // namespace ptepack::cli
