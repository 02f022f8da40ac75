#include "serialize/read/ptd_reader.h"

#include <algorithm>
#include <string_view>
#include <type_traits>

#include "serialize/read/leading_bytes.h"

namespace ptepack {

namespace ftb = flat_tensor_flatbuffer;

// 300,000 keys: 21.6 MB of entries (was 43 MB plus two allocations a key).
static_assert(sizeof(void*) != 8 || sizeof(PtdEntry) == 72, "PtdEntry grew");

namespace {

// A tensor layout FlatTensorDataMap can use: it reads sizes and dim_order
// without null checks, reads dim_order for as many entries as sizes has, and
// TensorLayout::create refuses dim_order values outside the rank. A dim_order
// that is not a permutation can never match a tensor the runtime loads.
void CheckTensorLayout(Report& r, const std::string& name, const ftb::TensorLayout& tl, uint64_t at) {
  if (tl.sizes() == nullptr || tl.dim_order() == nullptr) {
    r.Error("missing-field",
            name + " tensor_layout has no " + (tl.sizes() ? "dim_order" : "sizes") +
                " (ExecuTorch's FlatTensorDataMap crashes on it)",
            at, "sizes and dim_order vectors", "absent");
    return;
  }
  const size_t rank = tl.sizes()->size();
  if (tl.dim_order()->size() != rank) {
    r.Error("dim-order-mismatch", name + " tensor_layout dim_order length differs from its rank", at,
            std::to_string(rank) + " entries", std::to_string(tl.dim_order()->size()));
    return;
  }
  uint64_t seen = 0;
  for (size_t i = 0; i < rank; ++i) {
    uint8_t d = tl.dim_order()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (d >= rank || d >= 64 || (seen & (1ull << d)) != 0) {
      r.Error("bad-dim-order", name + " tensor_layout dim_order is not a permutation of its dimensions", at,
              "a permutation of 0.." + std::to_string(rank - 1),
              "dim_order[" + std::to_string(i) + "] = " + std::to_string(d));
      return;
    }
    seen |= 1ull << d;
  }
}

}  // namespace

Bytes PtdFile::EntryData(const PtdEntry& e) const {
  if (!e.valid) throw Error("segment-out-of-range", name_ + ": entry \"" + e.key.str() + "\" is not in the file");
  return SegmentData(e.segment_index).Sub(e.offset, e.size);
}

bool PtdFile::Has(std::string_view key) const {
  for (const auto& e : entries_) {
    if (e.key == key && e.valid) return true;
  }
  return false;
}

std::optional<Bytes> PtdFile::Find(std::string_view key) const {
  for (const auto& e : entries_) {
    if (e.key == key && e.valid) return EntryData(e);
  }
  return std::nullopt;
}

void PtdFile::Parse(const ReadOptions& opts) {
  if (!ParseHeader()) return;
  const uint64_t fb_end = header_.flatbuffer_offset + header_.flatbuffer_size;
  if (!VerifyFlatbuffer(fb_end, opts)) return;
  CheckRootFields(opts);
  if (ft_) {
    CheckSegments(ft_->segments(), opts);
  } else {
    CheckSegments(legacy_->segments(), opts);
  }
  CollectEntries();
  CheckEntries();
  SetLegacyExtents();
}

// The root offset, file identifier and FH01 header; false if nothing after
// them can be read.
bool PtdFile::ParseHeader() {
  const uint64_t size = file_size_;
  const uint8_t* d = file_.data;
  if (size < 8) {
    report_.Error("truncated", "file too short to hold a flatbuffer root offset and file identifier", 0, ">= 8 bytes",
                  std::to_string(size) + " bytes");
    return false;
  }
  if (std::memcmp(d + 4, kFlatTensorId, 4) != 0) {
    std::string hint = std::memcmp(d + 4, "ET", 2) == 0 ? " (this looks like a .pte program)" : "";
    report_.Error("bad-magic", "not a FlatTensor file: wrong file identifier" + hint, 4, "\"FT01\"",
                  "bytes " + Hex(LoadU32(d + 4)));
    return false;
  }
  if (size < 8 + kFlatTensorHeaderLength) {
    report_.Error("truncated", "file ends inside the FlatTensor header", size,
                  ">= " + std::to_string(8 + kFlatTensorHeaderLength) + " bytes", std::to_string(size) + " bytes");
    return false;
  }
  if (std::memcmp(d + 8, kFlatTensorHeaderMagic, 4) != 0) {
    report_.Error("bad-magic", "FlatTensor header magic missing", 8, "\"FH01\"", "bytes " + Hex(LoadU32(d + 8)));
    return false;
  }
  FlatTensorHeader& h = header_;
  h.length = LoadU32(d + 12);
  h.flatbuffer_offset = LoadU64(d + 16);
  h.flatbuffer_size = LoadU64(d + 24);
  h.segment_base_offset = LoadU64(d + 32);
  h.segment_data_size = LoadU64(d + 40);
  if (size < kRuntimeHeadBytes) {
    // FlatTensorDataMap::load first reads 64 bytes and fails on a shorter file.
    report_.Error("truncated", "file is shorter than the 64 bytes ExecuTorch reads before the header", size,
                  ">= " + std::to_string(kRuntimeHeadBytes) + " bytes", std::to_string(size) + " bytes");
  }
  if (h.length < kFlatTensorHeaderLength || 8 + static_cast<uint64_t>(h.length) > size) {
    report_.Error("header-length", "FlatTensor header length is wrong", 12,
                  ">= " + std::to_string(kFlatTensorHeaderLength) + " and within the file", std::to_string(h.length));
    return false;
  }
  if (h.flatbuffer_offset > UINT64_MAX - h.flatbuffer_size || h.flatbuffer_offset + h.flatbuffer_size > size) {
    report_.Error("program-size-past-eof", "flatbuffer_offset + flatbuffer_size runs past the end of the file", 16,
                  "<= " + std::to_string(size),
                  std::to_string(h.flatbuffer_offset) + " + " + std::to_string(h.flatbuffer_size));
    return false;
  }
  uint64_t fb_end = h.flatbuffer_offset + h.flatbuffer_size;
  if (fb_end < 8 + static_cast<uint64_t>(h.length)) {
    report_.Error("program-size", "flatbuffer region is smaller than the headers it contains", 16,
                  ">= " + std::to_string(8 + h.length), std::to_string(fb_end));
    return false;
  }
  if (h.segment_base_offset > UINT64_MAX - h.segment_data_size) {
    report_.Error("segment-overflow", "segment_base_offset + segment_data_size overflows", 32, "a sum below 2^64",
                  std::to_string(h.segment_base_offset) + " + " + std::to_string(h.segment_data_size));
    return false;
  }
  if (h.segment_base_offset + h.segment_data_size > size) {
    report_.Error("truncated", "file is shorter than the header's segment data says", size,
                  std::to_string(h.segment_base_offset + h.segment_data_size) + " bytes",
                  std::to_string(size) + " bytes");
  }
  if (h.segment_base_offset < fb_end) {
    report_.Error("segment-base-overlaps-program", "segment base offset lies inside the flatbuffer", 32,
                  ">= " + std::to_string(fb_end), std::to_string(h.segment_base_offset));
  }
  if (fb_end > FLATBUFFERS_MAX_BUFFER_SIZE) {
    report_.Error("flatbuffer-too-large", "FlatTensor flatbuffer exceeds the FlatBuffers 2 GiB limit", 0, "< 2 GiB",
                  std::to_string(fb_end));
    return false;
  }
  return true;
}

// Verifies the flatbuffer as the current or the legacy FlatTensor schema.
bool PtdFile::VerifyFlatbuffer(uint64_t fb_end, const ReadOptions& opts) {
  const uint8_t* d = file_.data;
  flatbuffers::Verifier::Options vo;
  vo.max_depth = opts.max_depth;
  vo.max_tables = opts.max_tables;
  flatbuffers::Verifier v(d, static_cast<size_t>(fb_end), vo);
  bool current = ftb::VerifyFlatTensorBuffer(v);
  if (current) {
    // A legacy FlatTensor can pass the current verifier by accident (its
    // tensor_alignment scalar read as the segments offset). The current
    // schema has nothing in the legacy segments/named_data slots.
    using Legacy = flat_tensor_legacy_flatbuffer::FlatTensor;
    const auto* root = flatbuffers::GetRoot<flatbuffers::Table>(d);
    if (root->GetOptionalFieldOffset(Legacy::VT_SEGMENTS) != 0 ||
        root->GetOptionalFieldOffset(Legacy::VT_NAMED_DATA) != 0) {
      flatbuffers::Verifier lv(d, static_cast<size_t>(fb_end), vo);
      current = !flat_tensor_legacy_flatbuffer::VerifyFlatTensorBuffer(lv);
    }
  }
  if (current) {
    ft_ = ftb::GetFlatTensor(d);
  } else {
    flatbuffers::Verifier lv(d, static_cast<size_t>(fb_end), vo);
    if (!flat_tensor_legacy_flatbuffer::VerifyFlatTensorBuffer(lv)) {
      report_.Error("flatbuffer-invalid", "FlatBuffers verifier rejected the FlatTensor data", 0,
                    "a valid flat_tensor_flatbuffer.FlatTensor", "verification failure");
      return false;
    }
    legacy_ = flat_tensor_legacy_flatbuffer::GetFlatTensor(d);
  }
  return true;
}

// Fields the runtime needs, and the legacy layout's own rules.
void PtdFile::CheckRootFields(const ReadOptions& opts) {
  const uint8_t* d = file_.data;
  const FlatTensorHeader& h = header_;
  const uint64_t root_at = static_cast<uint64_t>(LoadU32(d));
  if (ft_ && !ft_->named_data()) {
    report_.Error("missing-field", "FlatTensor has no named_data (ExecuTorch rejects this)", root_at,
                  "a named_data vector", "absent");
  }
  if (ft_ && !ft_->segments()) {
    report_.Error("missing-field", "FlatTensor has no segments list (ExecuTorch rejects this)", root_at,
                  "a segments vector", "absent");
  }
  if (legacy_) {
    const std::string msg =
        "FlatTensor layout from before June 2025 (tensors list); current ExecuTorch runtimes cannot load it; "
        "`ptepack repack --upgrade-ptd` rewrites it in the current layout";
    if (opts.allow_legacy_ptd) {
      report_.Warn("legacy-format", msg, root_at, "the current FlatTensor layout", "the legacy layout");
    } else {
      report_.Error("legacy-format", msg + " (or accept it for older runtimes with --allow-legacy-ptd)", root_at,
                    "the current FlatTensor layout", "the legacy layout");
    }
    // The legacy writer padded the header to tensor_alignment, so a real
    // file's flatbuffer starts at or after it; a huge value would make a
    // rewrite pad by gigabytes.
    uint32_t ta = legacy_->tensor_alignment();
    uint64_t ta_padding = ta <= 1 ? 0 : (kFlatTensorHeaderLength + ta - 1) / ta * ta;
    if ((ta & (ta - 1)) != 0 || ta_padding > h.flatbuffer_offset) {
      report_.Error("bad-alignment", "legacy tensor_alignment is not a power of two the header was padded to",
                    static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(legacy_) - d),
                    "a power of two <= " + std::to_string(h.flatbuffer_offset), std::to_string(ta));
    }
  }
}

