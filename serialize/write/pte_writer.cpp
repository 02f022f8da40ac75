#include "serialize/write/pte_writer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <utility>

#include "flat_tensor_legacy_views_generated.h"
#include "flat_tensor_views_generated.h"
#include "layout/file_plan.h"
#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/file_io.h"
#include "serialize/io/heap.h"
#include "serialize/model/dedup.h"
#include "serialize/model/placement.h"
#include "serialize/write/output_files.h"
#include "serialize/write/segment_writer.h"
namespace ptepack {

using namespace prog;
using executorch_flatbuffer::DataLocation;
using executorch_flatbuffer::TensorDataLocation;

namespace {

// Equal inline delegate payloads merged into one backend_delegate_data entry,
// numbered in order of first use (BackendConfig::dedup_inline_delegate_data).
// ExecuTorch's serializer keeps the entries it is given: the dedup is its
// emitter's (backend_delegate_data_cache in _emitter.py, done by
// ProgramBuilder), and emitters before that cache wrote one entry per
// delegate. So by default the package's entries are kept as they are, and a
// file of either kind is rewritten byte for byte. Nothing changes when there
// are no duplicates.
void DedupInlineDelegateData(fb::Table& p) {
  auto& bdd = Program{p}.backend_delegate_data();
  const size_t n = bdd.elems().size();
  if (n < 2) return;
  DedupIndex dedup;
  std::vector<size_t> rep(n);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    Bytes data = bdd.elems()[i].table() ? BackendDelegateInlineData{*bdd.elems()[i].table()}.get_data() : Bytes{};
    auto same = dedup.FindOrAdd(data, i);
    rep[i] = same ? *same : i;
    any = any || same.has_value();
  }
  if (!any) return;
  std::vector<uint64_t> remap(n);
  std::vector<fb::Value> kept;
  for (size_t i = 0; i < n; ++i) {
    if (rep[i] == i) {
      remap[i] = kept.size();
      kept.push_back(bdd.elems()[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) remap[i] = remap[rep[i]];
  for (auto& pl : Program{p}.execution_plan().mutable_elems()) {
    if (!pl.table() || !ExecutionPlan{std::as_const(*pl.table())}.delegates().present()) continue;
    for (auto& del : ExecutionPlan{fb::Own(pl.mutable_table())}.delegates().mutable_elems()) {
      if (!del.table() || !BackendDelegate{std::as_const(*del.table())}.processed().table()) continue;
      auto& processed = BackendDelegate{fb::Own(del.mutable_table())}.processed();
      BackendDelegateDataReference ref{fb::Own(processed.mutable_table())};
      if (ref.get_location() != DataLocation::INLINE) continue;
      uint64_t idx = ref.get_index();
      if (idx < n) ref.set_index(static_cast<uint32_t>(remap[idx]));
    }
  }
  bdd.mutable_elems() = std::move(kept);
}

// ExecuTorch's emitter stores equal initial states of mutable buffers once
// when the tensors carry no ExtraTensorInfo (cached_spec_mutable_hash_values
// in _emitter.py; a buffer whose name is emitted always gets its own entry).
// Tensors are visited in program order; an entry whose bytes equal an earlier
// one is dropped and its tensors point at the earlier entry; the others are
// renumbered in order. Nothing changes when there are no such duplicates.
// The mutable data entry a planned tensor indexes (0: none).
uint64_t MutableDataIndex(const fb::Table& t, size_t n) {
  if (!IsPlanned(t)) return 0;
  const auto& eti = Tensor{t}.extra_tensor_info();
  if (eti.table() && ExtraTensorInfo{*eti.table()}.get_location() != TensorDataLocation::SEGMENT) return 0;  // external
  uint64_t idx = Tensor{t}.get_data_buffer_idx();
  return idx < n ? idx : 0;
}

void DedupMutableData(PackageParts& pkg) {
  if (!pkg.mutable_data || pkg.mutable_data->size() < 3) return;
  std::vector<Bytes>& md = *pkg.mutable_data;
  const size_t n = md.size();
  std::vector<size_t> rep(n);
  for (size_t i = 0; i < n; ++i) rep[i] = i;
  std::vector<bool> visited(n, false);
  DedupIndex seen;
  bool any = false;
  ForEachTensorCow(*pkg.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn&) {
    uint64_t idx = MutableDataIndex(t, n);
    if (idx == 0) return;
    const bool has_info = Tensor{t}.extra_tensor_info().table() != nullptr;
    if (visited[idx] || has_info) return;
    visited[idx] = true;
    if (auto same = seen.FindOrAdd(md[idx], idx)) {
      rep[idx] = *same;
      any = true;
    }
  });
  if (!any) return;
  std::vector<uint64_t> remap(n, 0);
  std::vector<Bytes> kept;
  for (size_t i = 0; i < n; ++i) {
    if (rep[i] != i) continue;
    remap[i] = kept.size();
    kept.push_back(md[i]);
  }
  // The same tensors as above (the test does not depend on what changed).
  ForEachTensorCow(*pkg.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn& edit) {
    uint64_t idx = MutableDataIndex(t, n);
    if (idx == 0 || remap[rep[idx]] == idx) return;
    edit([to = static_cast<uint32_t>(remap[rep[idx]])](fb::Table& owned) { Tensor{owned}.set_data_buffer_idx(to); });
  });
  md = std::move(kept);
}

}  // namespace

namespace {

fb::Value SubsegmentsValue(size_t segment_index, const std::vector<uint64_t>& offsets) {
  auto so = SubsegmentOffsets<>::New();
  SubsegmentOffsets sub{*so};
  sub.set_segment_index(static_cast<uint32_t>(segment_index));
  sub.set_offsets(offsets);
  return fb::TableValue(so);
}

std::vector<uint64_t> Sizes(const std::vector<Bytes>& items) {
  std::vector<uint64_t> sizes;
  for (const auto& b : items) sizes.push_back(b.size);
  return sizes;
}

// Sizes, alignments and the dedup decision (the first earlier blob of equal
// bytes) of `n` items: bytes_of(i) and alignment_of(i) give item i;
// `skip`ped items (empty delegate payloads) are not compared.
template <typename BytesOf, typename AlignmentOf>
std::vector<BlobSpec> Specs(size_t n, const BytesOf& bytes_of, const AlignmentOf& alignment_of,
                            bool skip_empty = false) {
  std::vector<BlobSpec> specs;
  specs.reserve(n);
  DedupIndex dedup([&bytes_of](size_t i) { return Bytes(bytes_of(i)); });
  for (size_t i = 0; i < n; ++i) {
    const Bytes& b = bytes_of(i);
    size_t content = i;
    if (!(skip_empty && b.size == 0)) content = dedup.FindOrAdd(b, i).value_or(i);
    specs.push_back(BlobSpec{b.size, alignment_of(i), content});
  }
  return specs;
}

// The same for a list of views (`alignments` empty: all 1).
std::vector<BlobSpec> Specs(const std::vector<Bytes>& items, const std::vector<uint64_t>& alignments,
                            bool skip_empty = false) {
  return Specs(
      items.size(), [&items](size_t i) -> const Bytes& { return items[i]; },
      [&alignments](size_t i) { return alignments.empty() ? uint64_t{1} : alignments[i]; }, skip_empty);
}

// Calls `fn` on each delegate of each plan, in program order; `own` owns
// (copy-on-write) the plans and delegates it visits.
void ForEachDelegate(Program<>& p, bool own, const std::function<void(const fb::Table&, fb::Value*)>& fn) {
  for (auto& pl : p.execution_plan().mutable_elems()) {
    if (ExecutionPlan{std::as_const(*pl.table())}.delegates().elems().empty()) continue;
    if (!own) {
      for (const auto& del : ExecutionPlan{std::as_const(*pl.table())}.delegates().elems()) fn(*del.table(), nullptr);
      continue;
    }
    for (auto& del : ExecutionPlan{fb::Own(pl.mutable_table())}.delegates().mutable_elems()) {
      fn(*del.table(), &del);
    }
  }
}

// Each delegate's inline payload, in program order, checked: inline before
// layout, index in range, every backend_delegate_data entry used.
std::vector<Bytes> DelegatePayloads(Program<>& p) {
  const auto& bdd = p.backend_delegate_data();
  std::vector<Bytes> payloads;
  std::vector<bool> seen(bdd.elems().size(), false);
  ForEachDelegate(p, false, [&](const fb::Table& del, fb::Value*) {
    BackendDelegate delegate{del};
    const auto& processed = delegate.processed();
    if (!processed.table() || BackendDelegateDataReference{*processed.table()}.get_location() != DataLocation::INLINE) {
      throw Error("bad-program", "delegate data must be inline before layout (" + delegate.get_id() + ")");
    }
    uint64_t idx = BackendDelegateDataReference{*processed.table()}.get_index();
    if (idx >= bdd.elems().size()) {
      throw Error("index-out-of-range", "delegate processed index " + std::to_string(idx) +
                                            " >= backend_delegate_data size " + std::to_string(bdd.elems().size()));
    }
    seen[idx] = true;
    payloads.push_back(BackendDelegateInlineData{*bdd.elems()[idx].table()}.get_data());
  });
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i])
      throw Error("bad-program", "backend_delegate_data[" + std::to_string(i) + "] is not used by any delegate");
  }
  return payloads;
}

