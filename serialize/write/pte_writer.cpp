#include "serialize/write/pte_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "flat_tensor_legacy_views_generated.h"
#include "flat_tensor_views_generated.h"
#include "layout/alignment.h"
#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/file_io.h"
#include "serialize/model/dedup.h"
#include "serialize/model/placement.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/segment_writer.h"

namespace ptepack {

using namespace prog;
using executorch_flatbuffer::DataLocation;
using executorch_flatbuffer::TensorDataLocation;

namespace {

// Index of the segment holding `data`: an earlier one with the same bytes, or
// a new one appended to `plan`.
size_t AddDedupedBlob(SegmentPlan& plan, DedupIndex& dedup, const Bytes& data, uint64_t alignment = 1) {
  size_t next = plan.segments().size();
  if (auto existing = dedup.FindOrAdd(data, next)) return *existing;
  PlannedSegment seg;
  seg.pieces.push_back(Piece{0, data});
  seg.size = data.size;
  seg.alignment = alignment;
  plan.Add(std::move(seg));
  return next;
}

// A lower bound of the encoded size of a tree: the bytes of its strings and
// scalar vectors with their length fields. Cheap, and reads no data.
uint64_t PayloadBytes(const fb::Table& t) {
  uint64_t n = 0;
  for (const fb::Value& v : t.fields) {
    switch (v.kind) {
      case fb::Value::Kind::kString:
        n += 4 + v.str().size() + 1;
        break;
      case fb::Value::Kind::kScalarVector:
        n += 4 + v.scalars().size;
        break;
      case fb::Value::Kind::kTable:
        if (v.table()) n += PayloadBytes(*v.table());
        break;
      case fb::Value::Kind::kOffsetVector:
        n += 4 + 4 * v.elems().size();
        for (const fb::Value& e : v.elems()) {
          if (e.table()) n += PayloadBytes(*e.table());
          if (e.kind == fb::Value::Kind::kString) n += 4 + e.str().size() + 1;
        }
        break;
      default:
        break;
    }
  }
  return n;
}

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

void DedupMutableData(Package& pkg) {
  if (!pkg.mutable_data || pkg.mutable_data->size() < 3) return;
  std::vector<Bytes>& md = *pkg.mutable_data;
  const size_t n = md.size();
  std::vector<size_t> rep(n);
  for (size_t i = 0; i < n; ++i) rep[i] = i;
  std::vector<bool> visited(n, false);
  DedupIndex seen;
  bool any = false;
  ForEachTensorCow(*pkg.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const OwnTensorFn&) {
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
  ForEachTensorCow(*pkg.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const OwnTensorFn& own) {
    uint64_t idx = MutableDataIndex(t, n);
    if (idx != 0 && remap[rep[idx]] != idx) Tensor{own()}.set_data_buffer_idx(static_cast<uint32_t>(remap[rep[idx]]));
  });
  md = std::move(kept);
}

}  // namespace

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

fb::Value SubsegmentsValue(size_t segment_index, const std::vector<uint64_t>& offsets) {
  auto so = SubsegmentOffsets<>::New();
  SubsegmentOffsets sub{*so};
  sub.set_segment_index(static_cast<uint32_t>(segment_index));
  sub.set_offsets(offsets);
  return fb::TableValue(so);
}

// Constant segment: every constant_buffer entry padded to the tensor alignment.
void PlaceConstants(Program<>& p, const BackendConfig& cfg, SegmentPlan& plan) {
  auto& cb = p.constant_buffer();
  if (cfg.inline_constants || cb.elems().empty()) return;
  std::vector<Bytes> items;
  for (auto& b : cb.elems()) items.push_back(b.table() ? Buffer{*b.table()}.get_storage() : Bytes{});
  std::vector<uint64_t> offsets;
  PlannedSegment seg = ConcatSegment(items, cfg.tensor_alignment(), &offsets);
  p.constant_segment() = SubsegmentsValue(plan.segments().size(), offsets);
  cb = fb::OffsetVector({}, reflection::Obj);
  plan.Add(std::move(seg));
}

// Mutable data segment (no padding: it is copied at load time).
void PlaceMutableData(Program<>& p, const Package& pkg, SegmentPlan& plan) {
  if (!pkg.mutable_data) return;
  std::vector<uint64_t> offsets;
  PlannedSegment seg = ConcatSegment(*pkg.mutable_data, 1, &offsets);
  if (seg.size == 0) return;
  p.mutable_data_segments() = fb::OffsetVector({SubsegmentsValue(plan.segments().size(), offsets)}, reflection::Obj);
  plan.Add(std::move(seg));
}

// Delegate payloads to segments (equal payloads share one); empty payloads stay inline.
uint64_t ExtractDelegates(Program<>& p, SegmentPlan& plan) {
  auto& bdd = p.backend_delegate_data();
  std::vector<fb::Value> remaining;
  std::vector<bool> seen(bdd.elems().size(), false);
  DedupIndex dedup;
  for (auto& pl : p.execution_plan().mutable_elems()) {
    if (ExecutionPlan{std::as_const(*pl.table())}.delegates().elems().empty()) continue;
    for (auto& del : ExecutionPlan{fb::Own(pl.mutable_table())}.delegates().mutable_elems()) {
      BackendDelegate delegate{fb::Own(del.mutable_table())};
      auto& processed = delegate.processed();
      if (!processed.table() ||
          BackendDelegateDataReference{*processed.table()}.get_location() != DataLocation::INLINE) {
        throw Error("bad-program", "delegate data must be inline before layout (" + delegate.get_id() + ")");
      }
      uint64_t idx = BackendDelegateDataReference{*processed.table()}.get_index();
      if (idx >= bdd.elems().size()) {
        throw Error("index-out-of-range", "delegate processed index " + std::to_string(idx) +
                                              " >= backend_delegate_data size " + std::to_string(bdd.elems().size()));
      }
      seen[idx] = true;
      const Bytes& data = BackendDelegateInlineData{*bdd.elems()[idx].table()}.get_data();
      if (data.size > 0) {
        auto r = BackendDelegateDataReference<>::New();
        BackendDelegateDataReference ref{*r};
        ref.set_location(DataLocation::SEGMENT);
        ref.set_index(static_cast<uint32_t>(AddDedupedBlob(plan, dedup, data)));
        processed = fb::TableValue(r);
      } else {
        remaining.push_back(bdd.elems()[idx]);
        BackendDelegateDataReference{fb::Own(processed.mutable_table())}.set_index(
            static_cast<uint32_t>(remaining.size() - 1));
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i])
      throw Error("bad-program", "backend_delegate_data[" + std::to_string(i) + "] is not used by any delegate");
  }
  if (bdd.present() || !remaining.empty()) bdd = fb::OffsetVector(std::move(remaining), reflection::Obj);
  return dedup.bytes_saved();
}

// Named data stored in the .pte, one segment per distinct blob.
uint64_t PlaceNamedData(Program<>& p, const Package& pkg, SegmentPlan& plan) {
  if (pkg.named_data.empty()) return 0;
  auto& nd = p.named_data();
  if (!nd.elems().empty()) throw Error("bad-program", "program already has named data");
  std::vector<fb::Value> entries;
  DedupIndex dedup;
  for (const auto& blob : pkg.named_data) {
    size_t si = AddDedupedBlob(plan, dedup, blob.data, blob.alignment);
    auto e = NamedData<>::New();
    NamedData entry{*e};
    entry.set_key(blob.key);
    entry.set_segment_index(static_cast<uint32_t>(si));
    entries.push_back(fb::TableValue(e));
  }
  nd = fb::OffsetVector(std::move(entries), reflection::Obj);
  return dedup.bytes_saved();
}

// Places the segments and lists them in Program.segments.
void ListSegments(Program<>& p, const BackendConfig& cfg, SegmentPlan& plan) {
  plan.Place(cfg.segment_alignment);
  auto& segs = p.segments();
  if (!segs.present()) segs = fb::OffsetVector({}, reflection::Obj);
  for (const auto& s : plan.segments()) {
    auto ds = DataSegment<>::New();
    DataSegment segment{*ds};
    segment.set_offset(s.offset);
    segment.set_size(s.size);
    segs.mutable_elems().push_back(fb::TableValue(ds));
  }
}

fb::Encoded EncodeProgram(const fb::Table& p, const BackendConfig& cfg, size_t num_segments) {
  // Refuse before encoding: the encoder would need the whole buffer in memory.
  CheckFormatLimits(PayloadBytes(p), num_segments);
  fb::EncodeOptions eo;
  eo.order = cfg.flatbuffer_order;
  eo.force_align["Buffer.storage"] = cfg.tensor_alignment();
  eo.force_align["BackendDelegateInlineData.data"] = cfg.delegate_data_alignment();
  return fb::Encode(S(), p, eo);
}

// The flatbuffer with the eh00 header (when there are segments) in front.
void AssembleHead(fb::Encoded enc, const BackendConfig& cfg, PteLayout& out) {
  const SegmentPlan& plan = out.segments;
  if (plan.data_size() == 0) {
    out.head = std::move(enc.data);
    out.segment_base_offset = 0;
    // A tiny program (no methods, nothing else) encodes to fewer bytes than
    // the runtime reads first; zeros after the flatbuffer make it loadable.
    if (out.head.size() < kRuntimeHeadBytes) out.head.resize(kRuntimeHeadBytes, 0);
    return;
  }
  ExtendedHeader h;
  h.has_segment_data_size = !cfg.legacy_extended_header;
  uint64_t padded =
      AlignUp(h.has_segment_data_size ? kExtendedHeaderLength : kExtendedHeaderMinLength, enc.max_force_align);
  h.program_size = padded + enc.data.size();
  h.segment_base_offset = AlignUp(h.program_size, cfg.segment_alignment);
  h.segment_data_size = plan.data_size();
  std::vector<uint8_t> hb = EncodeExtendedHeader(h);
  out.header_size = 8 + hb.size();
  hb.resize(padded, 0);
  out.head = InsertHeader(enc.data, hb);
  out.segment_base_offset = h.segment_base_offset;
}

}  // namespace

