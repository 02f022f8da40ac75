// What `inspect` and `verify` compute, shared by the CLI, the public API
// (ptepack/reader.h) and the Python module: open a file with its .ptd files,
// judge it, describe it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/reader.h"
#include "serialize/bpte/bpte.h"
#include "serialize/read/checksum.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// What a file is, told by its FlatBuffers file identifier (bytes 4..8: "FT01" a .ptd,
// "BP08" a BundledProgram), never by its name. Anything else is read as a program
// (kPte), whose reader names the identifier it found.
enum class FileKind { kPte, kPtd, kBpte };
FileKind KindOf(const Bytes& head);
// The kind of the file at `path` (reads its first 8 bytes); throws Error when it cannot be opened.
FileKind KindOfFile(const std::string& path);
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
// The same for bytes already read (stdin), named `name` in findings.
LoadedFiles LoadFiles(Bytes data, const std::string& name, const std::vector<std::string>& ptd_paths,
                      const ReadOptions& ro);
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

// `verify --json` of a BundledProgram (.bpte): {"file", "format": "bpte",
// "valid", "strict", "not_checked", "findings"}. With `strict`, warnings fail.
nlohmann::json BpteVerdictJson(const bpte::BpteFile& f, const std::string& file, bool strict);
bool BpteVerdictOk(const bpte::BpteFile& f, bool strict);

// Everything `verify` decides about one file, for the public Verify/VerifyJson and the CLI
// alike (the CLI prints Json(), or renders the rest as text): the files read, the verdict,
// the checksums. A .bpte is judged as one when no .ptd and no checksum is asked for.
struct Verification {
  std::string file;  // as findings and the JSON name it
  bool strict = false;
  bool sums = false;                     // checksums were asked for
  std::unique_ptr<bpte::BpteFile> bpte;  // set for a BundledProgram
  LoadedFiles files;                     // otherwise
  Verdict verdict;
  IntegrityResult integrity;           // the checksums (empty unless asked for and the files are valid)
  std::string manifest_written;        // the manifest path, when one was written
  std::vector<const Report*> reports;  // every file's, then the manifest comparison's
  bool ok = false;                     // the verdict, checksums included
  nlohmann::json Json() const;         // `verify --json` of this file
};
// Reads and judges `path` (throws Error only when it cannot be read at all).
Verification RunVerify(const std::string& path, const VerifyOptions& options);
// The same for bytes already read (stdin), named `name`.
Verification RunVerify(Bytes data, const std::string& name, const VerifyOptions& options);

// What `inspect` reads of one file, for the public InspectJson and the CLI alike: a
// BundledProgram (when no .ptd is given), or a .pte with its .ptd files, or a lone .ptd.
struct Inspection {
  std::unique_ptr<bpte::BpteFile> bpte;
  LoadedFiles files;
  bool ok = false;              // no file read has an error (inspect's exit status)
  nlohmann::json Json() const;  // `inspect --json` of this file
};
Inspection RunInspect(const std::string& path, const VerifyOptions& options);
Inspection RunInspect(Bytes data, const std::string& name, const VerifyOptions& options);

}  // namespace ptepack
