// layout/file_plan.h with numbers alone: every expected offset below is
// derived by hand from ExecuTorch's serializers (paths in
// ../shared/oracles/executorch), never from our own output.
#include "layout/file_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "layout/segment_plan.h"
#include "ptepack/error.h"

namespace ptepack {
namespace {

// exir/_serialize/_program.py, _extract_constant_segment: each buffer but
// the last padded to tensor_alignment; offsets are the running sum.
//   sizes 10, 20, 5 at 16: offsets 0, 10+6=16, 16+20+12=48; size 48+5=53.
// serialize_pte_binary: the first segment at aligned_size(0, lcm(128, 1)) = 0.
// The mutable segment (no padding: 4, 3 -> offsets 0, 4, size 7) at
// aligned_size(53, 128) = 128; segment_data_size 128 + 7 = 135.
TEST(FilePlan, ThreeConstantsAt16ThenMutableDataAt128) {
  PteSegmentInputs in;
  in.segment_alignment = 128;
  in.tensor_alignment = 16;
  in.constants = std::vector<uint64_t>{10, 20, 5};
  in.mutable_data = std::vector<uint64_t>{4, 3};
  const PteSegmentsPlan plan = PlanPteSegments(in);
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.constant_segment, 0u);
  EXPECT_EQ(plan.constant_offsets, (std::vector<uint64_t>{0, 16, 48}));
  EXPECT_EQ(plan.segments[0].offset, 0u);
  EXPECT_EQ(plan.segments[0].size, 53u);
  EXPECT_EQ(plan.mutable_segment, 1u);
  EXPECT_EQ(plan.mutable_offsets, (std::vector<uint64_t>{0, 4}));
  EXPECT_EQ(plan.segments[1].offset, 128u);
  EXPECT_EQ(plan.segments[1].size, 7u);
  EXPECT_EQ(plan.data_size, 135u);
}

// inline_constants (constants unset) and mutable entries of 0 bytes in
// total: no segment at all, so no extended header (serialize_pte_binary
// returns the bare flatbuffer when segments_data is empty).
TEST(FilePlan, InlineConstantsAndEmptyMutableDataMakeNoSegments) {
  PteSegmentInputs in;
  in.mutable_data = std::vector<uint64_t>{0, 0};
  const PteSegmentsPlan plan = PlanPteSegments(in);
  EXPECT_TRUE(plan.segments.empty());
  EXPECT_FALSE(plan.constant_segment.has_value());
  EXPECT_FALSE(plan.mutable_segment.has_value());
  EXPECT_EQ(plan.data_size, 0u);
}

// _program.py, _extract_delegate_segments: a non-empty payload becomes a
// segment (equal payloads share one: the emitter's
// backend_delegate_data_cache), an empty one stays inline, renumbered.
//   100 -> segment 0 at 0; 0 bytes -> inline 0; 100 again -> segment 0
//   (100 bytes saved); 30 -> segment 1 at aligned_size(100, 128) = 128.
TEST(FilePlan, DelegatesExtractedOrInline) {
  PteSegmentInputs in;
  in.segment_alignment = 128;
  in.extract_delegates = true;
  in.delegates = {{100, 1, 0}, {0, 1, 1}, {100, 1, 0}, {30, 1, 3}};
  const PteSegmentsPlan plan = PlanPteSegments(in);
  ASSERT_EQ(plan.delegates.size(), 4u);
  EXPECT_TRUE(plan.delegates[0].in_segment);
  EXPECT_EQ(plan.delegates[0].index, 0u);
  EXPECT_FALSE(plan.delegates[1].in_segment);
  EXPECT_EQ(plan.delegates[1].index, 0u);
  EXPECT_TRUE(plan.delegates[2].in_segment);
  EXPECT_EQ(plan.delegates[2].index, 0u);
  EXPECT_TRUE(plan.delegates[3].in_segment);
  EXPECT_EQ(plan.delegates[3].index, 1u);
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.segments[1].offset, 128u);
  EXPECT_EQ(plan.dedup_bytes_saved, 100u);
  EXPECT_EQ(plan.data_size, 158u);

  in.extract_delegates = false;  // extract_delegate_segments=False: all stay in the flatbuffer
  const PteSegmentsPlan kept = PlanPteSegments(in);
  EXPECT_TRUE(kept.segments.empty());
  EXPECT_TRUE(kept.delegates.empty());
}

