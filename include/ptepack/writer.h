// Writing a program: a .pte and, for external data, "<tag>.ptd" files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ptepack/config.h"
#include "ptepack/error.h"
#include "ptepack/export.h"
#include "ptepack/package.h"

namespace ptepack {

// Called with (bytes done, bytes total) while data is written.
using ProgressFn = std::function<void(uint64_t, uint64_t)>;

struct WriteOptions {
  std::vector<std::string> inputs;     // refuse to overwrite these...
  bool allow_overwrite_input = false;  // ...unless allowed
  ProgressFn progress;
  // An existing .ptd beside the output that is not one of `inputs` may
  // belong to another program: it is replaced only with `force`.
  bool force = false;
  // Lay out and check everything, write nothing: the result lists the files
  // (and sizes) that would be written.
  bool dry_run = false;
};

struct WrittenFile {
  std::string path;
  uint64_t size = 0;
  // A .ptd that was an input and would have come out byte for byte the same:
  // left as it is, not rewritten.
  bool kept = false;
};

struct WriteResult {
  WrittenFile pte;
  std::vector<WrittenFile> ptds;
  uint64_t flatbuffer_size = 0;  // the program's bytes after its header (README, "Sizes")
  size_t num_segments = 0;
  uint64_t dedup_bytes_saved = 0;
  // What reading the written files back found (once, before they were
  // renamed into place), each located at its output: warnings and notes,
  // since an error refuses the write.
  std::vector<Finding> findings;
};

// Writes `pte_path` and, for external data, "<tag>.ptd" files in the same
// directory. A "<tag>.ptd" that is one of `options.inputs` (a .ptd beside its
// program, rewritten next to it) is not overwritten unless
// allow_overwrite_input: when the new bytes equal it, it is kept as it is
// (WrittenFile::kept); otherwise the new file is named after the output,
// "<output stem>.ptd" (or "<output stem>-<tag>.ptd" when the program has
// several .ptd files). Each file is written to a temp file and renamed on success; on
// failure no output file is created or changed. Before anything is written,
// name collisions (two outputs with one name, an output that is an input) and
// existing .ptd files that are not inputs (unless options.force) are refused.
// The staged files are read back with PteFile/PtdFile's checks (and the
// program's external keys looked up in the written .ptd files); if any check
// fails, nothing is renamed and Error("output-invalid") carries the findings.
// Outputs keep the mode of the files they replace; symlinks are refused.
PTEPACK_API WriteResult WritePackage(const Package& pkg, const BackendConfig& config, const std::string& pte_path,
                                     const WriteOptions& options = {});
// The same for a package the caller is done with (a temporary, or
// std::move(pkg)); the same files. The writer lays out the program's tables
// in place and frees them once encoded, before it reads the outputs back, so
// the peak memory is the larger of the two phases rather than their sum
// (`pack` of a 330,000-value spec: 377 -> 311 MiB). Copies of `pkg` held
// elsewhere keep their tables, which the writer then copies where it changes
// them. `pkg` is left empty.
PTEPACK_API WriteResult WritePackage(Package&& pkg, const BackendConfig& config, const std::string& pte_path,
                                     const WriteOptions& options = {});

}  // namespace ptepack
