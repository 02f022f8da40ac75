// Writing .pte and .ptd files from a Package and a BackendConfig.
//
// Layout follows ExecuTorch's serializer step by step: constant segment
// (tensors padded to constant_tensor_alignment), mutable data segment,
// delegate payloads moved to segments (deduplicated) when
// extract_delegate_segments is set, named data segments, each segment at
// lcm(segment_alignment, its alignment); then the flatbuffer, the eh00
// header padded to the schema's largest force_align, and the segments.
// Output is streamed to a temp file and renamed into place.
#pragma once

#include <string>
#include <vector>

#include "config/backend_config.h"
#include "layout/segment_plan.h"
#include "serialize/model/package.h"

namespace ptepack {

struct PteLayout {
  std::vector<uint8_t> head;  // root offset, id, eh00 header, flatbuffer
  uint64_t flatbuffer_size = 0;
  uint64_t segment_base_offset = 0;  // 0 without segments
  SegmentPlan segments;
  std::vector<ExternalFile> external;  // .ptd files to write alongside
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

// Hard limits of the format. A program (flatbuffer with its eh00 header, or a
// .ptd's header and flatbuffer) must fit FlatBuffers' 32-bit signed offsets,
// and a segment index or count must fit 32 bits. LayoutPte checks a lower
// bound of the flatbuffer size before encoding and the real size after, so
// an oversized program fails before memory is spent on it and before any
// byte is written. Throws ptepack::Error("limit-exceeded").
inline constexpr uint64_t kMaxProgramBytes = 0x7FFFFFFF;  // FLATBUFFERS_MAX_BUFFER_SIZE
inline constexpr uint64_t kMaxSegments = 0xFFFFFFFF;      // uint32 indices and vector length
void CheckFormatLimits(uint64_t program_bytes, uint64_t num_segments);

// Pure layout, no I/O. Throws ptepack::Error on invalid programs or configs.
PteLayout LayoutPte(const Package& pkg, const BackendConfig& config);
PtdLayout LayoutPtd(const ExternalFile& file, uint64_t segment_alignment);

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
};

struct WriteResult {
  WrittenFile pte;
  std::vector<WrittenFile> ptds;
  uint64_t flatbuffer_size = 0;
  size_t num_segments = 0;
  uint64_t dedup_bytes_saved = 0;
};

// Writes `pte_path` and, for external data, "<tag>.ptd" files in the same
// directory. Each file is written to a temp file and renamed on success; on
// failure no output file is created or changed. Before anything is written,
// name collisions (two outputs with one name, an output that is an input) and
// existing .ptd files that are not inputs (unless options.force) are refused.
// The staged files are read back with PteFile/PtdFile's checks (and the
// program's external keys looked up in the written .ptd files); if any check
// fails, nothing is renamed and Error("output-invalid") carries the findings.
// Outputs keep the mode of the files they replace; symlinks are refused.
WriteResult WritePackage(const Package& pkg, const BackendConfig& config, const std::string& pte_path,
                         const WriteOptions& options = {});

// Writes a layout to a file (atomic).
uint64_t WritePteLayout(const PteLayout& layout, const std::string& path, const WriteOptions& options);
uint64_t WritePtdLayout(const PtdLayout& layout, const std::string& path, const WriteOptions& options);

// Whole file in memory (tests, small programs).
std::vector<uint8_t> RenderPte(const PteLayout& layout);
std::vector<uint8_t> RenderPtd(const PtdLayout& layout);

}  // namespace ptepack
