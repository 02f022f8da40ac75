// `ptepack plan`: the memory plan report of a program (serialize/insight/plan.h)
// and, with an output, the program written again with only its memory plan
// changed, through the repack path: the file restored to package form
// (serialize/read/restore.h), the config that reproduces it byte for byte
// inferred (serialize/write/infer_config.h), the planned tensors' offsets and
// non_const_buffer_sizes edited in the program tree, and WritePackageFiles (which
// reads the output back with verify's plan checks before it renames it into
// place). So `.ptd` pairs and every producer's flatbuffer order are kept, and
// `ptepack diff` of input and output says "memory plan only".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "ptepack/writer.h"
#include "serialize/insight/plan.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

struct ReplanOptions {
  std::vector<std::string> ptd;  // the input's .ptd files (rewritten next to the output)
  PlanReportOptions plan;
  WriteOptions write;  // the inputs are added to write.inputs
};

struct ReplanResult {
  PlanReport report;
  bool written = false;  // an output was asked for (and written, or listed with dry_run)
  WriteResult files;
  BackendConfig config;             // the config the output was written with
  bool input_reproducible = false;  // that config reproduces the input byte for byte
};

// The report; with a non-empty `out`, also writes the re-planned program.
// Refuses (ptepack::Error, located at the input) an input that does not
// verify (any error: `verify` must call its plan safe before it is changed),
// a method with planned tensors whose lifetimes could not be derived
// ("plan-not-checked", at the method's execution plan), and a bad alignment.
// Without `out`, only errors outside the memory plan are refused (the report
// of a plan `verify` flags is still shown).
ReplanResult Replan(const std::string& in, const std::string& out, const ReplanOptions& options);

// The middle of a re-plan, for callers that lay the package out themselves
// (the fuzz pipeline): AnalyzePlan of `pte`, the refusal of a method whose
// lifetimes are not derived, and the new offsets and buffer sizes written
// into `pkg` (PackageFromPte of `pte`). Returns the report.
PlanReport ReplanPackage(const PteFile& pte, PackageParts& pkg, const PlanReportOptions& options);

// PlanJson, plus {"written": {"files": [{path, size}], "input_reproducible"}}
// when an output was written.
nlohmann::json ReplanJson(const ReplanResult& r);

}  // namespace ptepack