// Points each delegate at its planned segment, or at its entry of the
// backend_delegate_data that stays inline (empty payloads).
void ApplyDelegatePlacement(Program<>& p, const std::vector<DelegatePlacement>& placed) {
  auto& bdd = p.backend_delegate_data();
  std::vector<fb::Value> remaining;
  size_t i = 0;
  ForEachDelegate(p, true, [&](const fb::Table&, fb::Value* del) {
    BackendDelegate delegate{fb::Own(del->mutable_table())};
    auto& processed = delegate.processed();
    const DelegatePlacement& d = placed[i++];
    if (d.in_segment) {
      auto r = BackendDelegateDataReference<>::New();
      BackendDelegateDataReference ref{*r};
      ref.set_location(DataLocation::SEGMENT);
      ref.set_index(d.index);
      processed = fb::TableValue(r);
      return;
    }
    remaining.push_back(bdd.elems()[BackendDelegateDataReference{*processed.table()}.get_index()]);
    BackendDelegateDataReference{fb::Own(processed.mutable_table())}.set_index(d.index);
  });
  if (bdd.present() || !remaining.empty()) bdd = fb::OffsetVector(std::move(remaining), reflection::Obj);
}

// The pieces of a .pte as layout/ sees them, and their bytes.
struct PtePieces {
  PteSegmentInputs in;
  SegmentPlan::Lists data;  // the list each SegmentKind's pieces index
  std::vector<Bytes>& Of(SegmentKind kind) { return data[static_cast<size_t>(kind)]; }
};