// The steps of ExecuTorch's serializer (_program.py serialize_pte_binary):
// placement of external data, then constant, mutable, delegate and named
// segments, then the flatbuffer and its header.
PteLayout LayoutPte(const Package& in, const BackendConfig& cfg) {
  cfg.Validate();
  if (!in.program) throw Error("bad-program", "package has no program");
  Package pkg = in;
  // Copy-on-write: the steps below own (fb::Own) only the tables they change.
  pkg.program = fb::ShallowClone(*in.program);
  ApplyPlacement(pkg, cfg);
  DedupMutableData(pkg);
  Program p{*pkg.program};
  PteLayout out;
  PlaceConstants(p, cfg, out.segments);
  PlaceMutableData(p, pkg, out.segments);
  if (cfg.extract_delegate_segments) {
    out.dedup_bytes_saved += ExtractDelegates(p, out.segments);
  } else if (cfg.dedup_inline_delegate_data) {
    DedupInlineDelegateData(*pkg.program);
  }
  out.dedup_bytes_saved += PlaceNamedData(p, pkg, out.segments);
  ListSegments(p, cfg, out.segments);
  fb::Encoded enc = EncodeProgram(*pkg.program, cfg, out.segments.segments().size());
  out.flatbuffer_size = enc.data.size();
  out.external = std::move(pkg.external);
  AssembleHead(std::move(enc), cfg, out);
  CheckFormatLimits(out.head.size(), out.segments.segments().size());
  return out;
}

