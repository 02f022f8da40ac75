// What `ptepack size`, `diff` and `checksum` print with --json, as library
// calls (the Python module's size(), diff() and checksum()).
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serialize/insight/diff.h"
#include "serialize/insight/size.h"
#include "serialize/read/checksum.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// `size FILE [--ptd ...] [--allow-legacy-ptd]`: where every byte goes. A file with errors
// is not broken down (its tables cannot be trusted): its first error, located, is thrown;
// a legacy-layout .ptd is one unless `allow_legacy_ptd` (verify's verdict).
SizeReport SizeOf(const std::string& file, const std::vector<std::string>& ptds, bool allow_legacy_ptd);

// `size FILE [--ptd ...] --top N --sort S [--allow-legacy-ptd] --json`.
nlohmann::json SizeJsonOf(const std::string& file, const std::vector<std::string>& ptds, size_t top, SizeSort sort,
                          bool allow_legacy_ptd = false);

// `diff A B [--ptd-a ...] [--ptd-b ...]`: both programs read with their .ptd files and
// compared. A .ptd given as A or B is a usage error saying to give it with `ptd_flags`
// ("--ptd-a/--ptd-b" on the command line).
DiffResult DiffOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                  const std::vector<std::string>& ptd_b, const std::string& ptd_flags = "ptd_a/ptd_b");

// Its --json form. `different` is set to whether the content differs (the CLI's exit status 1).
nlohmann::json DiffJsonOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                          const std::vector<std::string>& ptd_b, bool* different = nullptr);

// `checksum FILE...`: every file read and verified (.ptd files recognised by
// content), then, when all are valid, checksummed (and the manifest written
// or compared, as `options` says). `reports` points into the files and `ir`.
struct ChecksumRun {
  std::vector<std::unique_ptr<PteFile>> ptes;
  std::vector<std::unique_ptr<PtdFile>> ptds;
  IntegrityResult ir;
  std::vector<const Report*> reports;  // each file's, then the integrity check's
  bool ok = true;
};
ChecksumRun RunChecksums(const std::vector<std::string>& files, const IntegrityOptions& options);
// Its --json form: the manifest with "valid" and "findings".
nlohmann::json ChecksumJson(const ChecksumRun& run);

// `checksum FILE... [--write-manifest M | --manifest M] --json`: the manifest
// form with "valid" and "findings" (.ptd files are recognised by content).
nlohmann::json ChecksumJsonOf(const std::vector<std::string>& files, const IntegrityOptions& options);

}  // namespace ptepack
