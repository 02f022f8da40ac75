// A list of findings about one file (internal: the public API returns findings
// as VerifyResult::findings and Error::finding()).
#pragma once

#include <string>
#include <vector>

#include "ptepack/error.h"

namespace ptepack {

class Report {
 public:
  explicit Report(std::string file = {}) : file_(std::move(file)) {}
  void Add(Finding::Severity sev, std::string code, std::string message, std::optional<uint64_t> offset = std::nullopt,
           std::string expected = {}, std::string found = {});
  void Error(std::string code, std::string message, std::optional<uint64_t> offset = std::nullopt,
             std::string expected = {}, std::string found = {}) {
    Add(Finding::Severity::kError, std::move(code), std::move(message), offset, std::move(expected), std::move(found));
  }
  void Warn(std::string code, std::string message, std::optional<uint64_t> offset = std::nullopt,
            std::string expected = {}, std::string found = {}) {
    Add(Finding::Severity::kWarning, std::move(code), std::move(message), offset, std::move(expected),
        std::move(found));
  }
  bool ok() const;  // no errors (warnings allowed)
  size_t error_count() const;
  const std::vector<Finding>& findings() const { return findings_; }
  bool Has(const std::string& code) const;
  const std::string& file() const { return file_; }
  // Throws the first error, if any.
  void ThrowIfError() const;

 private:
  std::string file_;
  std::vector<Finding> findings_;
};

inline void Report::Add(Finding::Severity sev, std::string code, std::string message, std::optional<uint64_t> offset,
                        std::string expected, std::string found) {
  // Hostile files can trigger the same finding many times; keep reports bounded.
  if (findings_.size() >= 1000) return;
  Finding f;
  f.severity = sev;
  f.code = std::move(code);
  f.message = std::move(message);
  f.file = file_;
  f.offset = offset;
  f.expected = std::move(expected);
  f.found = std::move(found);
  findings_.push_back(std::move(f));
}

inline bool Report::ok() const { return error_count() == 0; }

inline size_t Report::error_count() const {
  size_t n = 0;
  for (const auto& f : findings_) n += f.severity == Finding::Severity::kError;
  return n;
}

inline bool Report::Has(const std::string& code) const {
  for (const auto& f : findings_) {
    if (f.code == code) return true;
  }
  return false;
}

inline void Report::ThrowIfError() const {
  for (const auto& f : findings_) {
    if (f.severity == Finding::Severity::kError) throw ptepack::Error(f);
  }
}

}  // namespace ptepack
