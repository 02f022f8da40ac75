// The whole plan of a .pte or .ptd file as numbers, decided before a byte is
// written (like LLVM objcopy's layoutSections/layoutSegments before
// ELFWriter::write). No I/O, no FlatBuffers: the writer (serialize/write/)
// gathers sizes, alignments and dedup decisions from a PackageParts, asks for a
// plan here, copies the decided numbers into the program tree, encodes it,
// asks for the header plan, and streams bytes.
//
// Two steps, because the flatbuffer's size is only known once it is encoded
// and the encoding holds the segment offsets:
//   1. PlanPteSegments / PlanPtdSegments / PlanLegacyPtdSegments: every
//      segment's offset (relative to the segment base), size and padding, the
//      constant and mutable offsets, delegate and named-data segment indices;
//   2. PlanPteHead / PlanPtdHead / PlanLegacyPtdHead: header, padding and the
//      segment base offset from the encoded flatbuffer's size.
// The rules are ExecuTorch's serializers': exir/_serialize/_program.py
// (serialize_pte_binary) and extension/flat_tensor/serialize/serialize.py
// (FlatTensorSerializer.serialize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/config.h"
#include "support/small_vec.h"

namespace ptepack {

// The numbers of a BackendConfig that decide where bytes go, read once: the
// writer lays a file out from these, never from the config itself.
struct LayoutSettings {
  uint64_t segment_alignment = 128;
  uint64_t tensor_alignment = 16;    // constant_tensor_alignment (default 16)
  uint64_t delegate_alignment = 16;  // inline delegate data (default 16)
  uint64_t ptd_segment_alignment = 128;
  bool inline_constants = false;
  bool extract_delegates = true;
  bool dedup_inline_delegate_data = false;
  bool legacy_extended_header = false;
  FlatbufferOrder order = FlatbufferOrder::kFlatc;
};
LayoutSettings LayoutSettingsOf(const BackendConfig& config);

// The external split: the tag of the .ptd a tensor's data goes to, or
// nullopt to keep it in the program. Mutable weights follow
// external_mutable_weights; constants external_constants_fn when set, else
// external_constants (all to external_tag), as ExecuTorch's
// ExecutorchBackendConfig.external_constants / external_mutable_weights.
std::optional<std::string> ExternalTagFor(const ConstantTensorInfo& info, const BackendConfig& config);

// Hard limits of the format. A program (flatbuffer with its eh00 header, or a
// .ptd's header and flatbuffer) must fit FlatBuffers' 32-bit signed offsets,
// and a segment index or count must fit 32 bits. Throws
// ptepack::Error("limit-exceeded").
inline constexpr uint64_t kMaxProgramBytes = 0x7FFFFFFF;  // FLATBUFFERS_MAX_BUFFER_SIZE
inline constexpr uint64_t kMaxSegments = 0xFFFFFFFF;      // uint32 indices and vector length
void CheckFormatLimits(uint64_t program_bytes, uint64_t num_segments);

// One piece of data to place. `content` is the caller's dedup decision: the
// index of the first piece of the same list with equal bytes (its own index
// when it is the first); pieces of one content share a segment.
struct BlobSpec {
  uint64_t size = 0;
  uint64_t alignment = 1;
  size_t content = 0;
};

// What a segment holds: which list its pieces index.
enum class SegmentKind : uint8_t { kConstants, kMutableData, kDelegate, kNamedData, kPtdTensors };
inline constexpr size_t kSegmentKinds = 5;

// A segment: where it starts (relative to the segment base), how long it is,
// and the pieces in it (indices into the list it was made from) with each
// piece's offset inside the segment. 64 bytes: every segment but a constant
// or mutable data segment (or a legacy .ptd's tensors) has one piece, kept
// inline (a .ptd of 300,000 entries has as many segments).
struct SegmentSlot {
  SegmentKind kind = SegmentKind::kNamedData;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t alignment = 1;  // own alignment, combined with the segment alignment
  SmallVec<size_t> items;  // pieces, in order
  SmallVec<uint64_t> item_offsets;
};

// Where a delegate's payload goes: a segment, or an inline entry of the
// program's backend_delegate_data (renumbered in order of use).
struct DelegatePlacement {
  bool in_segment = false;
  uint32_t index = 0;  // segment index or backend_delegate_data index
};

struct PteSegmentInputs {
  uint64_t segment_alignment = 128;
  // Constant segment: each constant_buffer entry, padded to the tensor
  // alignment (all but the last). Unset: constants stay inline.
  std::optional<std::vector<uint64_t>> constants;
  uint64_t tensor_alignment = 16;
  // Mutable data segment: entries concatenated, no padding. Unset or empty
  // in total: no segment.
  std::optional<std::vector<uint64_t>> mutable_data;
  // Delegate payloads in program order (`content` numbers equal payloads),
  // moved to segments when extract_delegates; an empty payload stays inline.
  bool extract_delegates = false;
  std::vector<BlobSpec> delegates;
  // Named data stored in the .pte, one segment per distinct content.
  std::vector<BlobSpec> named_data;
};

struct PteSegmentsPlan {
  std::vector<SegmentSlot> segments;
  std::optional<size_t> constant_segment;
  std::vector<uint64_t> constant_offsets;
  std::optional<size_t> mutable_segment;
  std::vector<uint64_t> mutable_offsets;
  std::vector<DelegatePlacement> delegates;  // per delegate (when extract_delegates)
  std::vector<uint32_t> named_segments;      // per named blob
  uint64_t dedup_bytes_saved = 0;            // bytes not stored twice (delegates, named data)
  uint64_t data_size = 0;                    // end of the last segment (segment_data_size)
};

PteSegmentsPlan PlanPteSegments(const PteSegmentInputs& in);

struct PteHeadInputs {
  uint64_t flatbuffer_size = 0;    // as encoded: root offset and id included
  uint64_t max_force_align = 1;    // largest force_align the encoding used
  uint64_t header_length = 0;      // eh00 header's length as written
  uint64_t min_file_size = 0;      // the runtime reads this many bytes first
  uint64_t segment_data_size = 0;  // PteSegmentsPlan::data_size
  uint64_t segment_alignment = 128;
};

struct PteHeadPlan {
  bool has_header = false;           // only when there is segment data
  uint64_t padded_header = 0;        // header plus zeros to max_force_align
  uint64_t program_size = 0;         // eh00 program_size: padded header + flatbuffer
  uint64_t segment_base_offset = 0;  // 0 without segments
  uint64_t segment_data_size = 0;
  uint64_t head_size = 0;    // bytes before the segment padding
  uint64_t header_size = 8;  // root offset, id and the eh00 header (PteFile::header_size)
};

PteHeadPlan PlanPteHead(const PteHeadInputs& in);

// A .ptd (FlatTensor of June 2025 and later): one segment per distinct
// content, at lcm(segment_alignment, its alignment).
struct PtdSegmentsPlan {
  std::vector<SegmentSlot> segments;
  std::vector<uint32_t> entry_segments;  // per entry
  uint64_t data_size = 0;
};

PtdSegmentsPlan PlanPtdSegments(const std::vector<BlobSpec>& entries, uint64_t segment_alignment);

// The FlatTensor layout of before June 2025: the tensors share segment 0,
// each padded to `tensor_alignment` (equal tensors stored once); named data
// gets one segment per distinct content after it.
struct LegacyPtdSegmentsPlan {
  std::vector<SegmentSlot> segments;     // [0]: the tensors
  std::vector<uint64_t> tensor_offsets;  // per tensor, inside segment 0
  std::vector<uint32_t> named_segments;  // per named entry
  uint64_t data_size = 0;
};

LegacyPtdSegmentsPlan PlanLegacyPtdSegments(const std::vector<BlobSpec>& tensors, uint64_t tensor_alignment,
                                            const std::vector<BlobSpec>& named, uint64_t segment_alignment);

struct PtdHeadPlan {
  uint64_t padded_header = 0;  // FH01 header plus zeros: the flatbuffer's offset
  uint64_t flatbuffer_size = 0;
  uint64_t padded_flatbuffer = 0;    // flatbuffer plus zeros (legacy layout only)
  uint64_t segment_base_offset = 0;  // = the head's size
  uint64_t segment_data_size = 0;
  uint64_t total_size() const { return segment_base_offset + segment_data_size; }
};

// The head of a .ptd: the FH01 header padded to `header_alignment` (the
// flatbuffer's offset), the flatbuffer padded to `flatbuffer_alignment`,
// then zeros to the next multiple of `segment_alignment` (the base).
// Current layout: header_alignment 16 (_FLATBUFFER_ALIGNMENT), flatbuffer
// not padded (1); the layout before June 2025: both at its tensor alignment.
PtdHeadPlan PlanPtdHead(uint64_t header_length, uint64_t header_alignment, uint64_t flatbuffer_alignment,
                        uint64_t flatbuffer_size, uint64_t segment_data_size, uint64_t segment_alignment);

}  // namespace ptepack
