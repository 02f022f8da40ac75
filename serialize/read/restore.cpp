#include "serialize/read/restore.h"

#include <algorithm>
#include <map>

#include "ptepack/error.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

using namespace prog;

namespace {

fb::Value ByteVector(Bytes b) { return fb::ScalarVector(reflection::UByte, std::move(b)); }

std::vector<uint64_t> ReadU64s(const fb::Value& v) {
  std::vector<uint64_t> out(v.scalars.size / 8);
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadU64(v.scalars.data + 8 * i);
  return out;
}

// Splits a sub-segmented region back into items (ExecuTorch's restore).
std::vector<Bytes> SplitSegment(const Bytes& seg, const std::vector<uint64_t>& offsets) {
  std::vector<Bytes> out;
  for (size_t i = 0; i < offsets.size(); ++i) {
    uint64_t start = offsets[i];
    uint64_t end = i + 1 < offsets.size() ? offsets[i + 1] : seg.size;
    if (start > end || end > seg.size) {
      throw Error("constant-offset-out-of-range", "sub-segment offsets are not increasing within the segment");
    }
    out.push_back(seg.Sub(start, end - start));
  }
  return out;
}

}  // namespace

Package PackageFromPte(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  pte.report().ThrowIfError();
  if (!pte.program()) throw Error("flatbuffer-invalid", pte.name() + ": no program to read");
  Package pkg;
  Bytes fbytes = pte.flatbuffer();
  pkg.program = fb::Decode(S(), fbytes.data, fbytes.size, fbytes.owner);
  fb::Table& p = *pkg.program;
  std::vector<Bytes> seg;
  for (size_t i = 0; i < pte.segments().size(); ++i) seg.push_back(pte.SegmentData(i));

  // Delegate payloads in segments go back inline.
  auto& bdd = F(p, "backend_delegate_data");
  for (auto& plan : F(p, "execution_plan").elems) {
    for (auto& del : F(*plan.table, "delegates").elems) {
      auto& processed = F(*del.table, "processed");
      if (!processed.table || fb::AsUInt(F(*processed.table, "location")) != 1) continue;
      uint64_t idx = fb::AsUInt(F(*processed.table, "index"));
      auto inl = New("BackendDelegateInlineData");
      F(*inl, "data") = ByteVector(seg.at(idx));
      if (!bdd.present()) bdd = fb::OffsetVector({}, reflection::Obj);
      bdd.elems.push_back(fb::TableValue(inl));
      auto ref = New("BackendDelegateDataReference");
      F(*ref, "location") = fb::UIntValue(reflection::Byte, 0);
      F(*ref, "index") = fb::UIntValue(reflection::UInt, bdd.elems.size() - 1);
      processed = fb::TableValue(ref);
    }
  }

  // Largest tensor size per constant buffer index, to drop alignment padding.
  std::map<uint64_t, uint64_t> need;
  ForEachTensor(p, [&](fb::Table&, uint32_t, fb::Table& t) {
    uint64_t idx = fb::AsUInt(F(t, "data_buffer_idx"));
    const auto& eti = F(t, "extra_tensor_info");
    bool external = eti.table && fb::AsUInt(F(*eti.table, "location")) == 1;
    if (idx == 0 || external || F(t, "allocation_info").table) return;  // not in the constant segment
    need[idx] = std::max(need[idx], TensorNbytes(t));
  });

  auto& cseg = F(p, "constant_segment");
  if (cseg.table) {
    auto& offs = F(*cseg.table, "offsets");
    std::vector<uint64_t> o = ReadU64s(offs);
    if (!o.empty()) {
      uint64_t si = fb::AsUInt(F(*cseg.table, "segment_index"));
      std::vector<Bytes> items = SplitSegment(seg.at(si), o);
      std::vector<fb::Value> bufs;
      for (size_t i = 0; i < items.size(); ++i) {
        Bytes b = items[i];
        auto it = need.find(i);
        if (it != need.end() && it->second <= b.size) {
          bool zero_tail = true;
          for (uint64_t k = it->second; k < b.size && zero_tail; ++k) zero_tail = b.data[k] == 0;
          if (zero_tail) b = b.Sub(0, it->second);
        }
        auto buf = New("Buffer");
        F(*buf, "storage") = ByteVector(b);
        bufs.push_back(fb::TableValue(buf));
      }
      F(p, "constant_buffer") = fb::OffsetVector(std::move(bufs), reflection::Obj);
      F(*cseg.table, "segment_index") = fb::Value{};
      offs = fb::ScalarVectorOf<uint64_t>(reflection::ULong, {});
    }
  }

  auto& mds = F(p, "mutable_data_segments");
  if (mds.present() && !mds.elems.empty()) {
    if (mds.elems.size() > 1) throw Error("unsupported", "more than one mutable data segment");
    auto& m = *mds.elems[0].table;
    pkg.mutable_data = SplitSegment(seg.at(fb::AsUInt(F(m, "segment_index"))), ReadU64s(F(m, "offsets")));
    mds = fb::Value{};
  }

  auto& nd = F(p, "named_data");
  for (auto& e : nd.elems) {
    NamedBlob b;
    b.key = F(*e.table, "key").str;
    b.data = seg.at(fb::AsUInt(F(*e.table, "segment_index")));
    pkg.named_data.push_back(std::move(b));
  }
  nd.elems.clear();
  F(p, "segments").elems.clear();

  for (const PtdFile* ptd : ptds) {
    std::string stem = ptd->name();
    auto slash = stem.find_last_of('/');
    if (slash != std::string::npos) stem = stem.substr(slash + 1);
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".ptd") == 0) stem.resize(stem.size() - 4);
    pkg.external.push_back(ExternalFromPtd(*ptd, stem));
  }
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
  const auto& FS = fb::FlatTensorSchema();
  for (const auto& e : ptd.entries()) {
    NamedBlob b;
    b.key = e.key;
    b.data = ptd.EntryData(e);
    if (e.legacy_tensor && e.extent > e.size) {
      b.data = ptd.SegmentData(e.segment_index).Sub(e.offset, e.extent);
    }
    b.legacy_tensor = e.legacy_tensor;
    if (e.has_layout) {
      auto tl = fb::NewTable(FS, "flat_tensor_flatbuffer.TensorLayout");
      fb::Field(FS, *tl, "scalar_type") = fb::ScalarValue(reflection::Byte, static_cast<uint8_t>(e.scalar_type));
      std::vector<uint8_t> sz(e.sizes.size() * 4);
      if (!sz.empty()) std::memcpy(sz.data(), e.sizes.data(), sz.size());
      fb::Field(FS, *tl, "sizes") = fb::ScalarVector(reflection::Int, Bytes::Own(std::move(sz)));
      fb::Field(FS, *tl, "dim_order") =
          fb::ScalarVector(reflection::UByte, Bytes::Own(std::vector<uint8_t>(e.dim_order)));
      b.tensor_layout = tl;
    }
    ef.entries.push_back(std::move(b));
  }
  return ef;
}

}  // namespace ptepack