namespace {

// FlatTensor layout of before June 2025: all tensors share the first
// segment, each padded to tensor_alignment; the flatbuffer and header are
// padded to tensor_alignment too.
// The legacy tensors list: every tensor in segment 0, each padded to the
// tensor alignment `ta` (equal tensors stored once).
std::vector<fb::Value> LegacyTensors(const ExternalFile& file, uint64_t ta, PlannedSegment& tensor_seg) {
  DedupIndex dedup;
  std::vector<uint64_t> offsets;  // by dedup id
  std::vector<fb::Value> tensors;
  for (const auto& e : file.entries) {
    if (!e.legacy_tensor) continue;
    auto existing = dedup.FindOrAdd(e.data, offsets.size());
    uint64_t off;
    if (existing) {
      off = offsets[*existing];
    } else {
      uint64_t pad = tensor_seg.size > 0 ? PaddingRequired(tensor_seg.size, ta) : 0;
      off = tensor_seg.size + pad;
      tensor_seg.pieces.push_back(Piece{pad, e.data});
      tensor_seg.size = off + e.data.size;
      offsets.push_back(off);
    }
    auto t = ptd_legacy::TensorMetadata<>::New();
    ptd_legacy::TensorMetadata meta{*t};
    meta.set_fully_qualified_name(e.key);
    if (e.tensor_layout) {
      const ptd::TensorLayout layout{*e.tensor_layout};
      meta.scalar_type() = layout.scalar_type();
      meta.sizes() = layout.sizes();
      meta.dim_order() = layout.dim_order();
    }
    meta.set_segment_index(0);
    meta.set_offset(off);
    tensors.push_back(fb::TableValue(t));
  }
  return tensors;
}

PtdLayout LayoutLegacyPtd(const ExternalFile& file, uint64_t segment_alignment) {
  const fb::Schema& LS = fb::FlatTensorLegacySchema();
  const uint64_t ta = std::max<uint32_t>(1, file.legacy_tensor_alignment);
  PtdLayout out;
  PlannedSegment tensor_seg;
  std::vector<fb::Value> tensors = LegacyTensors(file, ta, tensor_seg);
  std::vector<fb::Value> named;
  DedupIndex named_dedup;
  out.segments.Add(std::move(tensor_seg));
  for (const auto& e : file.entries) {
    if (e.legacy_tensor) continue;
    size_t si = AddDedupedBlob(out.segments, named_dedup, e.data, e.alignment);
    auto nd = ptd_legacy::NamedData<>::New();
    ptd_legacy::NamedData entry{*nd};
    entry.set_key(e.key);
    entry.set_segment_index(static_cast<uint32_t>(si));
    named.push_back(fb::TableValue(nd));
  }
  out.segments.Place(segment_alignment);
  std::vector<fb::Value> segs;
  for (const auto& s : out.segments.segments()) {
    auto ds = ptd_legacy::DataSegment<>::New();
    ptd_legacy::DataSegment segment{*ds};
    segment.set_offset(s.offset);
    segment.set_size(s.size);
    segs.push_back(fb::TableValue(ds));
  }
  auto root = ptd_legacy::FlatTensor<>::New();
  ptd_legacy::FlatTensor flat{*root};
  flat.set_tensor_alignment(static_cast<uint32_t>(ta));
  flat.tensors() = fb::OffsetVector(std::move(tensors), reflection::Obj);
  flat.segments() = fb::OffsetVector(std::move(segs), reflection::Obj);
  if (file.legacy_named_data_field || !named.empty()) {
    flat.named_data() = fb::OffsetVector(std::move(named), reflection::Obj);
  }
  fb::Encoded enc = fb::Encode(LS, *root, fb::EncodeOptions{});
  FlatTensorHeader h;
  uint64_t padded_fb = AlignUp(enc.data.size(), ta);
  uint64_t padded = AlignUp(kFlatTensorHeaderLength, ta);
  h.flatbuffer_offset = padded;
  h.flatbuffer_size = enc.data.size();
  h.segment_base_offset = AlignUp(padded_fb + padded, segment_alignment);
  h.segment_data_size = out.segments.data_size();
  std::vector<uint8_t> hb = EncodeFlatTensorHeader(h);
  hb.resize(padded, 0);
  enc.data.resize(padded_fb, 0);
  out.head = InsertHeader(enc.data, hb);
  out.head.resize(h.segment_base_offset, 0);
  out.segment_base_offset = h.segment_base_offset;
  return out;
}

}  // namespace

