// Errors and findings reported by ptepack.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ptepack/export.h"

namespace ptepack {

// A problem found in a file: where it is, what was expected, what was found.
struct Finding {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  std::string code;                // stable machine-readable id, e.g. "segment-out-of-range"
  std::string message;             // human readable
  std::string file;                // path, when known
  std::optional<uint64_t> offset;  // file offset the finding is about
  std::string expected;            // may be empty
  std::string found;               // may be empty

  // "file: error at offset N (0xN): message (expected E, found F) [code]"
  std::string ToString() const;
};

// Thrown for errors that stop an operation. Carries the finding.
class PTEPACK_API Error : public std::runtime_error {
 public:
  explicit Error(Finding f);
  Error(std::string code, std::string message);
  // A located error: `message` about `file`, at `offset` when known, with what was expected
  // and what was found (each may be empty), as Finding holds them.
  Error(std::string code, std::string message, std::string file, std::optional<uint64_t> offset = std::nullopt,
        std::string expected = {}, std::string found = {});
  const Finding& finding() const { return finding_; }

 private:
  Finding finding_;
};

// Formats v as 0x... for messages.
inline std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

inline std::string Finding::ToString() const {
  std::string s = severity == Severity::kError ? "error" : "warning";
  if (!file.empty()) s = file + ": " + s;
  if (offset) s += " at offset " + std::to_string(*offset) + " (" + Hex(*offset) + ")";
  s += ": " + message;
  if (!expected.empty() || !found.empty()) {
    // Only the halves that are known: never "(expected -, found 1)".
    if (expected.empty()) {
      s += " (found " + found + ")";
    } else if (found.empty()) {
      s += " (expected " + expected + ")";
    } else {
      s += " (expected " + expected + ", found " + found + ")";
    }
  }
  s += " [" + code + "]";
  return s;
}

inline Error::Error(Finding f) : std::runtime_error(f.ToString()), finding_(std::move(f)) {}

inline Error::Error(std::string code, std::string message)
    : Error(Finding{Finding::Severity::kError, std::move(code), std::move(message), {}, {}, {}, {}}) {}

inline Error::Error(std::string code, std::string message, std::string file, std::optional<uint64_t> offset,
                    std::string expected, std::string found)
    : Error(Finding{Finding::Severity::kError, std::move(code), std::move(message), std::move(file), offset,
                    std::move(expected), std::move(found)}) {}

}  // namespace ptepack
