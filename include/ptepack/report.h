// A list of findings about one file.
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

}  // namespace ptepack