// `bytes`: also the constants' and mutable data's bytes (the segments'
// pieces); without them, only their sizes (a layout of the head alone).
PtePieces GatherPte(Program<>& p, const PackageParts& pkg, const LayoutSettings& s, bool bytes) {
  PtePieces out;
  out.in.segment_alignment = s.segment_alignment;
  out.in.tensor_alignment = s.tensor_alignment;
  const auto& cb = p.constant_buffer();
  if (!s.inline_constants && !cb.elems().empty()) {
    if (bytes) out.Of(SegmentKind::kConstants).reserve(cb.elems().size());
    std::vector<uint64_t>& sizes = out.in.constants.emplace();
    sizes.reserve(cb.elems().size());
    for (auto& b : cb.elems()) {
      const Bytes storage = b.table() ? Buffer{*b.table()}.get_storage() : Bytes{};
      sizes.push_back(storage.size);
      if (bytes) out.Of(SegmentKind::kConstants).push_back(storage);
    }
  }
  if (pkg.mutable_data) {
    if (bytes) out.Of(SegmentKind::kMutableData) = *pkg.mutable_data;
    out.in.mutable_data = Sizes(*pkg.mutable_data);
  }
  out.in.extract_delegates = s.extract_delegates;
  if (s.extract_delegates) {
    out.Of(SegmentKind::kDelegate) = DelegatePayloads(p);
    out.in.delegates = Specs(out.Of(SegmentKind::kDelegate), {}, /*skip_empty=*/true);
  }
  if (!pkg.named_data.empty() && !p.named_data().elems().empty()) {
    throw Error("bad-program", "program already has named data");
  }
  std::vector<uint64_t> alignments;
  for (const auto& blob : pkg.named_data) {
    out.Of(SegmentKind::kNamedData).push_back(blob.data);
    alignments.push_back(blob.alignment);
  }
  out.in.named_data = Specs(out.Of(SegmentKind::kNamedData), alignments);
  return out;
}

// Copies the plan's numbers into the program: constant and mutable
// subsegments, delegate references, named data entries, Program.segments.
void ApplySegmentsPlan(Program<>& p, const PackageParts& pkg, const PteSegmentInputs& in, const PteSegmentsPlan& plan) {
  if (plan.constant_segment) {
    p.constant_segment() = SubsegmentsValue(*plan.constant_segment, plan.constant_offsets);
    p.constant_buffer() = fb::OffsetVector({}, reflection::Obj);
  }
  if (plan.mutable_segment) {
    p.mutable_data_segments() =
        fb::OffsetVector({SubsegmentsValue(*plan.mutable_segment, plan.mutable_offsets)}, reflection::Obj);
  }
  if (in.extract_delegates) ApplyDelegatePlacement(p, plan.delegates);
  if (!pkg.named_data.empty()) {
    std::vector<fb::Value> entries;
    for (size_t i = 0; i < pkg.named_data.size(); ++i) {
      auto e = NamedData<>::New();
      NamedData entry{*e};
      entry.set_key(pkg.named_data[i].key);
      entry.set_segment_index(plan.named_segments[i]);
      entries.push_back(fb::TableValue(e));
    }
    p.named_data() = fb::OffsetVector(std::move(entries), reflection::Obj);
  }
  auto& segs = p.segments();
  if (!segs.present()) segs = fb::OffsetVector({}, reflection::Obj);
  for (const auto& s : plan.segments) {
    auto ds = DataSegment<>::New();
    DataSegment segment{*ds};
    segment.set_offset(s.offset);
    segment.set_size(s.size);
    segs.mutable_elems().push_back(fb::TableValue(ds));
  }
}

