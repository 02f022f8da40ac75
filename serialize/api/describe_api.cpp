// ptepack::Describe (ptepack/program_info.h): the typed description of a file,
// the public part of the description `inspect` renders.
#include "ptepack/program_info.h"
#include "serialize/api/read_api.h"
#include "serialize/bpte/bpte.h"
#include "serialize/read/file_description.h"

namespace ptepack {
ProgramInfo Describe(const std::string& path, const VerifyOptions& options) {
  if (options.ptd.empty() && bpte::IsBpteFile(path)) {
    Finding f{Finding::Severity::kError,
              "bpte-not-described",
              "a BundledProgram (.bpte): Describe reads .pte and .ptd files; InspectJson describes this one",
              path,
              std::nullopt,
              "a .pte or .ptd",
              "a .bpte"};
    throw Error(std::move(f));
  }
  LoadedFiles l = LoadFiles(path, options.ptd, ReadOptionsFor(options));
  // A copy of the public part of what `inspect` renders (serialize/read/file_description.h).
  ProgramInfo info = l.pte ? PublicView(DescribeFile(*l.pte, {})) : PublicView(DescribePtdFile(*l.lone_ptd));
  info.file = path;
  info.valid = Judge(l, options.strict).ok;
  for (const Report* r : l.reports())
    info.findings.insert(info.findings.end(), r->findings().begin(), r->findings().end());
  return info;
}

}  // namespace ptepack
