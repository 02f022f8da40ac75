// Where a write's files go and how they get there, for every writer (the
// .pte writer and its .ptd files, repack/split/replan through WritePackage,
// the CLI's writing commands, BundledPrograms): the path policy (name
// collisions, foreign .ptd files, outputs that are inputs), staging, one
// read-back with the reader's checks, and the all-or-nothing rename. No
// layout: each file comes with its size and a function that streams it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ptepack/bytes.h"
#include "ptepack/writer.h"
#include "serialize/io/file_io.h"

namespace ptepack {

// A .ptd about to be written beside the program.
struct PendingPtd {
  std::string tag;
  uint64_t size = 0;
  std::function<void(AtomicFile&)> stream;
  // True when an existing file's bytes are the ones `stream` would write.
  std::function<bool(const Bytes&)> same_bytes;
};

// The program and its .ptd files.
struct PendingOutputs {
  std::string pte_path;
  uint64_t pte_size = 0;
  std::function<void(AtomicFile&)> stream_pte;
  std::vector<PendingPtd> ptds;
  // Called once every file is staged, before they are read back: frees what
  // the streams wrote from (the encoded program, views of the input), which
  // the read-back's own memory would otherwise sit on top of.
  std::function<void()> release;
};

// "<dir of pte_path>/<tag>.ptd": where a .ptd of `tag` is written.
std::string PtdPathFor(const std::string& pte_path, const std::string& tag);

// Writes the outputs as writer.h's WritePackage promises: a "<tag>.ptd" that
// is an input is kept when unchanged, else renamed after the output; bad
// targets are refused before anything is written; every file is staged,
// read back once with PteFile/PtdFile's checks (the findings go to
// result.findings; an error refuses with Error("output-invalid")), and
// renamed into place all or nothing. With options.dry_run, only the checks
// before writing run. Fills result.pte, result.ptds and result.findings.
void WriteOutputs(const PendingOutputs& outputs, const WriteOptions& options, WriteResult& result);

// One file, written to a temp file and renamed (AtomicFile), refusing an
// output that is one of `inputs` (unless allow_overwrite_input), a link or
// not a regular file. Returns its size.
uint64_t WriteOneFile(const std::string& path, const std::function<void(AtomicFile&)>& stream,
                      const std::vector<std::string>& inputs, bool allow_overwrite_input = false);
uint64_t WriteOneFile(const std::string& path, const Bytes& data, const std::vector<std::string>& inputs);

}  // namespace ptepack