fb::Encoded EncodeProgram(const fb::Table& p, const LayoutSettings& s, size_t num_segments) {
  // Refuse before encoding: the encoder would need the whole buffer in memory.
  // One walk for the limits and the buffer's size (the encoder's buffer grew
  // from 4 KiB by doubling: 9 zero-filled buffers and copies, 6.3M of the
  // bench's 20,002-value program).
  const fb::TreeSize size = fb::MeasureTree(p);
  CheckFormatLimits(size.payload, num_segments);
  fb::EncodeOptions eo;
  eo.order = s.order;
  eo.size_hint = static_cast<size_t>(std::min<uint64_t>(size.estimate, uint64_t{1} << 31));
  eo.force_align["Buffer.storage"] = s.tensor_alignment;
  eo.force_align["BackendDelegateInlineData.data"] = s.delegate_alignment;
  return fb::Encode(S(), p, eo);
}

// The flatbuffer with the eh00 header (when there are segments) in front.
void AssembleHead(fb::Encoded enc, const PteHeadPlan& h, PteLayout& out) {
  out.segment_base_offset = h.segment_base_offset;
  out.header_size = h.header_size;
  if (!h.has_header) {
    out.head = std::move(enc.data);
    out.head.resize(h.head_size, 0);
    return;
  }
  ExtendedHeader eh;
  eh.has_segment_data_size = h.header_size - 8 == kExtendedHeaderLength;
  eh.program_size = h.program_size;
  eh.segment_base_offset = h.segment_base_offset;
  eh.segment_data_size = h.segment_data_size;
  std::vector<uint8_t> hb = EncodeExtendedHeader(eh);
  hb.resize(h.padded_header, 0);
  out.head = std::move(enc.data);
  InsertHeaderInPlace(out.head, hb, out.head.size() + hb.size());
}

}  // namespace

// The steps of ExecuTorch's serializer (_program.py serialize_pte_binary):
// placement of external data; the pieces' sizes to layout/'s segment plan,
// copied into the program; the flatbuffer; layout/'s header plan.
namespace {

// LayoutPte on a tree this call owns; without `segments`, the head alone
// (no pieces: LayoutPteHead). With external data the heap's free pages go
// back to the kernel after placement and after the encode (ReturnFreePages):
// glibc keeps freed memory below the top of its heap resident, and after
// external placement (its key and content indexes, the moved constants'
// Buffer tables, all freed among live tables) a split of 300,000 constants
// kept 53 MB more at the encoder's peak (peak RSS 487 -> 434 MB; the trim
// costs 0.1 s of system time there). Once the program is encoded its tree
// (230 MB there) is free heap the .ptd's layout and the read-back of the
// outputs grew on top of; and the .ptd's layout leaves its FlatTensor tree
// and indexes (200 MB resident at the read-back: LayoutPackage).
//
// The package's tree is this call's: owning a table (fb::Own) changes it in
// place instead of copying it, and the tree is freed once encoded. The layout
// changes the root's fields directly, so a root someone else still holds (the
// caller of the const& overloads, or a copy of a Package given to
// WritePackage(Package&&)) is copied first; tables below it are copied only
// where changed.
PteLayout LayoutOwnedPte(PackageParts&& in, const BackendConfig& cfg, bool segments) {
  cfg.Validate();  // a bad config is reported before a missing program
  if (!in.program) throw Error("bad-program", "package has no program");
  PackageParts pkg = std::move(in);
  fb::Own(pkg.program);
  const bool external = cfg.external_constants || cfg.external_constants_fn || cfg.external_mutable_weights;
  if (external) ReturnFreePages();
  ApplyPlacement(pkg, cfg);
  if (external) ReturnFreePages();
  const LayoutSettings s = LayoutSettingsOf(cfg);
  DedupMutableData(pkg);
  Program p{*pkg.program};
  PtePieces pieces = GatherPte(p, pkg, s, segments);
  PteSegmentsPlan plan = PlanPteSegments(pieces.in);
  const size_t num_segments = plan.segments.size();
  if (!s.extract_delegates && s.dedup_inline_delegate_data) DedupInlineDelegateData(*pkg.program);
  ApplySegmentsPlan(p, pkg, pieces.in, plan);
  PteLayout out;
  out.dedup_bytes_saved = plan.dedup_bytes_saved;
  if (segments) out.segments = SegmentPlan(std::move(plan.segments), std::move(pieces.data));
  fb::Encoded enc = EncodeProgram(*pkg.program, s, num_segments);
  pkg.program.reset();  // the segments view the data, not the tree
  if (external) ReturnFreePages();
  out.flatbuffer_size = enc.data.size();
  PteHeadInputs head;
  head.flatbuffer_size = enc.data.size();
  head.max_force_align = enc.max_force_align;
  head.header_length = s.legacy_extended_header ? kExtendedHeaderMinLength : kExtendedHeaderLength;
  head.min_file_size = kRuntimeHeadBytes;
  head.segment_data_size = plan.data_size;
  head.segment_alignment = s.segment_alignment;
  out.ptd_segment_alignment = s.ptd_segment_alignment;
  AssembleHead(std::move(enc), PlanPteHead(head), out);
  out.external = std::move(pkg.external);
  CheckFormatLimits(out.head.size(), num_segments);
  return out;
}

}  // namespace

