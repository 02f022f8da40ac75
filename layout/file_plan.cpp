#include "layout/file_plan.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "layout/alignment.h"
#include "ptepack/error.h"

namespace ptepack {

LayoutSettings LayoutSettingsOf(const BackendConfig& c) {
  LayoutSettings s;
  s.segment_alignment = c.segment_alignment;
  s.tensor_alignment = c.tensor_alignment();
  s.delegate_alignment = c.delegate_data_alignment();
  s.ptd_segment_alignment = c.ptd_segment_alignment;
  s.inline_constants = c.inline_constants;
  s.extract_delegates = c.extract_delegate_segments;
  s.dedup_inline_delegate_data = c.dedup_inline_delegate_data;
  s.legacy_extended_header = c.legacy_extended_header;
  s.order = c.flatbuffer_order;
  return s;
}

std::optional<std::string> ExternalTagFor(const ConstantTensorInfo& info, const BackendConfig& c) {
  if (info.mutable_weight) return c.external_mutable_weights ? std::optional(c.external_tag) : std::nullopt;
  if (c.external_constants_fn) return c.external_constants_fn(info);
  if (c.external_constants) return c.external_tag;
  return std::nullopt;
}

void CheckFormatLimits(uint64_t program_bytes, uint64_t num_segments) {
  if (program_bytes > kMaxProgramBytes) {
    throw Error("limit-exceeded",
                "program flatbuffer would be at least " + std::to_string(program_bytes) +
                    " bytes; FlatBuffers cannot address more than 2 GiB (" + std::to_string(kMaxProgramBytes) +
                    " bytes). Move constants or delegate data out of the flatbuffer (inline_constants=false, "
                    "extract_delegate_segments=true) or into .ptd files");
  }
  if (num_segments > kMaxSegments) {
    throw Error("limit-exceeded", std::to_string(num_segments) + " segments; segment indices are 32-bit (at most " +
                                      std::to_string(kMaxSegments) + " segments)");
  }
}

namespace {

// Entries concatenated, each but the last padded to `item_alignment`
// (_program.py, _extract_constant_segment).
SegmentSlot Concat(SegmentKind kind, const std::vector<uint64_t>& sizes, uint64_t item_alignment) {
  SegmentSlot s;
  s.kind = kind;
  for (size_t i = 0; i < sizes.size(); ++i) {
    s.items.push_back(i);
    s.item_offsets.push_back(s.size);
    const uint64_t pad = i + 1 < sizes.size() ? PaddingRequired(sizes[i], item_alignment) : 0;
    s.size = CheckedAdd(s.size, CheckedAdd(sizes[i], pad));
  }
  return s;
}

// One segment per distinct content, appended to `segs` in order of first
// use: returns each blob's segment index (the first one of its content).
// A blob's `content` is the index of an earlier (or the same) blob.
std::vector<uint32_t> DedupedSegments(SegmentKind kind, const std::vector<BlobSpec>& blobs,
                                      std::vector<SegmentSlot>& segs, uint64_t* bytes_saved,
                                      const std::vector<bool>* skip = nullptr) {
  std::vector<uint32_t> index(blobs.size(), 0);
  segs.reserve(segs.size() + blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    if (skip && (*skip)[i]) continue;
    const size_t first = blobs[i].content;
    if (first > i || (first < i && blobs[first].size != blobs[i].size)) {
      throw Error("internal-layout", "blob " + std::to_string(i) + ": content " + std::to_string(first) +
                                         " is not an earlier blob of its size");
    }
    if (first < i) {
      index[i] = index[first];
      *bytes_saved = CheckedAdd(*bytes_saved, blobs[i].size);
      continue;
    }
    index[i] = static_cast<uint32_t>(segs.size());
    SegmentSlot s;
    s.kind = kind;
    s.size = blobs[i].size;
    s.alignment = blobs[i].alignment;
    s.items.push_back(i);
    s.item_offsets.push_back(0);
    segs.push_back(std::move(s));
  }
  segs.shrink_to_fit();
  return index;
}

// Each segment at the first multiple of lcm(segment_alignment, its own
// alignment) after the previous one (_program.py, serialize_pte_binary;
// serialize.py, FlatTensorSerializer.serialize). Returns the data size.
uint64_t Place(std::vector<SegmentSlot>& segs, uint64_t segment_alignment) {
  uint64_t prev_end = 0;
  for (auto& s : segs) {
    s.offset = AlignUp(prev_end, Lcm(segment_alignment, s.alignment));
    prev_end = CheckedAdd(s.offset, s.size);
  }
  return prev_end;
}

}  // namespace

// The order of serialize_pte_binary: constant segment, mutable data segment,
// delegate segments (_extract_delegate_segments), named data segments
// (_extract_named_data).
PteSegmentsPlan PlanPteSegments(const PteSegmentInputs& in) {
  PteSegmentsPlan out;
  if (in.constants && !in.constants->empty()) {
    out.constant_segment = out.segments.size();
    SegmentSlot s = Concat(SegmentKind::kConstants, *in.constants, in.tensor_alignment);
    out.constant_offsets.assign(s.item_offsets.begin(), s.item_offsets.end());
    out.segments.push_back(std::move(s));
  }
  if (in.mutable_data) {
    SegmentSlot s = Concat(SegmentKind::kMutableData, *in.mutable_data, 1);
    if (s.size > 0) {
      out.mutable_segment = out.segments.size();
      out.mutable_offsets.assign(s.item_offsets.begin(), s.item_offsets.end());
      out.segments.push_back(std::move(s));
    }
  }
  if (in.extract_delegates) {
    std::vector<bool> stays(in.delegates.size());
    for (size_t i = 0; i < in.delegates.size(); ++i) stays[i] = in.delegates[i].size == 0;
    std::vector<uint32_t> seg =
        DedupedSegments(SegmentKind::kDelegate, in.delegates, out.segments, &out.dedup_bytes_saved, &stays);
    uint32_t inline_index = 0;
    for (size_t i = 0; i < in.delegates.size(); ++i) {
      out.delegates.push_back(stays[i] ? DelegatePlacement{false, inline_index++} : DelegatePlacement{true, seg[i]});
    }
  }
  out.named_segments = DedupedSegments(SegmentKind::kNamedData, in.named_data, out.segments, &out.dedup_bytes_saved);
  out.data_size = Place(out.segments, in.segment_alignment);
  return out;
}

// _program.py, serialize_pte_binary: no header without segment data; else
// the eh00 header padded to the largest force_align, program_size = padded
// header + flatbuffer, segment_base_offset = program_size aligned up to the
// segment alignment.
PteHeadPlan PlanPteHead(const PteHeadInputs& in) {
  PteHeadPlan out;
  if (in.segment_data_size == 0) {
    // A tiny program (no methods, nothing else) encodes to fewer bytes than
    // the runtime reads first; zeros after the flatbuffer make it loadable.
    out.head_size = std::max(in.flatbuffer_size, in.min_file_size);
    out.program_size = in.flatbuffer_size;
    return out;
  }
  out.has_header = true;
  out.padded_header = AlignUp(in.header_length, in.max_force_align);
  out.program_size = CheckedAdd(out.padded_header, in.flatbuffer_size);
  out.segment_base_offset = AlignUp(out.program_size, in.segment_alignment);
  out.segment_data_size = in.segment_data_size;
  out.head_size = out.program_size;
  out.header_size = 8 + in.header_length;
  return out;
}

// serialize.py, _extract_named_data and FlatTensorSerializer.serialize.
PtdSegmentsPlan PlanPtdSegments(const std::vector<BlobSpec>& entries, uint64_t segment_alignment) {
  PtdSegmentsPlan out;
  uint64_t saved = 0;
  out.entry_segments = DedupedSegments(SegmentKind::kNamedData, entries, out.segments, &saved);
  out.data_size = Place(out.segments, segment_alignment);
  return out;
}

LegacyPtdSegmentsPlan PlanLegacyPtdSegments(const std::vector<BlobSpec>& tensors, uint64_t tensor_alignment,
                                            const std::vector<BlobSpec>& named, uint64_t segment_alignment) {
  LegacyPtdSegmentsPlan out;
  SegmentSlot shared;
  shared.kind = SegmentKind::kPtdTensors;
  std::unordered_map<size_t, uint64_t> by_content;  // content -> offset
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto it = by_content.find(tensors[i].content);
    if (it != by_content.end()) {
      out.tensor_offsets.push_back(it->second);
      continue;
    }
    const uint64_t off = AlignUp(shared.size, tensor_alignment);
    by_content.emplace(tensors[i].content, off);
    out.tensor_offsets.push_back(off);
    shared.items.push_back(i);
    shared.item_offsets.push_back(off);
    shared.size = CheckedAdd(off, tensors[i].size);
  }
  out.segments.push_back(std::move(shared));
  uint64_t saved = 0;
  out.named_segments = DedupedSegments(SegmentKind::kNamedData, named, out.segments, &saved);
  out.data_size = Place(out.segments, segment_alignment);
  return out;
}

// serialize.py, FlatTensorSerializer.serialize: the header padded to the
// flatbuffer alignment, the base after header and flatbuffer at the segment
// alignment. The serializer before June 2025 padded header and flatbuffer to
// the tensor alignment.
PtdHeadPlan PlanPtdHead(uint64_t header_length, uint64_t header_alignment, uint64_t flatbuffer_alignment,
                        uint64_t flatbuffer_size, uint64_t segment_data_size, uint64_t segment_alignment) {
  PtdHeadPlan out;
  out.padded_header = AlignUp(header_length, header_alignment);
  out.flatbuffer_size = flatbuffer_size;
  out.padded_flatbuffer = AlignUp(flatbuffer_size, flatbuffer_alignment);
  out.segment_base_offset = AlignUp(CheckedAdd(out.padded_flatbuffer, out.padded_header), segment_alignment);
  out.segment_data_size = segment_data_size;
  return out;
}

}  // namespace ptepack