// Each segment lies in the file, after the previous one, aligned as asked.
template <typename Segments>
void PtdFile::CheckSegments(const Segments* segs, const ReadOptions& opts) {
  const uint64_t size = file_size_;
  const uint8_t* d = file_.data;
  const FlatTensorHeader& h = header_;
  // Vectors sized once (the flatbuffer is verified, so the counts are bounded
  // by the file): growing by doubling held 1.5x the entries at the peak
  // (300,000 keys: 113 MB of the 130 MB `inspect` took).
  uint64_t prev_end = 0;
  if (segs) segments_.reserve(segs->size());
  for (size_t i = 0; segs && i < segs->size(); ++i) {
    const auto* s = segs->Get(static_cast<flatbuffers::uoffset_t>(i));
    SegmentSpan span;
    span.offset = s->offset();
    span.size = s->size();
    std::string name = "segments[" + std::to_string(i) + "]";
    uint64_t at = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(s) - d);
    if (span.offset > UINT64_MAX - span.size || h.segment_base_offset > UINT64_MAX - span.offset - span.size) {
      report_.Error("segment-overflow", name + " offset + size overflows 64 bits", at, "a sum below 2^64",
                    std::to_string(span.offset) + " + " + std::to_string(span.size));
    } else {
      span.file_offset = h.segment_base_offset + span.offset;
      if (span.offset + span.size > h.segment_data_size) {
        report_.Error("segment-out-of-range", name + " ends past the header's segment data size", span.file_offset,
                      "end <= " + std::to_string(h.segment_data_size),
                      "end " + std::to_string(span.offset + span.size));
      } else if (span.file_offset + span.size > size) {
        report_.Error("segment-out-of-range", name + " runs past the end of the file", span.file_offset,
                      "end <= " + std::to_string(size), "end " + std::to_string(span.file_offset + span.size));
      } else {
        span.in_file = true;
      }
      if (i > 0 && span.offset < prev_end) {
        report_.Error("segment-overlap", name + " overlaps or precedes the previous segment", span.file_offset,
                      "offset >= " + std::to_string(prev_end), std::to_string(span.offset));
      }
      prev_end = std::max(prev_end, span.offset + span.size);
      if (opts.segment_alignment > 1 && span.file_offset % opts.segment_alignment != 0) {
        report_.Error("segment-misaligned", name + " is not aligned", span.file_offset,
                      "multiple of " + std::to_string(opts.segment_alignment),
                      "alignment " + std::to_string(AlignmentOf(span.file_offset)));
      }
    }
    segments_.push_back(span);
  }
}

