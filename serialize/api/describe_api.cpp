// ptepack::Describe (ptepack/program_info.h): the typed description of a file,
// read from the verified program with flatc's accessors.
#include <cstring>

#include "ptepack/program_info.h"
#include "serialize/api/read_api.h"
#include "serialize/bpte/bpte.h"
#include "serialize/read/program_info_read.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

std::string IdentifierOf(const Bytes& file) {
  return file.size >= 8 ? std::string(reinterpret_cast<const char*>(file.data) + 4, 4) : std::string();
}

std::vector<SegmentInfo> Segments(const std::vector<SegmentSpan>& spans) {
  std::vector<SegmentInfo> out;
  for (const auto& s : spans) out.push_back(SegmentInfo{s.offset, s.file_offset, s.size});
  return out;
}

void DescribePte(const PteFile& pte, ProgramInfo& info) {
  info.format = "pte";
  info.file_identifier = IdentifierOf(pte.file());
  info.size = pte.file_size();
  info.segment_base_offset = pte.segment_base_offset();
  info.segments = Segments(pte.segments());
  const auto* p = pte.program();
  if (!p) return;
  if (p->execution_plan()) {
    for (const auto* plan : *p->execution_plan()) info.methods.push_back(MethodInfoOf(*plan, pte));
  }
  if (p->named_data()) {
    for (const auto* nd : *p->named_data()) {
      NamedDataInfo n;
      n.key = nd->key() ? nd->key()->str() : "";
      n.segment = nd->segment_index();
      if (n.segment < pte.segments().size()) n.size = pte.segments()[n.segment].size;
      info.named_data.push_back(std::move(n));
    }
  }
}

void DescribePtd(const PtdFile& ptd, ProgramInfo& info) {
  info.format = "ptd";
  info.file_identifier = IdentifierOf(ptd.file());
  info.size = ptd.file_size();
  info.segment_base_offset = ptd.header().segment_base_offset;
  info.segments = Segments(ptd.segments());
  for (const auto& e : ptd.entries()) {
    NamedDataInfo n;
    n.key = e.key.str();
    n.segment = e.segment_index;
    n.offset = e.offset;
    n.size = e.size;
    if (e.has_layout) {
      n.dtype = static_cast<ScalarType>(e.scalar_type);
      n.shape = e.sizes.vec();
    }
    info.named_data.push_back(std::move(n));
  }
}

}  // namespace

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
  ProgramInfo info;
  info.file = path;
  if (l.pte) {
    DescribePte(*l.pte, info);
  } else {
    DescribePtd(*l.lone_ptd, info);
  }
  info.valid = Judge(l, options.strict).ok;
  for (const Report* r : l.reports())
    info.findings.insert(info.findings.end(), r->findings().begin(), r->findings().end());
  return info;
}

}  // namespace ptepack
