#include "serialize/read/restore.h"

#include <algorithm>
#include <cstring>

#include "flat_tensor_views_generated.h"
#include "ptepack/error.h"
#include "serialize/io/file_io.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

using namespace prog;
using executorch_flatbuffer::DataLocation;

namespace {

// Item `i` of a sub-segmented region: from its offset to the next one's (or
// the region's end).
Bytes SubsegmentItem(const Bytes& seg, const std::vector<uint64_t>& offsets, size_t i) {
  const uint64_t start = offsets[i];
  const uint64_t end = i + 1 < offsets.size() ? offsets[i + 1] : seg.size;
  if (start > end || end > seg.size) {
    throw Error("constant-offset-out-of-range", "sub-segment offsets are not increasing within the segment");
  }
  return seg.Sub(start, end - start);
}

// Splits a sub-segmented region back into items (ExecuTorch's restore).
std::vector<Bytes> SplitSegment(const Bytes& seg, const std::vector<uint64_t>& offsets) {
  std::vector<Bytes> out;
  for (size_t i = 0; i < offsets.size(); ++i) out.push_back(SubsegmentItem(seg, offsets, i));
  return out;
}

// The inline entry that holds `data`, added if no entry restored from a
// segment holds the same bytes yet. ExecuTorch's emitter stores identical
// payloads once (exir/emit/_emitter.py keys backend_delegate_data by the
// sha256 of the processed bytes), so delegates sharing a segment, or
// segments of equal content, share one entry again.
uint32_t InlineEntryFor(fb::Value& bdd, const Bytes& data, std::vector<uint32_t>& restored) {
  for (uint32_t i : restored) {
    const Bytes& have = BackendDelegateInlineData{*bdd.elems()[i].table()}.get_data();
    // Empty payloads have no pointer to compare (memcmp must not get null).
    if (have.size == data.size &&
        (data.size == 0 || have.data == data.data || std::memcmp(have.data, data.data, data.size) == 0)) {
      return i;
    }
  }
  auto inl = BackendDelegateInlineData<>::New();
  BackendDelegateInlineData{*inl}.set_data(data);
  if (!bdd.present()) bdd = fb::OffsetVector({}, reflection::Obj);
  bdd.mutable_elems().push_back(fb::TableValue(inl));
  restored.push_back(static_cast<uint32_t>(bdd.elems().size() - 1));
  return restored.back();
}

// Delegate payloads in segments go back inline, one entry per distinct payload.
void InlineDelegates(Program<>& p, const std::vector<Bytes>& seg) {
  auto& bdd = p.backend_delegate_data();
  std::vector<uint32_t> restored;  // entries made from segments
  for (auto& plan : p.execution_plan().elems()) {
    for (auto& del : ExecutionPlan{*plan.table()}.delegates().elems()) {
      auto& processed = BackendDelegate{*del.table()}.processed();
      if (!processed.table()) continue;
      const BackendDelegateDataReference old{*processed.table()};
      if (old.get_location() != DataLocation::SEGMENT) continue;
      const uint32_t index = InlineEntryFor(bdd, seg.at(old.get_index()), restored);
      auto r = BackendDelegateDataReference<>::New();
      BackendDelegateDataReference ref{*r};
      ref.set_location(DataLocation::INLINE);
      ref.set_index(index);
      processed = fb::TableValue(r);
    }
  }
}

// Largest tensor size per constant buffer index below `count`, to drop
// alignment padding (0: no tensor). A vector, 8 bytes a constant: a map of
// 300,000 held 14 MB, freed among the tables restore keeps.
std::vector<uint64_t> ConstantSizes(fb::Table& p, size_t count) {
  std::vector<uint64_t> need(count, 0);
  // Read-only, so through ForEachTensorCow: the program is decoded on
  // demand (fb::DecodeOnDemand), and this walk keeps none of it.
  ForEachTensorCow(p, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn&) {
    uint64_t idx = Tensor{t}.get_data_buffer_idx();
    if (idx == 0 || idx >= count || IsExternal(t) || IsPlanned(t)) return;  // not in the constant segment
    need[idx] = std::max(need[idx], TensorNbytes(t).value_or(0));
  });
  return need;
}

// Whether bytes [from, b.size) of `b` are zero. A constant mapped from the
// input is read with pread: touching each constant's few padding bytes
// through the mapping faulted in its neighbours too (fault-around), so a
// split of 10,000 constants of 4 KiB kept the whole 40 MiB constant segment
// resident.
bool ZerosFrom(const Bytes& b, uint64_t from, MappedReader& reader) {
  if (reader.Open(b) < 0) {
    for (uint64_t k = from; k < b.size; ++k) {
      if (b.data[k] != 0) return false;
    }
    return true;
  }
  uint8_t buf[4096];
  for (uint64_t at = from; at < b.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(b.size - at, sizeof buf));
    reader.Read(b, at, n, buf);
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != 0) return false;
    }
    at += n;
  }
  return true;
}

// A constant without its alignment padding (when the padding is zeros). A
// buffer whose tensors need no bytes keeps what it holds: cut to nothing, it
// could leave the constant segment empty while tensors still refer to it
// (testdata/regressions/pte-zero-size-constant-in-padding.pte).
Bytes Unpadded(Bytes b, const std::vector<uint64_t>& need, size_t index, MappedReader& reader) {
  const uint64_t n = index < need.size() ? need[index] : 0;
  if (n == 0 || n > b.size) return b;
  if (!ZerosFrom(b, n, reader)) return b;
  return b.Sub(0, n);
}