// One entry per named blob (and per tensor of the legacy layout).
void PtdFile::CollectEntries() {
  const uint8_t* d = file_.data;
  // Views of the mapped flatbuffer (verified above), not copies.
  auto layout_of = [](PtdEntry& e, executorch_flatbuffer::ScalarType st, const flatbuffers::Vector<int32_t>* sizes,
                      const flatbuffers::Vector<uint8_t>* dims) {
    e.has_layout = true;
    e.scalar_type = static_cast<int8_t>(st);
    e.sizes = PtdDims<int32_t>(sizes);
    e.dim_order = PtdDims<uint8_t>(dims);
  };
  auto key_of = [](const flatbuffers::String* s) { return PtdKey(s->c_str(), s->size()); };
  auto at = [d](const void* p) { return static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(p) - d); };
  auto add_named = [&](const auto* nd) {
    if (nd) entries_.reserve(entries_.size() + nd->size());
    for (size_t i = 0; nd && i < nd->size(); ++i) {
      const auto* e = nd->Get(static_cast<flatbuffers::uoffset_t>(i));
      PtdEntry pe;
      pe.table_offset = at(e);
      if (!e->key()) {
        report_.Error("missing-string", "named_data[" + std::to_string(i) + "].key is missing", pe.table_offset);
        continue;
      }
      pe.key = key_of(e->key());
      pe.segment_index = e->segment_index();
      if constexpr (std::is_same_v<std::decay_t<decltype(*e)>, ftb::NamedData>) {
        if (const auto* tl = e->tensor_layout()) {
          CheckTensorLayout(report_, "named_data[" + std::to_string(i) + "] \"" + pe.key + "\"", *tl, at(tl));
          layout_of(pe, tl->scalar_type(), tl->sizes(), tl->dim_order());
        }
      }
      if (pe.segment_index < segments_.size()) pe.size = segments_[pe.segment_index].size;
      entries_.push_back(std::move(pe));
    }
  };
  if (ft_) {
    add_named(ft_->named_data());
  } else {
    if (const auto* ts = legacy_->tensors()) {
      entries_.reserve(ts->size() + (legacy_->named_data() ? legacy_->named_data()->size() : 0));
      for (size_t i = 0; i < ts->size(); ++i) {
        const auto* t = ts->Get(static_cast<flatbuffers::uoffset_t>(i));
        PtdEntry pe;
        pe.table_offset = at(t);
        if (!t->fully_qualified_name()) {
          report_.Error("missing-string", "tensors[" + std::to_string(i) + "].fully_qualified_name is missing",
                        pe.table_offset);
          continue;
        }
        pe.key = key_of(t->fully_qualified_name());
        pe.segment_index = t->segment_index();
        pe.offset = t->offset();
        pe.legacy_tensor = true;
        layout_of(pe, t->scalar_type(), t->sizes(), t->dim_order());
        entries_.push_back(std::move(pe));
      }
    }
    add_named(legacy_->named_data());
  }
}

