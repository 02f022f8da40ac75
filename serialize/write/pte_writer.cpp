#include "serialize/write/pte_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "layout/alignment.h"
#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/dedup.h"
#include "serialize/model/placement.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/segment_writer.h"

namespace ptepack {

using namespace prog;

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
        n += 4 + v.str.size() + 1;
        break;
      case fb::Value::Kind::kScalarVector:
        n += 4 + v.scalars.size;
        break;
      case fb::Value::Kind::kTable:
        if (v.table) n += PayloadBytes(*v.table);
        break;
      case fb::Value::Kind::kOffsetVector:
        n += 4 + 4 * v.elems.size();
        for (const fb::Value& e : v.elems) {
          if (e.table) n += PayloadBytes(*e.table);
          if (e.kind == fb::Value::Kind::kString) n += 4 + e.str.size() + 1;
        }
        break;
      default:
        break;
    }
  }
  return n;
}

// ExecuTorch's emitter stores identical delegate payloads once
// (backend_delegate_data_cache in _emitter.py): delegates whose processed
// bytes are equal share one inline entry. A package restored from a file
// with extracted (per-segment deduplicated) delegates has one inline entry per
// delegate; written inline again, equal payloads become one entry, numbered
// in order of first use. Nothing changes when there are no duplicates.
void DedupInlineDelegateData(fb::Table& p) {
  auto& bdd = F(p, "backend_delegate_data");
  const size_t n = bdd.elems.size();
  if (n < 2) return;
  DedupIndex dedup;
  std::vector<size_t> rep(n);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    Bytes data = bdd.elems[i].table ? F(*bdd.elems[i].table, "data").scalars : Bytes{};
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
      kept.push_back(bdd.elems[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) remap[i] = remap[rep[i]];
  for (auto& pl : F(p, "execution_plan").elems) {
    if (!pl.table) continue;
    for (auto& del : F(*pl.table, "delegates").elems) {
      if (!del.table) continue;
      auto& processed = F(*del.table, "processed");
      if (!processed.table || fb::AsUInt(F(*processed.table, "location")) != 0) continue;
      uint64_t idx = fb::AsUInt(F(*processed.table, "index"));
      if (idx < n) F(*processed.table, "index") = fb::UIntValue(reflection::UInt, remap[idx]);
    }
  }
  bdd.elems = std::move(kept);
}

// ExecuTorch's emitter stores equal initial states of mutable buffers once
// when the tensors carry no ExtraTensorInfo (cached_spec_mutable_hash_values
// in _emitter.py; a buffer whose name is emitted always gets its own entry).
// Tensors are visited in program order; an entry whose bytes equal an earlier
// one is dropped and its tensors point at the earlier entry; the others are
// renumbered in order. Nothing changes when there are no such duplicates.
void DedupMutableData(Package& pkg) {
  if (!pkg.mutable_data || pkg.mutable_data->size() < 3) return;
  std::vector<Bytes>& md = *pkg.mutable_data;
  const size_t n = md.size();
  std::vector<size_t> rep(n);
  for (size_t i = 0; i < n; ++i) rep[i] = i;
  std::vector<bool> visited(n, false);
  std::vector<fb::Table*> users;  // planned tensors indexing mutable data
  DedupIndex seen;
  bool any = false;
  ForEachTensor(*pkg.program, [&](fb::Table&, uint32_t, fb::Table& t) {
    if (!F(t, "allocation_info").table) return;
    const auto& eti = F(t, "extra_tensor_info");
    if (eti.table && fb::AsUInt(F(*eti.table, "location")) != 0) return;  // external
    uint64_t idx = fb::AsUInt(F(t, "data_buffer_idx"));
    if (idx == 0 || idx >= n) return;
    users.push_back(&t);
    if (visited[idx] || eti.table) return;
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
  for (fb::Table* t : users) {
    uint64_t idx = fb::AsUInt(F(*t, "data_buffer_idx"));
    F(*t, "data_buffer_idx") = fb::UIntValue(reflection::UInt, remap[rep[idx]]);
  }
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

PteLayout LayoutPte(const Package& in, const BackendConfig& cfg) {
  cfg.Validate();
  if (!in.program) throw Error("bad-program", "package has no program");
  Package pkg = in;
  pkg.program = fb::Clone(*in.program);
  ApplyPlacement(pkg, cfg);
  DedupMutableData(pkg);
  fb::Table& p = *pkg.program;
  PteLayout out;
  SegmentPlan& plan = out.segments;

  // Constant segment.
  auto& cb = F(p, "constant_buffer");
  if (!cfg.inline_constants && !cb.elems.empty()) {
    std::vector<Bytes> items;
    for (auto& b : cb.elems) items.push_back(b.table ? F(*b.table, "storage").scalars : Bytes{});
    std::vector<uint64_t> offsets;
    PlannedSegment seg = ConcatSegment(items, cfg.tensor_alignment(), &offsets);
    auto so = New("SubsegmentOffsets");
    F(*so, "segment_index") = fb::UIntValue(reflection::UInt, plan.segments().size());
    F(*so, "offsets") = fb::ScalarVectorOf(reflection::ULong, offsets);
    F(p, "constant_segment") = fb::TableValue(so);
    cb = fb::OffsetVector({}, reflection::Obj);
    plan.Add(std::move(seg));
  }

  // Mutable data segment (no padding: it is copied at load time).
  if (pkg.mutable_data) {
    std::vector<uint64_t> offsets;
    PlannedSegment seg = ConcatSegment(*pkg.mutable_data, 1, &offsets);
    if (seg.size > 0) {
      auto so = New("SubsegmentOffsets");
      F(*so, "segment_index") = fb::UIntValue(reflection::UInt, plan.segments().size());
      F(*so, "offsets") = fb::ScalarVectorOf(reflection::ULong, offsets);
      F(p, "mutable_data_segments") = fb::OffsetVector({fb::TableValue(so)}, reflection::Obj);
      plan.Add(std::move(seg));
    }
  }

  // Delegate payloads.
  if (!cfg.extract_delegate_segments) DedupInlineDelegateData(p);
  if (cfg.extract_delegate_segments) {
    auto& bdd = F(p, "backend_delegate_data");
    std::vector<fb::Value> remaining;
    std::vector<bool> seen(bdd.elems.size(), false);
    DedupIndex dedup;
    for (auto& pl : F(p, "execution_plan").elems) {
      for (auto& del : F(*pl.table, "delegates").elems) {
        auto& processed = F(*del.table, "processed");
        if (!processed.table || fb::AsUInt(F(*processed.table, "location")) != 0) {
          throw Error("bad-program", "delegate data must be inline before layout (" + F(*del.table, "id").str + ")");
        }
        uint64_t idx = fb::AsUInt(F(*processed.table, "index"));
        if (idx >= bdd.elems.size()) {
          throw Error("index-out-of-range", "delegate processed index " + std::to_string(idx) +
                                                " >= backend_delegate_data size " + std::to_string(bdd.elems.size()));
        }
        seen[idx] = true;
        const Bytes& data = F(*bdd.elems[idx].table, "data").scalars;
        if (data.size > 0) {
          size_t si = AddDedupedBlob(plan, dedup, data);
          auto ref = New("BackendDelegateDataReference");
          F(*ref, "location") = fb::UIntValue(reflection::Byte, 1);
          F(*ref, "index") = fb::UIntValue(reflection::UInt, si);
          processed = fb::TableValue(ref);
        } else {
          remaining.push_back(bdd.elems[idx]);
          F(*processed.table, "index") = fb::UIntValue(reflection::UInt, remaining.size() - 1);
        }
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) {
      if (!seen[i])
        throw Error("bad-program", "backend_delegate_data[" + std::to_string(i) + "] is not used by any delegate");
    }
    if (bdd.present() || !remaining.empty()) bdd = fb::OffsetVector(std::move(remaining), reflection::Obj);
    out.dedup_bytes_saved += dedup.bytes_saved();
  }

  // Named data stored in the .pte.
  if (!pkg.named_data.empty()) {
    auto& nd = F(p, "named_data");
    if (!nd.elems.empty()) throw Error("bad-program", "program already has named data");
    std::vector<fb::Value> entries;
    DedupIndex dedup;
    for (const auto& blob : pkg.named_data) {
      size_t si = AddDedupedBlob(plan, dedup, blob.data, blob.alignment);
      auto e = New("NamedData");
      F(*e, "key") = fb::StringValue(blob.key);
      F(*e, "segment_index") = fb::UIntValue(reflection::UInt, si);
      entries.push_back(fb::TableValue(e));
    }
    nd = fb::OffsetVector(std::move(entries), reflection::Obj);
    out.dedup_bytes_saved += dedup.bytes_saved();
  }

  plan.Place(cfg.segment_alignment);
  auto& segs = F(p, "segments");
  if (!segs.present()) segs = fb::OffsetVector({}, reflection::Obj);
  for (const auto& s : plan.segments()) {
    auto ds = New("DataSegment");
    F(*ds, "offset") = fb::UIntValue(reflection::ULong, s.offset);
    F(*ds, "size") = fb::UIntValue(reflection::ULong, s.size);
    segs.elems.push_back(fb::TableValue(ds));
  }

  // Refuse before encoding: the encoder would need the whole buffer in memory.
  CheckFormatLimits(PayloadBytes(p), plan.segments().size());
  fb::EncodeOptions eo;
  eo.order = cfg.flatbuffer_order;
  eo.force_align["Buffer.storage"] = cfg.tensor_alignment();
  eo.force_align["BackendDelegateInlineData.data"] = cfg.delegate_data_alignment();
  fb::Encoded enc = fb::Encode(S(), p, eo);
  out.flatbuffer_size = enc.data.size();
  out.external = std::move(pkg.external);
  if (plan.data_size() == 0) {
    out.head = std::move(enc.data);
    out.segment_base_offset = 0;
    // A tiny program (no methods, nothing else) encodes to fewer bytes than
    // the runtime reads first; zeros after the flatbuffer make it loadable.
    if (out.head.size() < kRuntimeHeadBytes) out.head.resize(kRuntimeHeadBytes, 0);
  } else {
    ExtendedHeader h;
    h.has_segment_data_size = !cfg.legacy_extended_header;
    uint64_t padded =
        AlignUp(h.has_segment_data_size ? kExtendedHeaderLength : kExtendedHeaderMinLength, enc.max_force_align);
    h.program_size = padded + enc.data.size();
    h.segment_base_offset = AlignUp(h.program_size, cfg.segment_alignment);
    h.segment_data_size = plan.data_size();
    std::vector<uint8_t> hb = EncodeExtendedHeader(h);
    hb.resize(padded, 0);
    out.head = InsertHeader(enc.data, hb);
    out.segment_base_offset = h.segment_base_offset;
  }
  CheckFormatLimits(out.head.size(), plan.segments().size());
  return out;
}

namespace {

// FlatTensor layout of before June 2025: all tensors share the first
// segment, each padded to tensor_alignment; the flatbuffer and header are
// padded to tensor_alignment too.
PtdLayout LayoutLegacyPtd(const ExternalFile& file, uint64_t segment_alignment) {
  const fb::Schema& LS = fb::FlatTensorLegacySchema();
  const fb::Schema& FS = fb::FlatTensorSchema();
  const uint64_t ta = std::max<uint32_t>(1, file.legacy_tensor_alignment);
  PtdLayout out;
  PlannedSegment tensor_seg;
  DedupIndex dedup;
  std::vector<uint64_t> offsets;  // by dedup id
  std::vector<fb::Value> tensors, named;
  std::vector<PlannedSegment> named_segs;
  std::vector<uint64_t> named_seg_index;
  DedupIndex named_dedup;
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
    auto t = fb::NewTable(LS, "flat_tensor_legacy_flatbuffer.TensorMetadata");
    fb::Field(LS, *t, "fully_qualified_name") = fb::StringValue(e.key);
    if (e.tensor_layout) {
      fb::Field(LS, *t, "scalar_type") = fb::Field(FS, *e.tensor_layout, "scalar_type");
      fb::Field(LS, *t, "sizes") = fb::Field(FS, *e.tensor_layout, "sizes");
      fb::Field(LS, *t, "dim_order") = fb::Field(FS, *e.tensor_layout, "dim_order");
    }
    fb::Field(LS, *t, "segment_index") = fb::UIntValue(reflection::UInt, 0);
    fb::Field(LS, *t, "offset") = fb::UIntValue(reflection::ULong, off);
    tensors.push_back(fb::TableValue(t));
  }
  out.segments.Add(std::move(tensor_seg));
  for (const auto& e : file.entries) {
    if (e.legacy_tensor) continue;
    size_t si = AddDedupedBlob(out.segments, named_dedup, e.data, e.alignment);
    auto nd = fb::NewTable(LS, "flat_tensor_legacy_flatbuffer.NamedData");
    fb::Field(LS, *nd, "key") = fb::StringValue(e.key);
    fb::Field(LS, *nd, "segment_index") = fb::UIntValue(reflection::UInt, si);
    named.push_back(fb::TableValue(nd));
  }
  out.segments.Place(segment_alignment);
  std::vector<fb::Value> segs;
  for (const auto& s : out.segments.segments()) {
    auto ds = fb::NewTable(LS, "flat_tensor_legacy_flatbuffer.DataSegment");
    fb::Field(LS, *ds, "offset") = fb::UIntValue(reflection::ULong, s.offset);
    fb::Field(LS, *ds, "size") = fb::UIntValue(reflection::ULong, s.size);
    segs.push_back(fb::TableValue(ds));
  }
  auto root = fb::NewTable(LS, "flat_tensor_legacy_flatbuffer.FlatTensor");
  fb::Field(LS, *root, "tensor_alignment") = fb::UIntValue(reflection::UInt, ta);
  fb::Field(LS, *root, "tensors") = fb::OffsetVector(std::move(tensors), reflection::Obj);
  fb::Field(LS, *root, "segments") = fb::OffsetVector(std::move(segs), reflection::Obj);
  if (file.legacy_named_data_field || !named.empty()) {
    fb::Field(LS, *root, "named_data") = fb::OffsetVector(std::move(named), reflection::Obj);
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
  auto root = fb::NewTable(FS, "flat_tensor_flatbuffer.FlatTensor");
  std::vector<fb::Value> named;
  std::set<std::string> keys;
  for (const auto& e : file.entries) {
    if (!keys.insert(e.key).second) throw Error("duplicate-key", "key \"" + e.key + "\" twice in " + file.tag + ".ptd");
    size_t si = AddDedupedBlob(out.segments, dedup, e.data, e.alignment);
    auto nd = fb::NewTable(FS, "flat_tensor_flatbuffer.NamedData");
    fb::Field(FS, *nd, "key") = fb::StringValue(e.key);
    fb::Field(FS, *nd, "segment_index") = fb::UIntValue(reflection::UInt, si);
    if (e.tensor_layout) fb::Field(FS, *nd, "tensor_layout") = fb::TableValue(e.tensor_layout);
    named.push_back(fb::TableValue(nd));
  }
  out.segments.Place(segment_alignment);
  std::vector<fb::Value> segs;
  for (const auto& s : out.segments.segments()) {
    auto ds = fb::NewTable(FS, "flat_tensor_flatbuffer.DataSegment");
    fb::Field(FS, *ds, "offset") = fb::UIntValue(reflection::ULong, s.offset);
    fb::Field(FS, *ds, "size") = fb::UIntValue(reflection::ULong, s.size);
    segs.push_back(fb::TableValue(ds));
  }
  fb::Field(FS, *root, "version") = fb::UIntValue(reflection::UInt, 0);
  fb::Field(FS, *root, "segments") = fb::OffsetVector(std::move(segs), reflection::Obj);
  fb::Field(FS, *root, "named_data") = fb::OffsetVector(std::move(named), reflection::Obj);
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

WriteResult WritePackage(const Package& pkg, const BackendConfig& cfg, const std::string& pte_path,
                         const WriteOptions& o) {
  WritingScope writing;  // SIGINT/SIGTERM unwind through here (temp files removed)
  PteLayout l = LayoutPte(pkg, cfg);
  std::string dir;
  auto slash = pte_path.find_last_of('/');
  if (slash != std::string::npos) dir = pte_path.substr(0, slash + 1);
  // Lay out every .ptd before writing anything, so layout errors leave no files.
  std::vector<std::pair<std::string, PtdLayout>> ptds;
  for (const auto& ef : l.external) ptds.emplace_back(dir + ef.tag + ".ptd", LayoutPtd(ef, cfg.ptd_segment_alignment));
  WriteResult r;
  r.flatbuffer_size = l.flatbuffer_size;
  r.num_segments = l.segments.segments().size();
  r.dedup_bytes_saved = l.dedup_bytes_saved;
  // Refuse collisions and foreign files before anything is written.
  std::vector<std::string> targets;
  for (const auto& pd : ptds) targets.push_back(pd.first);
  targets.push_back(pte_path);
  std::map<std::string, std::string> seen;  // canonical path -> what it is
  for (size_t i = 0; i < targets.size(); ++i) {
    const bool is_pte = i + 1 == targets.size();
    const std::string what = is_pte ? "the program" : "the data file of tag \"" + l.external[i].tag + "\"";
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
  AtomicFile::Options ao{o.inputs, o.allow_overwrite_input, {}};
  for (const auto& t : targets) {
    if (o.dry_run) {
      for (const auto& in : o.inputs) {
        if (!o.allow_overwrite_input && SameFile(in, t)) {
          Refuse("overwrite-input", t,
                 "output is the same file as input " + in +
                     "; refusing to overwrite it in place (use --in-place to allow)");
        }
      }
    } else {
      AtomicFile probe(t, ao);
    }
  }
  if (o.dry_run) {
    for (const auto& pd : ptds) r.ptds.push_back({pd.first, pd.second.total_size()});
    r.pte = {pte_path, l.total_size()};
    return r;
  }
  // Every file is written and committed (flushed, synced) under a staging
  // name first; only when all of them are complete and read back valid are
  // they renamed into place. AtomicFile writes its buffer out in Commit, so
  // committing the real targets one after the other could replace the .ptd
  // files and then fail on the .pte (full disk), pairing new data with an
  // old program. The staging names never are inputs.
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
    CheckStaged(staged_ptds, files.back().first, pte_path);
  }
  // All or nothing: a failed rename restores the files renamed before it,
  // so new data is never paired with an old program.
  staged.RenameAll();
  return r;
}

}  // namespace ptepack