// Copy-on-write: a copy of the parts shares the caller's tables, and the
// layout owns (fb::Own) only those it changes, the root first.
PteLayout LayoutPte(const PackageParts& in, const BackendConfig& cfg) {
  return LayoutOwnedPte(PackageParts(in), cfg, true);
}

PteLayout LayoutPte(PackageParts&& in, const BackendConfig& cfg) { return LayoutOwnedPte(std::move(in), cfg, true); }

PteLayout LayoutPteHead(const PackageParts& in, const BackendConfig& cfg) {
  return LayoutOwnedPte(PackageParts(in), cfg, false);
}

namespace {

// The FlatTensor head: FH01 header, flatbuffer, zeros to the segment base.
std::vector<uint8_t> PtdHead(std::vector<uint8_t> flatbuffer, const PtdHeadPlan& h) {
  FlatTensorHeader fh;
  fh.flatbuffer_offset = h.padded_header;
  fh.flatbuffer_size = h.flatbuffer_size;
  fh.segment_base_offset = h.segment_base_offset;
  fh.segment_data_size = h.segment_data_size;
  std::vector<uint8_t> hb = EncodeFlatTensorHeader(fh);
  hb.resize(h.padded_header, 0);
  if (flatbuffer.size() < 8 ||
      h.padded_header + std::max<uint64_t>(h.padded_flatbuffer, flatbuffer.size()) > h.segment_base_offset) {
    throw Error("internal-layout", "FlatTensor head plan smaller than its flatbuffer");
  }
  // The zeros after the flatbuffer pad it to padded_flatbuffer and the head
  // to the segment base.
  InsertHeaderInPlace(flatbuffer, hb, h.segment_base_offset);
  flatbuffer.resize(h.segment_base_offset, 0);
  return flatbuffer;
}

// A .ptd's DataSegment tables, made as the encoder reaches them
// (fb::GeneratedVector): `spans` must outlive the encode. A .ptd of 300,000
// entries has as many segments: 36 MB of tables when they were all made.
template <typename Segment>
fb::Value SegmentList(const std::vector<SegmentSlot>& spans) {
  return fb::GeneratedVector(spans.size(), reflection::Obj, [&spans](size_t i) {
    auto ds = Segment::New();
    Segment segment{*ds};
    segment.set_offset(spans[i].offset);
    segment.set_size(spans[i].size);
    return fb::TableValue(ds);
  });
}

// FlatTensor layout of before June 2025: all tensors share the first
// segment, each padded to tensor_alignment; the flatbuffer and header are
// padded to tensor_alignment too.
PtdLayout LayoutLegacyPtd(const ExternalFile& file, uint64_t segment_alignment) {
  const uint64_t ta = std::max<uint32_t>(1, file.legacy_tensor_alignment);
  std::vector<const NamedBlob*> tensors, named;
  SegmentPlan::Lists data;
  std::vector<Bytes>& tensor_data = data[static_cast<size_t>(SegmentKind::kPtdTensors)];
  std::vector<Bytes>& named_data = data[static_cast<size_t>(SegmentKind::kNamedData)];
  std::vector<uint64_t> named_alignments;
  for (const auto& e : file.entries) {
    (e.legacy_tensor ? tensors : named).push_back(&e);
    (e.legacy_tensor ? tensor_data : named_data).push_back(e.data);
    if (!e.legacy_tensor) named_alignments.push_back(e.alignment);
  }
  LegacyPtdSegmentsPlan plan =
      PlanLegacyPtdSegments(Specs(tensor_data, {}), ta, Specs(named_data, named_alignments), segment_alignment);
  std::vector<fb::Value> tensor_list, named_list;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto t = ptd_legacy::TensorMetadata<>::New();
    ptd_legacy::TensorMetadata meta{*t};
    meta.set_fully_qualified_name(tensors[i]->key);
    if (tensors[i]->tensor_layout) {
      const ptd::TensorLayout layout{*tensors[i]->tensor_layout};
      meta.scalar_type() = layout.scalar_type();
      meta.sizes() = layout.sizes();
      meta.dim_order() = layout.dim_order();
    }
    meta.set_segment_index(0);
    meta.set_offset(plan.tensor_offsets[i]);
    tensor_list.push_back(fb::TableValue(t));
  }
  for (size_t i = 0; i < named.size(); ++i) {
    auto nd = ptd_legacy::NamedData<>::New();
    ptd_legacy::NamedData entry{*nd};
    entry.set_key(named[i]->key);
    entry.set_segment_index(plan.named_segments[i]);
    named_list.push_back(fb::TableValue(nd));
  }
  auto root = ptd_legacy::FlatTensor<>::New();
  ptd_legacy::FlatTensor flat{*root};
  flat.set_tensor_alignment(static_cast<uint32_t>(ta));
  flat.tensors() = fb::OffsetVector(std::move(tensor_list), reflection::Obj);
  flat.segments() = SegmentList<ptd_legacy::DataSegment<>>(plan.segments);
  if (file.legacy_named_data_field || !named_list.empty()) {
    flat.named_data() = fb::OffsetVector(std::move(named_list), reflection::Obj);
  }
  fb::Encoded enc = fb::Encode(fb::FlatTensorLegacySchema(), *root, fb::EncodeOptions{});
  const PtdHeadPlan h =
      PlanPtdHead(kFlatTensorHeaderLength, ta, ta, enc.data.size(), plan.data_size, segment_alignment);
  PtdLayout out;
  out.segments = SegmentPlan(std::move(plan.segments), std::move(data));
  out.head = PtdHead(std::move(enc.data), h);
  out.segment_base_offset = h.segment_base_offset;
  return out;
}

