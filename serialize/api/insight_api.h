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

// `size FILE [--ptd ...] --top N --sort S --json`. A file with errors is not
// broken down: Error("invalid-file") names it (its tables cannot be trusted).
nlohmann::json SizeJsonOf(const std::string& file, const std::vector<std::string>& ptds, size_t top, SizeSort sort);

// `diff A B [--ptd-a ...] [--ptd-b ...] --json`. `different` is set to
// whether the content differs (the CLI's exit status 1).
nlohmann::json DiffJsonOf(const std::string& a, const std::vector<std::string>& ptd_a, const std::string& b,
                          const std::vector<std::string>& ptd_b, bool* different = nullptr);

// `checksum FILE... [--write-manifest M | --manifest M] --json`: the manifest
// form with "valid" and "findings" (.ptd files are recognised by content).
nlohmann::json ChecksumJsonOf(const std::vector<std::string>& files, const IntegrityOptions& options);

}  // namespace ptepack
