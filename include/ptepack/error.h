// Errors and findings reported by ptepack.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

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

  std::string ToString() const;
};

// Thrown for errors that stop an operation. Carries the finding.
class Error : public std::runtime_error {
 public:
  explicit Error(Finding f);
  Error(std::string code, std::string message);
  const Finding& finding() const { return finding_; }

 private:
  Finding finding_;
};

// Formats v as 0x... for messages.
std::string Hex(uint64_t v);

}  // namespace ptepack