// The FlatTensor flatbuffer of `file` (the current layout), its entries
// where `plan` puts them. The tree lives only as long as this call; its
// NamedData tables are made one at a time as the encoder reaches them
// (fb::GeneratedVector), each key a view of its entry's.
fb::Encoded EncodeFlatTensor(const ExternalFile& file, const PtdSegmentsPlan& plan) {
  auto named = [&file, &plan](size_t i) {
    const NamedBlob& e = file.entries[i];
    auto nd = ptd::NamedData<>::New();
    ptd::NamedData entry{*nd};
    entry.key().kind = fb::Value::Kind::kString;
    entry.key().set_view(reinterpret_cast<const uint8_t*>(e.key.data()), e.key.size(), nullptr);
    entry.set_segment_index(plan.entry_segments[i]);
    if (e.tensor_layout) entry.tensor_layout() = fb::TableValue(e.tensor_layout);
    return fb::TableValue(nd);
  };
  auto root = ptd::FlatTensor<>::New();
  ptd::FlatTensor flat{*root};
  flat.set_version(0);
  flat.segments() = SegmentList<ptd::DataSegment<>>(plan.segments);
  flat.named_data() = fb::GeneratedVector(file.entries.size(), reflection::Obj, named);
  return fb::Encode(fb::FlatTensorSchema(), *root, fb::EncodeOptions{});
}

}  // namespace

namespace {

// No key twice in one .ptd: the first key, in entry order, that an earlier
// entry has is reported. The entries' indices sorted by key (4 bytes an
// entry; a hash set of the keys held 17 MB for 300,000).
void CheckUniqueKeys(const ExternalFile& file) {
  const auto& entries = file.entries;
  if (entries.size() > UINT32_MAX) throw Error("limit-exceeded", "too many entries in " + file.tag + ".ptd");
  std::vector<uint32_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&entries](uint32_t a, uint32_t b) { return entries[a].key < entries[b].key; });
  std::optional<uint32_t> first;  // the earliest second use of a key
  for (size_t i = 1; i < order.size(); ++i) {
    if (entries[order[i]].key == entries[order[i - 1]].key && (!first || order[i] < *first)) first = order[i];
  }
  if (first) throw Error("duplicate-key", "key \"" + entries[*first].key + "\" twice in " + file.tag + ".ptd");
}

}  // namespace

PtdLayout LayoutPtd(const ExternalFile& file, uint64_t segment_alignment) {
  ExternalFile copy = file;
  return LayoutPtd(std::move(copy), segment_alignment);
}

// The entries are taken only once the FlatTensor is encoded: the segments'
// pieces are then their data members, read where they are.
PtdLayout LayoutPtd(ExternalFile&& file, uint64_t segment_alignment) {
  if (file.legacy) return LayoutLegacyPtd(file, segment_alignment);
  CheckUniqueKeys(file);
  const auto& entries = file.entries;
  PtdSegmentsPlan plan =
      PlanPtdSegments(Specs(
                          entries.size(), [&entries](size_t i) -> const Bytes& { return entries[i].data; },
                          [&entries](size_t i) { return entries[i].alignment; }),
                      segment_alignment);
  fb::Encoded enc = EncodeFlatTensor(file, plan);
  const PtdHeadPlan h = PlanPtdHead(kFlatTensorHeaderLength, kFlatTensorFlatbufferAlignment, 1, enc.data.size(),
                                    plan.data_size, segment_alignment);
  CheckFormatLimits(h.padded_header + enc.data.size(), plan.segments.size());
  PtdLayout out;
  SegmentPlan::PieceLists lists;
  lists[static_cast<size_t>(SegmentKind::kNamedData)] = PieceList(std::move(file.entries), &NamedBlob::data);
  file.entries = {};
  out.segments = SegmentPlan(std::move(plan.segments), std::move(lists));
  out.head = PtdHead(std::move(enc.data), h);
  out.segment_base_offset = h.segment_base_offset;
  return out;
}

namespace {

void StreamPte(const PteLayout& l, AtomicFile& f, const ProgressFn& progress) {
  f.Write(l.head.data(), l.head.size());
  if (l.segments.data_size() > 0) {
    f.PadTo(l.segment_base_offset);
    WriteSegments(f, l.segments, progress);
  }
}

void StreamPtd(const PtdLayout& l, AtomicFile& f, const ProgressFn& progress) {
  f.Write(l.head.data(), l.head.size());
  WriteSegments(f, l.segments, progress);
}

}  // namespace