// _program.py, _extract_named_data (one segment per buffer index, with the
// first entry's alignment) and serialize_pte_binary (each segment at
// aligned_size(prev_end, math.lcm(segment_alignment, segment.alignment))):
//   constants 10, 20, 5 at 16: segment 0 at 0, 53 bytes;
//   A 40 bytes, alignment 256: lcm 256 -> aligned_size(53, 256) = 256, end 296;
//   B 8 bytes, alignment 64:  lcm 128 -> aligned_size(296, 128) = 384, end 392;
//   C equal to A: segment 1 again (40 bytes saved);
//   D 1 byte, alignment 3:    lcm 384 -> aligned_size(392, 384) = 768, end 769.
TEST(FilePlan, NamedDataAtLcmAlignments) {
  PteSegmentInputs in;
  in.segment_alignment = 128;
  in.tensor_alignment = 16;
  in.constants = std::vector<uint64_t>{10, 20, 5};
  in.named_data = {{40, 256, 0}, {8, 64, 1}, {40, 256, 0}, {1, 3, 3}};
  const PteSegmentsPlan plan = PlanPteSegments(in);
  ASSERT_EQ(plan.segments.size(), 4u);
  EXPECT_EQ(plan.named_segments, (std::vector<uint32_t>{1, 2, 1, 3}));
  EXPECT_EQ(plan.segments[1].offset, 256u);
  EXPECT_EQ(plan.segments[2].offset, 384u);
  EXPECT_EQ(plan.segments[3].offset, 768u);
  EXPECT_EQ(plan.dedup_bytes_saved, 40u);
  EXPECT_EQ(plan.data_size, 769u);
}

// serialize_pte_binary: padded_header_length = aligned_size(32, max_alignment);
// program_size = padded header + flatbuffer; segment_base_offset =
// aligned_size(program_size, segment_alignment). _ExtendedHeader.EXPECTED_LENGTH
// is 32 (the 24-byte form, without segment_data_size, is the older one).
//   flatbuffer 1000, force_align 16: 32 + 1000 = 1032 -> base 1152 (9 * 128).
//   force_align 64: 64 + 1000 = 1064 -> base 1152.
//   24-byte header at 16: aligned_size(24, 16) = 32 -> 1032, header_size 8 + 24.
TEST(FilePlan, PteHeaderAndSegmentBase) {
  PteHeadInputs in;
  in.flatbuffer_size = 1000;
  in.max_force_align = 16;
  in.header_length = 32;
  in.min_file_size = 64;
  in.segment_data_size = 53;
  in.segment_alignment = 128;
  PteHeadPlan h = PlanPteHead(in);
  EXPECT_TRUE(h.has_header);
  EXPECT_EQ(h.padded_header, 32u);
  EXPECT_EQ(h.program_size, 1032u);
  EXPECT_EQ(h.segment_base_offset, 1152u);
  EXPECT_EQ(h.segment_data_size, 53u);
  EXPECT_EQ(h.header_size, 40u);
  in.max_force_align = 64;
  h = PlanPteHead(in);
  EXPECT_EQ(h.padded_header, 64u);
  EXPECT_EQ(h.program_size, 1064u);
  EXPECT_EQ(h.segment_base_offset, 1152u);
  in.max_force_align = 16;
  in.header_length = 24;
  h = PlanPteHead(in);
  EXPECT_EQ(h.padded_header, 32u);
  EXPECT_EQ(h.program_size, 1032u);
  EXPECT_EQ(h.header_size, 32u);
}

// No segment data: no header, no base (serialize_pte_binary returns the
// flatbuffer as is); a program shorter than the 64 bytes the runtime reads
// first (runtime/executor/program.h, Program::kMinHeadBytes = 64) is padded
// with zeros to them.
TEST(FilePlan, PteWithoutSegmentsHasNoHeader) {
  PteHeadInputs in;
  in.flatbuffer_size = 200;
  in.min_file_size = 64;
  PteHeadPlan h = PlanPteHead(in);
  EXPECT_FALSE(h.has_header);
  EXPECT_EQ(h.segment_base_offset, 0u);
  EXPECT_EQ(h.head_size, 200u);
  EXPECT_EQ(h.header_size, 8u);
  in.flatbuffer_size = 40;
  EXPECT_EQ(PlanPteHead(in).head_size, 64u);
}

