// What `inspect` and `verify` compute, shared by the CLI, the public API
// (ptepack/reader.h) and the Python module: open a file with its .ptd files,
// judge it, describe it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/reader.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// True if `path` starts like a .ptd (FlatTensor) file.
bool IsPtdFile(const std::string& path);

// A .pte with the .ptd files it refers to, or a .ptd on its own.
struct LoadedFiles {
  std::unique_ptr<PteFile> pte;
  std::unique_ptr<PtdFile> lone_ptd;  // when the file itself is a .ptd
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptd_ptrs() const;
  std::vector<const Report*> reports() const;  // the file's, then each .ptd's
};
LoadedFiles LoadFiles(const std::string& file, const std::vector<std::string>& ptd_paths, const ReadOptions& ro);
ReadOptions ReadOptionsFor(const VerifyOptions& o);

// The input of a rewrite (repack, split, extract): a valid program and its
// .ptd files, every external key found. Throws the first error, or
// Error("missing-ptd") naming a key no given .ptd holds.
struct ValidInput {
  std::unique_ptr<PteFile> pte;
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptrs;
  std::vector<std::string> paths;
};

ValidInput LoadValidInput(const std::string& in, const std::vector<std::string>& ptds);

// `inspect --json`: the description, external tensor layouts and the
// inferred config.
nlohmann::json InspectDocument(const LoadedFiles& l);

// `verify`'s judgement (notes unchecked external tensors on the program's report).
struct Verdict {
  bool ok = true;
  size_t warnings = 0;
  std::vector<std::string> unchecked;
  size_t external_unchecked = 0;  // external tensors not checked for lack of a .ptd
};
Verdict Judge(LoadedFiles& l, bool strict);
// `verify --json` without checksums.
nlohmann::json VerdictJson(const std::string& file, const Verdict& v, bool strict,
                           const std::vector<const Report*>& reports);

namespace bpte {
class BpteFile;
}
// `verify --json` of a BundledProgram (.bpte): {"file", "format": "bpte",
// "valid", "strict", "not_checked", "findings"}. With `strict`, warnings fail.
nlohmann::json BpteVerdictJson(const bpte::BpteFile& f, const std::string& file, bool strict);
bool BpteVerdictOk(const bpte::BpteFile& f, bool strict);

}  // namespace ptepack