uint64_t WritePteLayout(const PteLayout& l, const std::string& path, const WriteOptions& o) {
  return WriteOneFile(
      path, [&](AtomicFile& f) { StreamPte(l, f, o.progress); }, o.inputs, o.allow_overwrite_input);
}

uint64_t WritePtdLayout(const PtdLayout& l, const std::string& path, const WriteOptions& o) {
  return WriteOneFile(
      path, [&](AtomicFile& f) { StreamPtd(l, f, o.progress); }, o.inputs, o.allow_overwrite_input);
}

namespace {
void AppendSegments(std::vector<uint8_t>& out, uint64_t base, const SegmentPlan& plan) {
  for (const auto& s : plan.segments()) {
    out.resize(base + s.offset, 0);
    plan.ForEachPiece(s, [&out](uint64_t pad, const Bytes& data) {
      out.resize(out.size() + pad, 0);
      out.insert(out.end(), data.data, data.data + data.size);
      return true;
    });
  }
}
}  // namespace

namespace {

// Compares a layout with a file front to back, stopping at the first
// difference.
class LayoutComparer {
 public:
  explicit LayoutComparer(const Bytes& file) : file_(file) {}

  // `n` bytes at `p` are next in the layout.
  bool Data(const uint8_t* p, uint64_t n) {
    if (diff_) return false;
    const uint64_t m = std::min(n, file_.size - at_);
    if (p != file_.data + at_ && !Compare(p, m)) return false;  // the same memory: the same bytes
    return Advance(m, n);
  }
  bool Data(const Bytes& b) {
    if (IsZeros(b)) return Zeros(b.size);
    if (diff_) return false;
    // A view of the same file (another mapping of it) at this very offset.
    if (MappingOf(b) && MappingOf(file_) && MappingOf(b)->dev() == MappingOf(file_)->dev() &&
        MappingOf(b)->ino() == MappingOf(file_)->ino() && MappingOf(b)->data() && MappingOf(file_)->data() &&
        static_cast<uint64_t>(b.data - MappingOf(b)->data()) ==
            static_cast<uint64_t>(file_.data - MappingOf(file_)->data()) + at_ &&
        b.size <= file_.size - at_) {
      return Advance(b.size, b.size);
    }
    return Data(b.data, b.size);
  }
  bool Zeros(uint64_t n) {
    if (diff_) return false;
    const uint64_t m = std::min(n, file_.size - at_);
    for (uint64_t i = 0; i < m; ++i) {
      if (file_.data[at_ + i] != 0) return Stop(at_ + i);
    }
    return Advance(m, n);
  }
  bool ZerosTo(uint64_t offset) { return offset <= at_ || Zeros(offset - at_); }
  // The end of the layout: `total` bytes.
  std::optional<uint64_t> Finish(uint64_t total) {
    if (diff_) return diff_;
    if (total != file_.size) return std::min<uint64_t>(total, file_.size);
    return std::nullopt;
  }

 private:
  bool Compare(const uint8_t* p, uint64_t n) {
    constexpr uint64_t kChunk = 1 << 16;
    for (uint64_t off = 0; off < n; off += kChunk) {
      const uint64_t len = std::min(kChunk, n - off);
      if (std::memcmp(p + off, file_.data + at_ + off, len) == 0) continue;
      uint64_t i = off;
      while (p[i] == file_.data[at_ + i]) ++i;
      return Stop(at_ + i);
    }
    return true;
  }
  // `m` of the `n` bytes matched; fewer means the file ended.
  bool Advance(uint64_t m, uint64_t n) {
    at_ += m;
    return m == n || Stop(file_.size);
  }
  bool Stop(uint64_t offset) {
    diff_ = offset;
    return false;
  }
  const Bytes& file_;
  uint64_t at_ = 0;
  std::optional<uint64_t> diff_;
};

void CompareSegments(LayoutComparer& c, uint64_t base, const SegmentPlan& plan) {
  for (const auto& s : plan.segments()) {
    if (!c.ZerosTo(base + s.offset)) return;
    if (!plan.ForEachPiece(s, [&c](uint64_t pad, const Bytes& data) { return c.Zeros(pad) && c.Data(data); })) return;
  }
}

}  // namespace

std::optional<uint64_t> FirstDifference(const PteLayout& l, const Bytes& file) {
  LayoutComparer c(file);
  if (c.Data(l.head.data(), l.head.size()) && l.segments.data_size() > 0 && c.ZerosTo(l.segment_base_offset)) {
    CompareSegments(c, l.segment_base_offset, l.segments);
  }
  return c.Finish(l.total_size());
}

std::optional<uint64_t> FirstDifference(const PtdLayout& l, const Bytes& file) {
  LayoutComparer c(file);
  if (c.Data(l.head.data(), l.head.size())) CompareSegments(c, l.segment_base_offset, l.segments);
  return c.Finish(l.total_size());
}