PtdLayout LayoutPtd(const ExternalFile& file, uint64_t segment_alignment) {
  if (file.legacy) return LayoutLegacyPtd(file, segment_alignment);
  const auto& FS = fb::FlatTensorSchema();
  PtdLayout out;
  DedupIndex dedup;
  auto root = ptd::FlatTensor<>::New();
  std::vector<fb::Value> named;
  std::set<std::string> keys;
  for (const auto& e : file.entries) {
    if (!keys.insert(e.key).second) throw Error("duplicate-key", "key \"" + e.key + "\" twice in " + file.tag + ".ptd");
    size_t si = AddDedupedBlob(out.segments, dedup, e.data, e.alignment);
    auto nd = ptd::NamedData<>::New();
    ptd::NamedData entry{*nd};
    entry.set_key(e.key);
    entry.set_segment_index(static_cast<uint32_t>(si));
    if (e.tensor_layout) entry.tensor_layout() = fb::TableValue(e.tensor_layout);
    named.push_back(fb::TableValue(nd));
  }
  out.segments.Place(segment_alignment);
  std::vector<fb::Value> segs;
  for (const auto& s : out.segments.segments()) {
    auto ds = ptd::DataSegment<>::New();
    ptd::DataSegment segment{*ds};
    segment.set_offset(s.offset);
    segment.set_size(s.size);
    segs.push_back(fb::TableValue(ds));
  }
  ptd::FlatTensor flat{*root};
  flat.set_version(0);
  flat.segments() = fb::OffsetVector(std::move(segs), reflection::Obj);
  flat.named_data() = fb::OffsetVector(std::move(named), reflection::Obj);
  fb::Encoded enc = fb::Encode(FS, *root, fb::EncodeOptions{});
  FlatTensorHeader h;
  uint64_t padded = AlignUp(kFlatTensorHeaderLength, kFlatTensorFlatbufferAlignment);
  CheckFormatLimits(padded + enc.data.size(), out.segments.segments().size());
  h.flatbuffer_offset = padded;
  h.flatbuffer_size = enc.data.size();
  h.segment_base_offset = AlignUp(enc.data.size() + padded, segment_alignment);
  h.segment_data_size = out.segments.data_size();
  std::vector<uint8_t> hb = EncodeFlatTensorHeader(h);
  hb.resize(padded, 0);
  out.head = InsertHeader(enc.data, hb);
  out.head.resize(h.segment_base_offset, 0);
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
  AtomicFile f(path, AtomicFile::Options{o.inputs, o.allow_overwrite_input});
  StreamPte(l, f, o.progress);
  uint64_t n = f.offset();
  f.Commit();
  return n;
}

