// `extract` as library functions: a checked program's parts as files, with a
// spec.json and config.json that `pack` turns back into the same bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/bytes.h"
#include "serialize/api/read_api.h"
#include "serialize/write/infer_config.h"

namespace ptepack {

struct ExtractedFile {
  std::string name;  // relative to the output directory
  Bytes data;
};

// Everything `extract` writes for one program, in the order written:
//  - program.json: the file's flatbuffer as JSON, as laid out (segments,
//    constant_segment and offsets filled in: a picture of the file);
//  - segment_<i>.bin: each segment as stored;
//  - constant_<i>.bin, delegate_<i>.bin, mutable_<i>.bin, named_<i>.bin,
//    <tag>_<i>.bin: the program's data in package form (no padding);
//  - spec.json: a `pack` spec of the package form (the program without its
//    laid-out segments, constants and delegate payloads referring to the
//    files above) and config.json: the inferred config; `ptepack pack
//    config.json spec.json` rebuilds the input, byte for byte when
//    reproduces_input();
//  - index.json: which file is which.
struct Extraction {
  std::vector<ExtractedFile> files;
  InferredConfig inferred;
  // What JSON cannot carry of the program (a NaN's sign or payload), with
  // where; "" when nothing. pack writes an equivalent file then.
  std::string json_loses;
  bool reproduces_input() const { return inferred.exact && json_loses.empty(); }
  // Why pack writes an equivalent file, not the same bytes ("" when it does not).
  std::string note() const;
};
Extraction ExtractProgram(const ValidInput& in);

// Where an extraction goes: absent, an empty directory, or (with `force`) an
// earlier extract (a directory holding index.json). Throws
// Error("output-symlink" / "output-not-directory" / "output-exists").
struct ExtractTarget {
  std::string dir;
  bool exists = false;
  bool non_empty = false;
};
ExtractTarget CheckExtractTarget(const std::string& dir, bool force);

// What `extract --json` prints (and the Python module's extract() returns):
// {"directory", "files": [{"name", "size"}], "reproduces_input", "note" (why
// not, "" when it does), "config", "dry_run"}; with dry_run, "replaces" says
// whether an earlier extract would be replaced.
nlohmann::json ExtractionJson(const Extraction& x, const ExtractTarget& target, bool dry_run);

// Fills a temporary directory beside the target, syncs it and renames it into
// place (the replaced directory goes): all or nothing, interruptible.
// `progress` (optional) is told the bytes written so far and the total.
void WriteExtraction(const Extraction& x, const ExtractTarget& target, const ProgressFn& progress = nullptr);

// `extract IN [--ptd F] -o DIR [--force] [--dry-run]` in one call, for the CLI and the
// Python module alike: the input read and checked (LoadValidInput), its parts gathered, the
// target checked, and (unless `dry_run`) the files written; Json() is `extract --json`.
struct ExtractRun {
  ValidInput input;  // kept: the extracted files are views of its bytes
  Extraction extraction;
  ExtractTarget target;
  bool dry_run = false;
  nlohmann::json Json() const { return ExtractionJson(extraction, target, dry_run); }
};
ExtractRun Extract(const std::string& in, const std::vector<std::string>& ptds, const std::string& dir, bool force,
                   bool dry_run, const ProgressFn& progress = nullptr);

}  // namespace ptepack
