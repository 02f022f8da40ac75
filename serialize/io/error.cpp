#include "ptepack/error.h"

#include <cstdio>

namespace ptepack {

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Finding::ToString() const {
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

Error::Error(Finding f) : std::runtime_error(f.ToString()), finding_(std::move(f)) {}

Error::Error(std::string code, std::string message)
    : Error(Finding{Finding::Severity::kError, std::move(code), std::move(message), {}, {}, {}, {}}) {}

}  // namespace ptepack

#include "ptepack/report.h"

namespace ptepack {

void Report::Add(Finding::Severity sev, std::string code, std::string message, std::optional<uint64_t> offset,
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

bool Report::ok() const { return error_count() == 0; }

size_t Report::error_count() const {
  size_t n = 0;
  for (const auto& f : findings_) n += f.severity == Finding::Severity::kError;
  return n;
}

bool Report::Has(const std::string& code) const {
  for (const auto& f : findings_) {
    if (f.code == code) return true;
  }
  return false;
}

void Report::ThrowIfError() const {
  for (const auto& f : findings_) {
    if (f.severity == Finding::Severity::kError) throw ptepack::Error(f);
  }
}

}  // namespace ptepack
