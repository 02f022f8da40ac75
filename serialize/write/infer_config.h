// The BackendConfig a file was written with, read back from its layout.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

class PteFile;
class PtdFile;

// A setting the file does not pin down: every power of two in [lo, hi] (or,
// for a non-numeric setting, every value) writes the same bytes. The value
// chosen is the one ExecuTorch's default producer makes where it fits.
struct Ambiguity {
  std::string field;  // ExecuTorch config field name ("delegate_alignment", ...)
  uint64_t lo = 0;    // range that fits (0, 0 for a non-numeric setting)
  uint64_t hi = 0;
  std::string chosen;               // the value inferred
  std::string why;                  // what the file shows
  std::vector<std::string> values;  // a non-numeric setting: every value that fits
};

// The alignment each blob needs to land where it was (1: none beyond the
// segment alignment). Indexes follow PackageParts::named_data and
// PackageParts::external[f].entries.
struct BlobAlignments {
  std::vector<uint64_t> named;
  std::vector<std::vector<uint64_t>> external;
};

// The config that reproduces `pte` (and `ptds`) from their package form,
// computed directly from the file's evidence: segment offsets and the
// extended header give the segment alignment; constant offsets the constant
// tensor alignment; inline vector padding and the header padding the
// delegate alignment; delegate locations the extraction; the root table's
// field order and empty-vector padding the flatbuffer producer. `exact` is
// the verification pass: laying the package out with this config rewrites
// the flatbuffer byte for byte.
struct InferredConfig {
  BackendConfig config;
  bool exact = false;
  std::string note;
  std::vector<Ambiguity> ambiguous;
  BlobAlignments blobs;
  // Sets each blob's alignment in `pkg` (the PackageParts the file was read into).
  void ApplyBlobAlignments(PackageParts& pkg) const;
  const Ambiguity* Find(const std::string& field) const;
};
InferredConfig InferConfig(const PteFile& pte, const PackageParts& pkg, const std::vector<const PtdFile*>& ptds = {});

// What a file shows of one setting: the one value inferred, or, where it cannot tell, every
// value that writes the same bytes (the powers of two in [lo, hi], or `values`). Two files
// were possibly written with the same setting when their fits overlap (`diff` reports a
// change only when they do not).
struct SettingFit {
  uint64_t lo = 0, hi = 0;          // a numeric setting (an alignment)
  std::vector<std::string> values;  // otherwise
  bool Overlaps(const SettingFit& o) const;
  // "128", "2048..16384", "any" (every alignment), "true", "flatc or flatc-legacy".
  std::string Text() const;
};
// The fits of the settings inference reads from a file: segment_alignment,
// constant_tensor_alignment and delegate_alignment (their effective values: unset is 16),
// ptd_segment_alignment, extract_delegate_segments, flatbuffer_order.
std::map<std::string, SettingFit> SettingFits(const InferredConfig& inf);

}  // namespace ptepack