// The constant segment back into constant_buffer.
void RestoreConstants(Program<>& p, const std::vector<Bytes>& seg) {
  auto& cseg = p.constant_segment();
  if (!cseg.table()) return;
  SubsegmentOffsets sub{*cseg.table()};
  std::vector<uint64_t> o = sub.get_offsets();
  if (o.empty()) return;
  const std::vector<uint64_t> need = ConstantSizes(p.table(), o.size());
  const Bytes& whole = seg.at(sub.get_segment_index());
  std::vector<fb::Value> bufs;
  bufs.reserve(o.size());  // grown by doubling it held 16.8 MB for 300,000 (9.6 used)
  MappedReader reader;
  for (size_t i = 0; i < o.size(); ++i) {
    auto buf = Buffer<>::New();
    Buffer{*buf}.set_storage(Unpadded(SubsegmentItem(whole, o, i), need, i, reader));
    bufs.push_back(fb::TableValue(buf));
  }
  p.constant_buffer() = fb::OffsetVector(std::move(bufs), reflection::Obj);
  sub.segment_index() = fb::Value{};
  sub.set_offsets({});
}

void RestoreMutableData(Program<>& p, const std::vector<Bytes>& seg, PackageParts& pkg) {
  auto& mds = p.mutable_data_segments();
  if (!mds.present() || mds.elems().empty()) return;
  if (mds.elems().size() > 1) throw Error("unsupported", "more than one mutable data segment");
  const SubsegmentOffsets m{*mds.elems()[0].table()};
  pkg.mutable_data = SplitSegment(seg.at(m.get_segment_index()), m.get_offsets());
  mds = fb::Value{};
}

void RestoreNamedData(Program<>& p, const std::vector<Bytes>& seg, PackageParts& pkg) {
  auto& nd = p.named_data();
  for (auto& e : nd.elems()) {
    const NamedData entry{*e.table()};
    NamedBlob b;
    b.key = entry.get_key();
    b.data = seg.at(entry.get_segment_index());
    pkg.named_data.push_back(std::move(b));
  }
  nd.mutable_elems().clear();
  p.segments().mutable_elems().clear();
}

// "dir/model.ptd" -> "model".
std::string TagOf(std::string stem) {
  auto slash = stem.find_last_of('/');
  if (slash != std::string::npos) stem = stem.substr(slash + 1);
  if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".ptd") == 0) stem.resize(stem.size() - 4);
  return stem;
}

}  // namespace

// The reverse of LayoutPte, step by step (ExecuTorch's _deserialize_pte_binary
// and restore of segment data).
PackageParts PackageFromPte(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  pte.report().ThrowIfError();
  if (!pte.program()) throw Error("flatbuffer-invalid", pte.name() + ": no program to read");
  PackageParts pkg;
  Bytes fbytes = pte.flatbuffer();
  // Decoded as it is read: a repack or split reads the values through
  // ForEachTensorCow and the encoder, which keep none of them, so the
  // program is never held decoded (a table is about 10x its bytes; the
  // 330,000-value bench program was 185 MB of tables).
  pkg.program = fb::DecodeOnDemand(S(), fbytes.data, fbytes.size, fbytes.owner);
  Program p{*pkg.program};
  std::vector<Bytes> seg;
  for (size_t i = 0; i < pte.segments().size(); ++i) seg.push_back(pte.SegmentData(i));
  InlineDelegates(p, seg);
  RestoreConstants(p, seg);
  RestoreMutableData(p, seg, pkg);
  RestoreNamedData(p, seg, pkg);
  for (const PtdFile* ptd : ptds) pkg.external.push_back(ExternalFromPtd(*ptd, TagOf(ptd->name())));
  return pkg;
}

ExternalFile ExternalFromPtd(const PtdFile& ptd, const std::string& tag) {
  ptd.report().ThrowIfError();
  ExternalFile ef;
  ef.tag = tag;
  ef.legacy = ptd.legacy();
  if (ef.legacy) {
    ef.legacy_tensor_alignment = ptd.legacy_tensor_alignment();
    ef.legacy_named_data_field = ptd.legacy_has_named_data();
  }
  for (const auto& e : ptd.entries()) {
    NamedBlob b;
    b.key = e.key;
    b.data = ptd.EntryData(e);
    if (e.legacy_tensor && e.extent > e.size) {
      b.data = ptd.SegmentData(e.segment_index).Sub(e.offset, e.extent);
    }
    b.legacy_tensor = e.legacy_tensor;
    if (e.has_layout) {
      auto tl = ptd::TensorLayout<>::New();
      ptd::TensorLayout layout{*tl};
      layout.set_scalar_type(static_cast<executorch_flatbuffer::ScalarType>(e.scalar_type));
      layout.set_sizes(std::vector<int32_t>(e.sizes.begin(), e.sizes.end()));
      layout.set_dim_order(Bytes::Own(e.dim_order.vec()));
      b.tensor_layout = tl;
    }
    ef.entries.push_back(std::move(b));
  }
  return ef;
}

}  // namespace ptepack
