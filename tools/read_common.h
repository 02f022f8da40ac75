// What inspect and verify share: the common flags, several input files (each with the .ptd
// files given after it) and `-` for stdin. Loading, describing and judging a file are the
// library's (serialize/api/read_api.h).
#pragma once

#include <cstdlib>
#include <functional>
#include <iostream>

#include "config/backend_config.h"
#include "serialize/api/read_api.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

struct Common {
  std::vector<std::string> files;
  std::vector<std::string> ptds;
  bool json = false;
  bool quiet = false;
  bool allow_legacy_ptd = false;
  std::optional<uint64_t> segment_alignment;  // --segment-alignment (none: no extra check)
  std::optional<uint64_t> tensor_alignment;
  const CLI::Option* file_opt = nullptr;
  const CLI::Option* ptd_opt = nullptr;
};

// `quiet`: add -q/--quiet (verify; inspect's output is what it is for).
void AddCommon(Args& a, Common& o, bool quiet);

// One FILE with its .ptd files: each --ptd belongs to the FILE before it (one given before
// every FILE belongs to the first), so `verify a.pte --ptd a.ptd b.pte` checks a.pte with
// a.ptd and b.pte alone.
struct Input {
  std::string file;
  std::vector<std::string> ptds;
  // How messages name the file: "<stdin>" for `-`.
  std::string name() const { return file == "-" ? "<stdin>" : file; }
};
std::vector<Input> Inputs(const CLI::App* c, const Common& o);

// All of stdin (the file `-`).
Bytes ReadStdin();

// The library's options for one input: `base` (a command's own flags) with the input's .ptd
// files and the common flags.
VerifyOptions OptionsFor(const Input& in, const Common& c, VerifyOptions base = {});

// Runs `judge` on each input and returns the worst exit code. A file that cannot be read at
// all (ptepack::Error) is reported on stderr (and by `on_error` for JSON) and counts as exit
// 2; the other files are still judged.
int ForEachInput(const std::vector<Input>& inputs, const std::function<int(const Input&)>& judge,
                 const std::function<void(const Input&, const Error&)>& on_error);

// The JSON of a file that could not be read: {"file", "error": {code, message, file, offset}}.
nlohmann::json ErrorJson(const std::string& file, const Error& e);

}  // namespace ptepack::cli
