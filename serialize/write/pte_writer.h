// Writing .pte and .ptd files from a PackageParts and a BackendConfig.
//
// Layout follows ExecuTorch's serializer step by step: constant segment
// (tensors padded to constant_tensor_alignment), mutable data segment,
// delegate payloads moved to segments (deduplicated) when
// extract_delegate_segments is set, named data segments, each segment at
// lcm(segment_alignment, its alignment); then the flatbuffer, the eh00
// header padded to the schema's largest force_align, and the segments.
// Every number is layout/file_plan.h's; WritePackage's files go through
// serialize/write/output_files.h (staged, read back once, renamed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "layout/file_plan.h"
#include "layout/segment_plan.h"
#include "ptepack/writer.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

struct PteLayout {
  std::vector<uint8_t> head;         // root offset, id, eh00 header, flatbuffer
  uint64_t flatbuffer_size = 0;      // as encoded: root offset and id included, eh00 not
  uint64_t header_size = 8;          // root offset, id and the eh00 header (PteFile::header_size)
  uint64_t segment_base_offset = 0;  // 0 without segments
  SegmentPlan segments;
  std::vector<ExternalFile> external;    // .ptd files to write alongside
  uint64_t ptd_segment_alignment = 128;  // theirs (BackendConfig::ptd_segment_alignment)
  uint64_t dedup_bytes_saved = 0;
  uint64_t total_size() const {
    return segments.empty() || segments.data_size() == 0 ? head.size() : segment_base_offset + segments.data_size();
  }
};

struct PtdLayout {
  std::vector<uint8_t> head;  // root offset, id, FH01 header, flatbuffer, padding to the base
  uint64_t segment_base_offset = 0;
  SegmentPlan segments;
  uint64_t total_size() const { return segment_base_offset + segments.data_size(); }
};

// The format's hard limits (kMaxProgramBytes, kMaxSegments,
// CheckFormatLimits) are layout/file_plan.h's. LayoutPte checks a lower bound
// of the flatbuffer size before encoding and the real size after, so an
// oversized program fails before memory is spent on it and before any byte
// is written.

// The plan (layout/file_plan.h) copied into the program and encoded; no I/O. Throws ptepack::Error on invalid programs
// or configs.
PteLayout LayoutPte(const PackageParts& pkg, const BackendConfig& config);
// The same, consuming `pkg`: the tables only it holds are changed in place
// rather than copied (those another holder shares are copied where
// changed), and freed once encoded.
PteLayout LayoutPte(PackageParts&& pkg, const BackendConfig& config);
// LayoutPte's head (flatbuffer and eh00 header: `head`, `flatbuffer_size`,
// `header_size`, `segment_base_offset`, `external`) without the segments'
// pieces (`segments` is empty): what config inference compares with a file.
PteLayout LayoutPteHead(const PackageParts& pkg, const BackendConfig& config);
PtdLayout LayoutPtd(const ExternalFile& file, uint64_t segment_alignment);
// The same, taking `file`'s entries (the layout's segments read their data
// where they are); its tag and other fields stay.
PtdLayout LayoutPtd(ExternalFile&& file, uint64_t segment_alignment);

// A package's files laid out, nothing written: the .pte and one PtdLayout
// per pte.external entry (whose entries are freed once laid out; the tag
// stays).
struct PackageLayout {
  PteLayout pte;
  std::vector<PtdLayout> ptds;
};
PackageLayout LayoutPackage(PackageParts&& pkg, const BackendConfig& config);
// Writes them as WritePackageFiles does (staged, read back, renamed).
WriteResult WritePackageLayout(const PackageLayout& layout, const std::string& pte_path, const WriteOptions& options);
// The same, freeing the layout (its encoded program, the views of the
// input's data) once the files are staged, before they are read back.
WriteResult WritePackageLayout(PackageLayout&& layout, const std::string& pte_path, const WriteOptions& options);

// What ptepack::WritePackage (ptepack/writer.h, serialize/api/write_api.cpp) does.
WriteResult WritePackageFiles(const PackageParts& pkg, const BackendConfig& config, const std::string& pte_path,
                              const WriteOptions& options);
// The same, consuming `pkg` (LayoutPte(PackageParts&&)).
WriteResult WritePackageFiles(PackageParts&& pkg, const BackendConfig& config, const std::string& pte_path,
                              const WriteOptions& options);

// Writes a layout to a file (atomic).
uint64_t WritePteLayout(const PteLayout& layout, const std::string& path, const WriteOptions& options);
uint64_t WritePtdLayout(const PtdLayout& layout, const std::string& path, const WriteOptions& options);

// The first offset at which the file a layout describes differs from `file`
// (the shorter size when one is a prefix of the other), or nullopt when they
// are the same bytes -- without rendering or writing anything. Segment data
// that views `file` itself at the offset it would be written to (a rewrite of
// the file it was read from) is not read again; padding and other data are.
std::optional<uint64_t> FirstDifference(const PteLayout& layout, const Bytes& file);
std::optional<uint64_t> FirstDifference(const PtdLayout& layout, const Bytes& file);

// Whole file in memory (tests, small programs). From a layout no longer needed
// the head is taken, not copied.
std::vector<uint8_t> RenderPte(const PteLayout& layout);
std::vector<uint8_t> RenderPte(PteLayout&& layout);
std::vector<uint8_t> RenderPtd(const PtdLayout& layout);

}  // namespace ptepack