// extension/flat_tensor/serialize/serialize.py, FlatTensorSerializer.serialize:
// _extract_named_data gives one segment per buffer index; each at
// aligned_size(prev_end, lcm(segment_alignment, alignment)); the header
// (EXPECTED_LENGTH 40) padded to _FLATBUFFER_ALIGNMENT 16 -> 48;
// segment_base_offset = aligned_size(flatbuffer + 48, segment_alignment).
//   entries 100, 50, 100 (= first) at 16: segments at 0 and
//   aligned_size(100, 16) = 112; data 112 + 50 = 162.
//   flatbuffer 300: base aligned_size(348, 16) = 352; file 352 + 162 = 514.
TEST(FilePlan, PtdSegmentsHeaderAndBase) {
  const PtdSegmentsPlan plan = PlanPtdSegments({{100, 1, 0}, {50, 1, 1}, {100, 1, 0}}, 16);
  EXPECT_EQ(plan.entry_segments, (std::vector<uint32_t>{0, 1, 0}));
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.segments[1].offset, 112u);
  EXPECT_EQ(plan.data_size, 162u);
  const PtdHeadPlan h = PlanPtdHead(40, 16, 1, 300, plan.data_size, 16);
  EXPECT_EQ(h.padded_header, 48u);
  EXPECT_EQ(h.flatbuffer_size, 300u);
  EXPECT_EQ(h.segment_base_offset, 352u);
  EXPECT_EQ(h.total_size(), 514u);
  // segment_alignment 4096 (a page): the base rounds to 4096.
  EXPECT_EQ(PlanPtdHead(40, 16, 1, 300, 162, 4096).segment_base_offset, 4096u);
}

// The FlatTensor serializer before June 2025 (the FlatTensor schema's
// `tensors` list with `tensor_alignment`, read by
// extension/flat_tensor/flat_tensor_data_map.cpp's legacy path): tensors in
// segment 0, each at aligned_size(end, tensor_alignment), equal tensors
// stored once; header (40) and flatbuffer each padded to tensor_alignment.
//   tensors 10, 20, 10 (= first), 5 at 16: offsets 0, 16, 0, 48; size 53.
//   named 7 bytes: segment 1 at aligned_size(53, 128) = 128.
//   flatbuffer 300: header 48 + aligned_size(300, 16) = 304 -> 352 ->
//   base aligned_size(352, 128) = 384.
TEST(FilePlan, LegacyPtdSharedTensorSegment) {
  const LegacyPtdSegmentsPlan plan =
      PlanLegacyPtdSegments({{10, 1, 0}, {20, 1, 1}, {10, 1, 0}, {5, 1, 3}}, 16, {{7, 1, 0}}, 128);
  EXPECT_EQ(plan.tensor_offsets, (std::vector<uint64_t>{0, 16, 0, 48}));
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.segments[0].size, 53u);
  EXPECT_EQ(plan.segments[1].offset, 128u);
  EXPECT_EQ(plan.named_segments, (std::vector<uint32_t>{1}));
  EXPECT_EQ(plan.data_size, 135u);
  const PtdHeadPlan h = PlanPtdHead(40, 16, 16, 300, plan.data_size, 128);
  EXPECT_EQ(h.padded_header, 48u);
  EXPECT_EQ(h.padded_flatbuffer, 304u);
  EXPECT_EQ(h.segment_base_offset, 384u);
}

// exir/passes/external_constants_pass.py: external_constants_pass tags
// every constant with gen_tag_fn(node) when a function is given (None keeps
// it), else with the default tag; external_mutable_weights_pass tags mutable
// weights only (exir/capture/_config.py: both off by default).
TEST(FilePlan, ExternalSplitByTag) {
  BackendConfig c;
  ConstantTensorInfo weight;
  weight.name = "w";
  ConstantTensorInfo mut = weight;
  mut.mutable_weight = true;
  EXPECT_FALSE(ExternalTagFor(weight, c).has_value());
  EXPECT_FALSE(ExternalTagFor(mut, c).has_value());
  c.external_constants = true;
  c.external_tag = "model";
  EXPECT_EQ(ExternalTagFor(weight, c), "model");
  EXPECT_FALSE(ExternalTagFor(mut, c).has_value());  // mutable weights have their own switch
  c.external_mutable_weights = true;
  EXPECT_EQ(ExternalTagFor(mut, c), "model");
  c.external_constants_fn = [](const ConstantTensorInfo& i) -> std::optional<std::string> {
    return i.name == "w" ? std::optional<std::string>("w_file") : std::nullopt;
  };
  EXPECT_EQ(ExternalTagFor(weight, c), "w_file");
  ConstantTensorInfo other;
  other.name = "b";
  EXPECT_FALSE(ExternalTagFor(other, c).has_value());
}

// The settings the writer lays a file out from are the config's own numbers
// (ExecutorchBackendConfig: segment_alignment 128, constant_tensor_alignment
// and delegate_alignment None -> program.fbs force_align 16).
TEST(FilePlan, LayoutSettingsOfDefaults) {
  const LayoutSettings s = LayoutSettingsOf(BackendConfig{});
  EXPECT_EQ(s.segment_alignment, 128u);
  EXPECT_EQ(s.tensor_alignment, 16u);
  EXPECT_EQ(s.delegate_alignment, 16u);
  BackendConfig c;
  c.constant_tensor_alignment = 64;
  c.segment_alignment = 4096;
  const LayoutSettings t = LayoutSettingsOf(c);
  EXPECT_EQ(t.tensor_alignment, 64u);
  EXPECT_EQ(t.segment_alignment, 4096u);
}