std::vector<uint8_t> RenderPte(const PteLayout& l) {
  std::vector<uint8_t> out = l.head;
  if (l.segments.data_size() > 0) AppendSegments(out, l.segment_base_offset, l.segments);
  return out;
}

std::vector<uint8_t> RenderPte(PteLayout&& l) {
  std::vector<uint8_t> out = std::move(l.head);
  if (l.segments.data_size() > 0) AppendSegments(out, l.segment_base_offset, l.segments);
  return out;
}

std::vector<uint8_t> RenderPtd(const PtdLayout& l) {
  std::vector<uint8_t> out = l.head;
  AppendSegments(out, l.segment_base_offset, l.segments);
  return out;
}

namespace {

// The program is encoded: of the input files, the .ptd files need only their
// data, hashed and streamed later from the file. The pages read to decode the
// program go back (they are clean pages of a read-only mapping: a later read
// maps them again from the page cache). A split of 300,000 constants had its
// whole 22 MB input resident beside the .ptd's layout.
void DropInputPages(const std::vector<ExternalFile>& files) {
  std::set<const MappedFile*> inputs;
  for (const auto& ef : files) {
    for (const auto& e : ef.entries) {
      if (const MappedFile* m = MappingOf(e.data)) inputs.insert(m);
    }
  }
  for (const MappedFile* m : inputs) m->DropPages(m->data(), m->size());
}

// Each .ptd's entries go to its layout (LayoutPtd(&&)), whose segments read
// their data and hold them (keys and tensor layouts too) until it is let go.
// Every .ptd is laid out before anything is written, so layout errors leave
// no files.
PackageLayout LayoutFiles(PteLayout&& pte) {
  PackageLayout l{std::move(pte), {}};
  DropInputPages(l.pte.external);
  for (auto& ef : l.pte.external) {
    l.ptds.push_back(LayoutPtd(std::move(ef), l.pte.ptd_segment_alignment));  // takes the entries; the tag stays
  }
  if (!l.ptds.empty()) ReturnFreePages();
  return l;
}

}  // namespace

PackageLayout LayoutPackage(PackageParts&& pkg, const BackendConfig& cfg) {
  return LayoutFiles(LayoutPte(std::move(pkg), cfg));
}

namespace {
WriteResult WriteLayout(const PackageLayout& l, const std::string& pte_path, const WriteOptions& o,
                        std::function<void()> release) {
  WritingScope writing;  // SIGINT/SIGTERM unwind through here (temp files removed)
  PendingOutputs out;
  out.release = std::move(release);
  out.pte_path = pte_path;
  out.pte_size = l.pte.total_size();
  out.stream_pte = [&](AtomicFile& f) { StreamPte(l.pte, f, o.progress); };
  for (size_t i = 0; i < l.ptds.size(); ++i) {
    const PtdLayout& pl = l.ptds[i];
    out.ptds.push_back({l.pte.external[i].tag, pl.total_size(),
                        [&o, &pl](AtomicFile& f) { StreamPtd(pl, f, o.progress); },
                        [&pl](const Bytes& existing) { return !FirstDifference(pl, existing); }});
  }
  WriteResult r;
  r.flatbuffer_size = l.pte.head.size() - l.pte.header_size;  // README, "Sizes": program size - header
  r.num_segments = l.pte.segments.segments().size();
  r.dedup_bytes_saved = l.pte.dedup_bytes_saved;
  WriteOutputs(out, o, r);
  return r;
}
}  // namespace

WriteResult WritePackageLayout(const PackageLayout& l, const std::string& pte_path, const WriteOptions& o) {
  return WriteLayout(l, pte_path, o, nullptr);
}

WriteResult WritePackageLayout(PackageLayout&& l, const std::string& pte_path, const WriteOptions& o) {
  // With .ptd files the freed layout is large (a split of 300,000 constants:
  // 85 MB given back before the read-back); a .pte alone gives back little
  // and the trim costs the read-back faults (meta `pack`: 196 -> 1,190).
  return WriteLayout(l, pte_path, o, [&l] {
    const bool with_ptds = !l.ptds.empty();
    l = PackageLayout{};
    if (with_ptds) ReturnFreePages();
  });
}

WriteResult WritePackageFiles(const PackageParts& pkg, const BackendConfig& cfg, const std::string& pte_path,
                              const WriteOptions& o) {
  WritingScope writing;  // SIGINT/SIGTERM unwind through here (temp files removed)
  return WritePackageLayout(LayoutFiles(LayoutPte(pkg, cfg)), pte_path, o);
}

WriteResult WritePackageFiles(PackageParts&& pkg, const BackendConfig& cfg, const std::string& pte_path,
                              const WriteOptions& o) {
  WritingScope writing;
  return WritePackageLayout(LayoutPackage(std::move(pkg), cfg), pte_path, o);  // the && overload
}

}  // namespace ptepack
