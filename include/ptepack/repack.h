// Rewriting an existing program: `ptepack repack` and `ptepack split`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ptepack/config.h"
#include "ptepack/writer.h"

namespace ptepack {

struct RepackOptions {
  std::vector<std::string> ptd;  // the input's .ptd files (rewritten next to the output)
  // Changes to the config inferred from the input (which reproduces it byte
  // for byte); the result is validated. Null: keep the input's layout.
  std::function<void(BackendConfig&)> edit;
  bool upgrade_ptd = false;  // rewrite legacy-layout .ptd files in the current layout
  WriteOptions write;        // the inputs are added to write.inputs
};

struct RepackResult {
  WriteResult written;
  BackendConfig config;             // the config the output was written with
  bool input_reproducible = false;  // the inferred config reproduces the input byte for byte
  bool input_has_stacktrace = false;
  bool input_has_mutable_buffer_names = false;
};

// Reads `in` (and options.ptd), infers its config, applies options.edit and
// writes `out` (atomically, read back and checked, as WritePackage does).
// Throws ptepack::Error with a located finding: an invalid input, a
// .ptd the program needs that was not given ("missing-ptd"), a bad config.
RepackResult Repack(const std::string& in, const std::string& out, const RepackOptions& options = {});

struct SplitOptions {
  std::string tag;               // constants go to "<tag>.ptd" beside the output (required)
  bool mutable_weights = false;  // also move mutable weights that have an initial state
  std::vector<std::string> ptd;  // the input's existing .ptd files
  std::function<void(BackendConfig&)> edit;
  WriteOptions write;
};

// `ptepack split`: Repack with external_constants = true and external_tag =
// tag. written.ptds is empty when the program has no constants to move.
RepackResult Split(const std::string& in, const std::string& out, const SplitOptions& options);

}  // namespace ptepack
