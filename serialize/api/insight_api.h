// What `ptepack size`, `diff` and `checksum` print with --json, as library
// calls (the Python module's size(), diff() and checksum()).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serialize/insight/size.h"
#include "serialize/read/checksum.h"

namespace ptepack {

// `size FILE [--ptd ...] [--allow-legacy-ptd]`: where every byte goes. A file with errors
// is not broken down (its tables cannot be trusted): its first error, located, is thrown;
// a legacy-layout .ptd is one unless `allow_legacy_ptd` (verify's verdict).
SizeReport SizeOf(const std::string& file, const std::vector<std::string>& ptds, bool allow_legacy_ptd);

// `size FILE [--ptd ...] --top N --sort S [--allow-legacy-ptd] --json`.
nlohmann::json SizeJsonOf(const std::string& file, const std::vector<std::string>& ptds, size_t top, SizeSort sort,
                          bool allow_legacy_ptd = false);

// `diff A B [--ptd-a ...] [--ptd-b ...] --json`. `different` is set to
// whether the content differs (the CLI's exit status 1).
nlohmann::json DiffJsonOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                          const std::vector<std::string>& ptd_b, bool* different = nullptr);

// `checksum FILE... [--write-manifest M | --manifest M] --json`: the manifest
// form with "valid" and "findings" (.ptd files are recognised by content).
nlohmann::json ChecksumJsonOf(const std::vector<std::string>& files, const IntegrityOptions& options);

}  // namespace ptepack
