// What pack, repack, split and extract share: config overrides, inputs, output flags and the
// report of what was written.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "ptepack/repack.h"
#include "serialize/api/read_api.h"
#include "serialize/format/program_json.h"
#include "serialize/model/program_parts.h"
#include "serialize/model/spec.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

struct Overrides {
  std::string config_file;
  std::optional<uint64_t> segment_alignment, constant_tensor_alignment, delegate_alignment, ptd_segment_alignment;
  std::optional<bool> extract_delegate_segments, emit_stacktrace, emit_mutable_buffer_names;
  std::string order;
};

void AddOverrides(Args& a, Overrides& o);

void Apply(const Overrides& o, BackendConfig& c);

// Re-reads what was written and fails loudly if it does not verify.
bool CheckOutputs(const WriteResult& r, bool quiet, nlohmann::json* out);

// `-o -`: the program is written to a private temporary directory, verified, then copied to
// stdout; the directory goes away with this object.
struct StdoutStage {
  std::string dir;
  ~StdoutStage();
};

// Flags every writing command has.
struct OutputFlags {
  std::string out;
  bool in_place = false, json = false, quiet = false, force = false, dry_run = false;
  std::shared_ptr<StdoutStage> to_stdout;  // set by ResolveOutput for `-o -`
};

// Returns -o (required where there is no --in-place).
CLI::Option* AddOutputFlags(Args& a, OutputFlags& f, bool in_place);

// -o, or the input with --in-place; `-o -` stages the output for stdout (one file only).
void ResolveOutput(OutputFlags& f, const std::string& in);

void PrintDryRun(const WriteResult& r, bool json);

// The write options the output flags ask for (progress on a terminal unless --quiet).
WriteOptions MakeWriteOptions(const OutputFlags& f, const std::vector<std::string>& inputs = {});

// Re-reads and verifies what was written, prints the summary (or, with
// --dry-run, what would be written) and sets the exit code.
void ReportWritten(const WriteResult& r, const BackendConfig& cfg, const OutputFlags& f,
                   nlohmann::json extra = nlohmann::json::object());

// Writes, re-reads and verifies the outputs, prints the summary and sets the
// exit code. Takes the package: the writer frees its tables before the re-read.
WriteResult WriteAndReport(Package pkg, const BackendConfig& cfg, const std::vector<std::string>& inputs,
                           const OutputFlags& f, nlohmann::json extra = nlohmann::json::object());

}  // namespace ptepack::cli