// FlatBuffers' FLATBUFFERS_MAX_BUFFER_SIZE is 2^31 - 1; segment indices are
// uint32 in program.fbs.
TEST(FilePlan, FormatLimits) {
  EXPECT_NO_THROW(CheckFormatLimits(0x7FFFFFFF, 0xFFFFFFFFull));
  try {
    CheckFormatLimits(0x80000000ull, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "limit-exceeded");
  }
  EXPECT_THROW(CheckFormatLimits(1, 0x100000000ull), Error);
}

// A segment of one piece keeps it inline: SegmentSlot is 64 bytes with no
// allocation of its own (a .ptd of 300,000 entries has as many segments).
static_assert(sizeof(void*) != 8 || sizeof(SegmentSlot) == 64, "SegmentSlot grew");

// `content` must name an earlier blob of the same size (the dedup decision
// the writer makes); anything else is the writer's error, reported.
TEST(FilePlan, ContentThatIsNotAnEarlierEqualBlobIsRejected) {
  auto code = [](const std::vector<BlobSpec>& blobs) {
    try {
      PlanPtdSegments(blobs, 16);
    } catch (const Error& e) {
      return e.finding().code;
    }
    return std::string();
  };
  EXPECT_EQ(code({{100, 1, 0}, {100, 1, 0}}), "");
  EXPECT_EQ(code({{100, 1, 1}, {100, 1, 1}}), "internal-layout");  // a later blob
  EXPECT_EQ(code({{100, 1, 0}, {50, 1, 0}}), "internal-layout");   // another size
}

// The pieces of the constant segment as SegmentPlan streams them: sizes 10,
// 20, 5 at 16 are at 0, 16, 48 (ThreeConstantsAt16ThenMutableDataAt128), so
// the zeros before them are 0, 16 - 10 = 6 and 48 - 36 = 12; the mutable
// segment's 4 and 3 bytes follow each other (0, 0).
TEST(FilePlan, SegmentPlanStreamsEachPieceAfterItsPadding) {
  PteSegmentInputs in;
  in.segment_alignment = 128;
  in.tensor_alignment = 16;
  in.constants = std::vector<uint64_t>{10, 20, 5};
  in.mutable_data = std::vector<uint64_t>{4, 3};
  PteSegmentsPlan plan = PlanPteSegments(in);
  static const uint8_t bytes[32] = {};
  SegmentPlan::Lists lists;
  for (uint64_t n : {10, 20, 5}) lists[static_cast<size_t>(SegmentKind::kConstants)].push_back(Bytes::View(bytes, n));
  for (uint64_t n : {4, 3}) lists[static_cast<size_t>(SegmentKind::kMutableData)].push_back(Bytes::View(bytes, n));
  const SegmentPlan sp(std::move(plan.segments), lists);
  ASSERT_EQ(sp.segments().size(), 2u);
  EXPECT_EQ(sp.data_size(), 135u);
  std::vector<std::pair<uint64_t, size_t>> got;
  for (const SegmentSlot& s : sp.segments()) {
    EXPECT_TRUE(sp.ForEachPiece(s, [&](uint64_t pad, const Bytes& b) {
      got.emplace_back(pad, b.size);
      return true;
    }));
  }
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, size_t>>{{0, 10}, {6, 20}, {12, 5}, {0, 4}, {0, 3}}));
  // Stopping after the first piece.
  size_t calls = 0;
  EXPECT_FALSE(sp.ForEachPiece(sp.segments()[0], [&](uint64_t, const Bytes&) { return ++calls < 1; }));
  EXPECT_EQ(calls, 1u);

  // A piece its list does not have, or longer than its place, is reported.
  std::vector<SegmentSlot> short_list = PlanPteSegments(in).segments;
  SegmentPlan::Lists fewer = lists;
  fewer[static_cast<size_t>(SegmentKind::kConstants)].pop_back();
  EXPECT_THROW(SegmentPlan(short_list, fewer), Error);
  SegmentPlan::Lists longer = lists;
  longer[static_cast<size_t>(SegmentKind::kConstants)][0] = Bytes::View(bytes, 17);
  EXPECT_THROW(SegmentPlan(short_list, longer), Error);
}

}  // namespace
}  // namespace ptepack