uint64_t WritePtdLayout(const PtdLayout& l, const std::string& path, const WriteOptions& o) {
  AtomicFile f(path, AtomicFile::Options{o.inputs, o.allow_overwrite_input});
  StreamPtd(l, f, o.progress);
  uint64_t n = f.offset();
  f.Commit();
  return n;
}

namespace {
void AppendSegments(std::vector<uint8_t>& out, uint64_t base, const SegmentPlan& plan) {
  for (const auto& s : plan.segments()) {
    out.resize(base + s.offset, 0);
    for (const auto& p : s.pieces) {
      out.resize(out.size() + p.pad_before, 0);
      out.insert(out.end(), p.data.data, p.data.data + p.data.size);
    }
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
    for (const auto& p : s.pieces) {
      if (!c.Zeros(p.pad_before) || !c.Data(p.data)) return;
    }
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

std::vector<uint8_t> RenderPtd(const PtdLayout& l) {
  std::vector<uint8_t> out = l.head;
  AppendSegments(out, l.segment_base_offset, l.segments);
  return out;
}

namespace {

std::string PathKey(const std::string& p) {
  std::error_code ec;
  auto w = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
  return ec ? std::filesystem::absolute(p).lexically_normal().string() : w.string();
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

[[noreturn]] void Refuse(const std::string& code, const std::string& path, const std::string& message) {
  Finding f;
  f.code = code;
  f.file = path;
  f.message = message;
  throw Error(std::move(f));
}

// Reads the staged files back with the reader's checks; throws the findings.
void CheckStaged(const std::vector<std::pair<std::string, std::string>>& staged_ptds, const std::string& staged_pte,
                 const std::string& pte_path) {
  std::vector<Finding> errors;
  auto collect = [&](const Report& rep, const std::string& target) {
    for (Finding f : rep.findings()) {
      if (f.severity != Finding::Severity::kError) continue;
      f.file = target;
      errors.push_back(std::move(f));
    }
  };
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptrs;
  for (const auto& [name, target] : staged_ptds) {
    ptds.push_back(PtdFile::Open(name));
    ptrs.push_back(ptds.back().get());
    collect(ptds.back()->report(), target);
  }
  auto pte = PteFile::Open(staged_pte);
  pte->CheckExternalKeys(ptrs);
  collect(pte->report(), pte_path);
  if (errors.empty()) return;
  Finding f = errors.front();
  f.code = "output-invalid";
  f.message = "refusing to write an invalid program (" + std::to_string(errors.size()) +
              " problem(s); nothing was written): " + errors.front().message + " [" + errors.front().code + "]";
  throw Error(std::move(f));
}

}  // namespace

namespace {

using PtdPlan = std::vector<std::pair<std::string, PtdLayout>>;  // path, layout

bool IsInput(const std::string& path, const WriteOptions& o) {
  for (const auto& in : o.inputs) {
    if (SameFile(in, path)) return true;
  }
  return false;
}

// A .ptd that would replace an input of its name is named after the output:
// "dir/out.ptd", or "dir/out-TAG.ptd" when there are several.
std::string PtdNamedAfter(const std::string& pte_path, const std::string& tag, size_t count) {
  std::filesystem::path p(pte_path);
  std::string stem = p.stem().string();
  if (p.extension() != ".pte") stem = p.filename().string();
  const std::filesystem::path dir = p.parent_path();
  const std::string name = count > 1 ? stem + "-" + tag + ".ptd" : stem + ".ptd";
  return dir.empty() ? name : (dir / name).string();
}

// Refuses collisions and foreign files before anything is written: two
// outputs with one name, an output path that may not be written, an existing
// .ptd that was not an input (unless forced). The .pte is the last target.
void RefuseBadTargets(const std::vector<std::string>& targets, const std::vector<const ExternalFile*>& external,
                      const WriteOptions& o) {
  std::map<std::string, std::string> seen;  // canonical path -> what it is
  for (size_t i = 0; i < targets.size(); ++i) {
    const bool is_pte = i + 1 == targets.size();
    const std::string what = is_pte ? "the program" : "the data file of tag \"" + external[i]->tag + "\"";
    auto [it, fresh] = seen.emplace(PathKey(targets[i]), what);
    if (!fresh) {
      Refuse("output-collision", targets[i],
             "output name collision: this path would be both " + it->second + " and " + what +
                 "; choose another output name or tag");
    }
    CheckOutputPath(targets[i]);
    if (!is_pte && ::access(targets[i].c_str(), F_OK) == 0 && !o.force) {
      bool is_input = false;
      for (const auto& in : o.inputs) is_input = is_input || SameFile(in, targets[i]);
      if (!is_input) {
        Refuse("output-exists", targets[i],
               "a .ptd of this name already exists and was not an input (it may belong to another program); "
               "pass --force to replace it, or write to another directory");
      }
    }
  }
}

// Checks that every target could be opened for writing (a dry run only
// refuses overwriting an input).
void ProbeTargets(const std::vector<std::string>& targets, const WriteOptions& o) {
  AtomicFile::Options ao{o.inputs, o.allow_overwrite_input, {}};
  for (const auto& t : targets) {
    if (!o.dry_run) {
      AtomicFile probe(t, ao);
      continue;
    }
    for (const auto& in : o.inputs) {
      if (!o.allow_overwrite_input && SameFile(in, t)) {
        Refuse(
            "overwrite-input", t,
            "output is the same file as input " + in + "; refusing to overwrite it in place (use --in-place to allow)");
      }
    }
  }
}

// Every file is written and committed (flushed, synced) under a staging
// name first; only when all of them are complete and read back valid are
// they renamed into place. AtomicFile writes its buffer out in Commit, so
// committing the real targets one after the other could replace the .ptd
// files and then fail on the .pte (full disk), pairing new data with an
// old program. The staging names never are inputs.
void StageCheckAndRename(const PteLayout& l, const PtdPlan& ptds, const std::vector<std::string>& kept,
                         const std::string& pte_path, const WriteOptions& o, WriteResult& r) {
  StagedFiles staged;
  auto stage = [&](const std::string& target, const std::function<void(AtomicFile&)>& write) {
    std::string name = StagedFiles::NameFor(target);
    AtomicFile::Options so;
    so.replaces = target;  // keep the replaced file's mode and owner
    AtomicFile f(name, so);
    write(f);
    uint64_t n = f.offset();
    f.Commit();
    staged.Add(name, target);
    return n;
  };
  for (const auto& pd : ptds) {
    const PtdLayout& pl = pd.second;  // (C++17 lambdas cannot capture structured bindings)
    r.ptds.push_back({pd.first, stage(pd.first, [&](AtomicFile& f) { StreamPtd(pl, f, o.progress); })});
  }
  r.pte = {pte_path, stage(pte_path, [&](AtomicFile& f) { StreamPte(l, f, o.progress); })};
  {
    const auto& files = staged.files();
    std::vector<std::pair<std::string, std::string>> staged_ptds(files.begin(), files.end() - 1);
    for (const auto& k : kept) staged_ptds.emplace_back(k, k);
    CheckStaged(staged_ptds, files.back().first, pte_path);
  }
  // All or nothing: a failed rename restores the files renamed before it,
  // so new data is never paired with an old program.
  staged.RenameAll();
}

}  // namespace

WriteResult WritePackageFiles(const Package& pkg, const BackendConfig& cfg, const std::string& pte_path,
                              const WriteOptions& o) {
  WritingScope writing;  // SIGINT/SIGTERM unwind through here (temp files removed)
  PteLayout l = LayoutPte(pkg, cfg);
  std::string dir;
  auto slash = pte_path.find_last_of('/');
  if (slash != std::string::npos) dir = pte_path.substr(0, slash + 1);
  // Lay out every .ptd before writing anything, so layout errors leave no files.
  PtdPlan ptds;
  for (const auto& ef : l.external) ptds.emplace_back(dir + ef.tag + ".ptd", LayoutPtd(ef, cfg.ptd_segment_alignment));
  WriteResult r;
  r.flatbuffer_size = l.head.size() - l.header_size;  // README, "Sizes": program size - header
  r.num_segments = l.segments.segments().size();
  r.dedup_bytes_saved = l.dedup_bytes_saved;
  // .ptd inputs beside the output: kept when unchanged, else not overwritten.
  std::vector<std::string> kept;
  PtdPlan to_write;
  std::vector<const ExternalFile*> to_write_ef;
  for (size_t i = 0; i < ptds.size(); ++i) {
    std::string& target = ptds[i].first;
    if (!o.allow_overwrite_input && IsInput(target, o)) {
      if (!FirstDifference(ptds[i].second, MappedFile::Open(target)->All())) {
        kept.push_back(target);
        continue;
      }
      target = PtdNamedAfter(pte_path, l.external[i].tag, ptds.size());
    }
    to_write.push_back(std::move(ptds[i]));
    to_write_ef.push_back(&l.external[i]);
  }
  std::vector<std::string> targets;
  for (const auto& pd : to_write) targets.push_back(pd.first);
  targets.push_back(pte_path);
  RefuseBadTargets(targets, to_write_ef, o);
  ProbeTargets(targets, o);
  if (o.dry_run) {
    for (const auto& pd : to_write) r.ptds.push_back({pd.first, pd.second.total_size(), false});
    r.pte = {pte_path, l.total_size()};
  } else {
    StageCheckAndRename(l, to_write, kept, pte_path, o, r);
  }
  for (const auto& k : kept) {
    struct stat st {};
    r.ptds.push_back({k, ::stat(k.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0, true});
  }
  return r;
}

}  // namespace ptepack