// For each entry, whether an earlier entry has the same key: entry indices
// sorted by (key, index), 4 bytes a key (a hash set of the keys took 32 bytes
// a key and an allocation each; 300,000 keys: 17 MB).
std::vector<bool> PtdFile::LaterDuplicates() const {
  std::vector<uint32_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    int c = entries_[a].key.compare(entries_[b].key);
    return c < 0 || (c == 0 && a < b);
  });
  std::vector<bool> later(entries_.size(), false);
  for (size_t i = 1; i < order.size(); ++i) {
    if (entries_[order[i]].key == entries_[order[i - 1]].key) later[order[i]] = true;
  }
  return later;
}

// Keys unique and UTF-8, segments that exist, shapes that fit them.
void PtdFile::CheckEntries() {
  const std::vector<bool> duplicate = LaterDuplicates();
  for (size_t i = 0; i < entries_.size(); ++i) {
    PtdEntry& e = entries_[i];
    const std::string name = "entry \"" + e.key + "\"";
    if (!IsValidUtf8(e.key.data(), e.key.size())) {
      report_.Error("non-utf8", name + " key is not valid UTF-8", e.table_offset, "UTF-8 text", "invalid bytes");
    }
    if (duplicate[i]) {
      report_.Error("duplicate-key", "key \"" + e.key + "\" appears more than once", e.table_offset, "unique keys",
                    "duplicate");
    }
    if (e.segment_index >= segments_.size()) {
      report_.Error("index-out-of-range", name + " refers to a segment that does not exist", e.table_offset,
                    "< " + std::to_string(segments_.size()), std::to_string(e.segment_index));
      continue;
    }
    uint64_t seg_size = segments_[e.segment_index].size;
    uint64_t need = 0;
    if (e.has_layout) {
      const auto st = static_cast<ScalarType>(e.scalar_type);
      if (ElementSize(st) == 0) {
        report_.Error("bad-enum", name + " has an unknown scalar type", e.table_offset, "a known ScalarType",
                      std::to_string(e.scalar_type));
        continue;
      }
      const std::vector<int32_t> dims = e.sizes.vec();
      const std::optional<uint64_t> n = TensorNbytes(st, dims.data(), dims.size());
      if (!n) {
        report_.Error("bad-shape", name + " has a negative or overflowing shape", e.table_offset);
        continue;
      }
      need = *n;
    }
    if (e.legacy_tensor) e.size = need;
    if (e.offset > seg_size || need > seg_size - e.offset || e.size > seg_size - e.offset) {
      report_.Error("tensor-out-of-range", name + " needs more bytes than its segment holds", e.table_offset,
                    "offset + nbytes <= " + std::to_string(seg_size),
                    std::to_string(e.offset) + " + " + std::to_string(std::max(need, e.size)));
      continue;
    }
    e.valid = segments_[e.segment_index].in_file;
  }
}

void PtdFile::SetLegacyExtents() {
  // Legacy tensors share a segment; each one's extent runs to the next one.
  for (auto& e : entries_) {
    if (!e.legacy_tensor || !e.valid) continue;
    uint64_t end = segments_[e.segment_index].size;
    for (const auto& o : entries_) {
      if (o.legacy_tensor && o.segment_index == e.segment_index && o.offset > e.offset) end = std::min(end, o.offset);
    }
    e.extent = std::max(end - e.offset, e.size);
  }
}

}  // namespace ptepack
