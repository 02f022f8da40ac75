// Reading and checking .pte and .ptd files.
//
//   ptepack::VerifyResult r = ptepack::Verify("model.pte", {{"weights.ptd"}});
//   if (!r.valid) for (const auto& f : r.findings) std::cerr << f.ToString() << "\n";
//   std::string json = ptepack::InspectJson("model.pte");   // `ptepack inspect --json`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "ptepack/export.h"

namespace ptepack {

struct VerifyOptions {
  std::vector<std::string> ptd;    // .ptd files the program refers to (every external key is checked)
  uint64_t segment_alignment = 0;  // also require segments to start at multiples of this (0: no extra check)
  uint64_t tensor_alignment = 0;   // also require constant tensors at multiples of this (0: no extra check)
  bool allow_legacy_ptd = false;   // accept .ptd files in the FlatTensor layout of before June 2025
  bool strict = false;             // warnings fail too
  // Checksums (`verify --checksum`, `--write-manifest`, `--manifest`): XXH3-64 of every region
  // of a valid file (`ptepack checksum`); either manifest path implies `checksum`. A
  // difference from `manifest` is an error finding naming the region.
  bool checksum = false;
  std::string write_manifest;  // write the checksums to this JSON manifest (empty: none)
  std::string manifest;        // compare the checksums with this manifest (empty: none)
};

// What `ptepack verify` says about a file (a .pte, or a .ptd on its own).
struct VerifyResult {
  bool valid = false;                    // ExecuTorch's runtime would load it (see README, "verify OK")
  std::vector<Finding> findings;         // errors and warnings of every file read
  std::vector<std::string> not_checked;  // what could not be checked (e.g. external tensors without a .ptd)
};

// Opens and checks `path`: a .pte, a .ptd or a BundledProgram (.bpte), told apart by the
// file identifier at bytes 4..8 ("ET12", "FT01", "BP08"), never by the name. Throws ptepack::Error only when a file
// cannot be read at all (missing, not a regular file); a malformed file is a result with findings.
PTEPACK_API VerifyResult Verify(const std::string& path, const VerifyOptions& options = {});

// The same as JSON text: exactly what `ptepack verify --json` prints.
PTEPACK_API std::string VerifyJson(const std::string& path, const VerifyOptions& options = {}, int indent = 2);

// Everything `ptepack inspect --json` prints about a file: header fields,
// methods, operators, delegates, segments, constants, named data, external
// keys, the inferred config and the findings. `options.strict` is ignored; a
// legacy .ptd is explained, and "valid" is what Verify says of it (false unless
// `options.allow_legacy_ptd`).
PTEPACK_API std::string InspectJson(const std::string& path, const VerifyOptions& options = {}, int indent = 2);

}  // namespace ptepack
