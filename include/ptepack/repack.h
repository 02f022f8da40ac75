// Rewriting an existing program: `ptepack repack` and `ptepack split`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ptepack/config.h"
#include "ptepack/export.h"
#include "ptepack/writer.h"

namespace ptepack {

// Where a rewritten file first differs from its input.
struct PTEPACK_API ByteDifference {
  std::string file;     // the input's path
  uint64_t offset = 0;  // first differing byte
  // What the input holds there: "flatbuffer", "extended header", "FH01 header",
  // "segment N", "padding", or "end of file" (one file is a prefix of the other).
  std::string region;
  uint64_t input_size = 0;
  uint64_t output_size = 0;
  std::string ToString() const;  // "in.pte: first difference at offset N (segment 2); sizes A (input), B (output)"
};

// Did a repack with the inferred config (no layout change asked for)
// reproduce its input byte for byte?
struct IdentityCheck {
  bool checked = false;  // the config was left as inferred and the output written (not --dry-run)
  bool identical = false;
  std::vector<ByteDifference> differences;  // one per file that differs (.pte, then .ptd files)
};

struct RepackOptions {
  // The input's .ptd files, rewritten next to the output; one that would be
  // written over itself is kept when unchanged, else named after the output
  // (see WritePackage).
  std::vector<std::string> ptd;
  // Changes to the config inferred from the input (which reproduces it byte
  // for byte); the result is validated. Null: keep the input's layout.
  std::function<void(BackendConfig&)> edit;
  bool upgrade_ptd = false;  // rewrite legacy-layout .ptd files in the current layout
  WriteOptions write;        // the inputs are added to write.inputs
  // With the config left as inferred: the output (.pte and .ptd files,
  // padding included) is compared with the input before anything is
  // written; when it would differ, nothing is written and identity holds
  // the difference (written.pte.path empty).
  bool expect_identical = false;
};

struct RepackResult {
  WriteResult written;
  BackendConfig config;             // the config the output was written with
  bool input_reproducible = false;  // the inferred config reproduces the input byte for byte
  bool input_has_stacktrace = false;
  bool input_has_mutable_buffer_names = false;
  IdentityCheck identity;  // filled when the config was not changed
};

// Reads `in` (and options.ptd), infers its config, applies options.edit and
// writes `out` (atomically, read back and checked, as WritePackage does).
// Throws ptepack::Error with a located finding: an invalid input, a
// .ptd the program needs that was not given ("missing-ptd"), a bad config.
PTEPACK_API RepackResult Repack(const std::string& in, const std::string& out, const RepackOptions& options = {});

struct SplitOptions {
  std::string tag;               // constants go to "<tag>.ptd" beside the output (required)
  bool mutable_weights = false;  // also move mutable weights that have an initial state
  std::vector<std::string> ptd;  // the input's existing .ptd files
  std::function<void(BackendConfig&)> edit;
  WriteOptions write;
};

// `ptepack split`: Repack with external_constants = true and external_tag =
// tag. written.ptds is empty when the program has no constants to move.
PTEPACK_API RepackResult Split(const std::string& in, const std::string& out, const SplitOptions& options);

}  // namespace ptepack
