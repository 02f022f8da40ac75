// Size breakdown of .pte and .ptd files (see size.h).
#include "serialize/insight/size.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "ptepack/error.h"
#include "serialize/format/fbtree.h"
#include "serialize/format/pte_format.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

namespace fbs = executorch_flatbuffer;

// a + b, or UINT64_MAX on overflow (offsets from damaged files).
uint64_t SatAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// Attributes every byte of [0, size) to one part. Claims may overlap (shared
// strings, segments sharing data): the claim that starts first owns the
// overlap. Bytes no claim covers go to the gap part of the zone they lie in
// (the innermost zone, i.e. the last added that contains them), or to
// `default_gap`.
class Ledger {
 public:
  explicit Ledger(uint64_t size) : size_(size) {}
  int Part(const std::string& group, const std::string& name) {
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (parts_[i].group == group && parts_[i].name == name) return static_cast<int>(i);
    }
    parts_.push_back({group, name, 0, 0});
    return static_cast<int>(parts_.size() - 1);
  }
  void Claim(uint64_t begin, uint64_t len, int part) {
    begin = std::min(begin, size_);
    uint64_t end = len > size_ - begin ? size_ : begin + len;
    if (end > begin) claims_.push_back({begin, end, part, claims_.size()});
  }
  void Zone(uint64_t begin, uint64_t len, int gap_part) {
    begin = std::min(begin, size_);
    uint64_t end = len > size_ - begin ? size_ : begin + len;
    if (end > begin) zones_.push_back({begin, end, gap_part, zones_.size()});
  }
  // Bytes claimed more than once (counted for the first claim only); valid after Resolve.
  uint64_t overlap() const { return overlap_; }
  std::vector<SizePart> Resolve(int default_gap) {
    std::sort(claims_.begin(), claims_.end(), [](const Range& a, const Range& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.order < b.order;
    });
    uint64_t cursor = 0;
    for (const Range& c : claims_) {
      if (c.begin > cursor) Gap(cursor, c.begin, default_gap);
      overlap_ += std::min(c.end, cursor) > c.begin ? std::min(c.end, cursor) - c.begin : 0;
      if (c.end > cursor) {
        parts_[c.part].bytes += c.end - std::max(c.begin, cursor);
        cursor = c.end;
      }
    }
    Gap(cursor, size_, default_gap);
    std::vector<SizePart> out;
    for (const auto& p : parts_) {
      if (p.bytes > 0) out.push_back(p);
    }
    return out;
  }

 private:
  struct Range {
    uint64_t begin, end;
    int part;
    size_t order;
  };
  // Splits [b, e) at zone boundaries; each piece goes to its innermost zone.
  void Gap(uint64_t b, uint64_t e, int default_gap) {
    while (b < e) {
      const Range* in = nullptr;
      uint64_t next = e;
      for (const Range& z : zones_) {
        if (z.begin <= b && b < z.end) {
          if (!in || z.order > in->order) in = &z;
        }
        if (z.begin > b) next = std::min(next, z.begin);
        if (z.begin <= b && z.end > b) next = std::min(next, z.end);
      }
      parts_[in ? in->part : default_gap].bytes += next - b;
      b = next;
    }
  }
  uint64_t size_;
  uint64_t overlap_ = 0;
  std::vector<SizePart> parts_;
  std::vector<Range> claims_, zones_;
};

enum FbPart {
  kPlans,
  kValues,
  kInstructions,
  kOperators,
  kDelegates,
  kStrings,
  kDebug,
  kLegacyConstants,
  kInlineDelegateData,
  kSegmentTable,
  kProgramTable,
  kFbOther,
  kNumFbParts
};
const char* const kFbPartNames[kNumFbParts] = {"execution plans",
                                               "values",
                                               "instructions",
                                               "operators",
                                               "delegates (ids, compile specs)",
                                               "strings",
                                               "stack traces / debug data",
                                               "inline constants (constant_buffer)",
                                               "delegate inline data",
                                               "segment tables",
                                               "program table",
                                               "other (vtables, offsets, alignment)"};

// Claims the bytes each flatbuffer object owns for its part.
class FlatbufferWalker {
 public:
  FlatbufferWalker(const uint8_t* base, Ledger& ledger) : base_(base), l_(ledger) {
    for (int i = 0; i < kNumFbParts; ++i) ids_[i] = l_.Part("flatbuffer", kFbPartNames[i]);
  }
  int id(FbPart p) const { return ids_[p]; }

  void Program(const fbs::Program& p) {
    Table(&p, kProgramTable, "Program");
    Vec(p.execution_plan(), kPlans);
    if (p.execution_plan()) {
      for (const auto* plan : *p.execution_plan()) Plan(*plan);
    }
    Vec(p.constant_buffer(), kLegacyConstants, /*empty_is_other=*/true);
    if (p.constant_buffer()) {
      for (const auto* b : *p.constant_buffer())
        Table(b, kLegacyConstants, "Buffer"), Vec(b->storage(), kLegacyConstants);
    }
    Vec(p.backend_delegate_data(), kInlineDelegateData, /*empty_is_other=*/true);
    if (p.backend_delegate_data()) {
      for (const auto* d : *p.backend_delegate_data())
        Table(d, kInlineDelegateData, "BackendDelegateInlineData"), Vec(d->data(), kInlineDelegateData);
    }
    Vec(p.segments(), kSegmentTable);
    if (p.segments()) {
      for (const auto* s : *p.segments()) Table(s, kSegmentTable, "DataSegment");
    }
    if (const auto* cs = p.constant_segment())
      Table(cs, kSegmentTable, "SubsegmentOffsets"), Vec(cs->offsets(), kSegmentTable);
    Vec(p.mutable_data_segments(), kSegmentTable);
    if (p.mutable_data_segments()) {
      for (const auto* m : *p.mutable_data_segments())
        Table(m, kSegmentTable, "SubsegmentOffsets"), Vec(m->offsets(), kSegmentTable);
    }
    Vec(p.named_data(), kSegmentTable);
    if (p.named_data()) {
      for (const auto* n : *p.named_data()) Table(n, kSegmentTable, "NamedData"), Str(n->key(), kStrings);
    }
  }

 private:
  void Plan(const fbs::ExecutionPlan& plan) {
    Table(&plan, kPlans, "ExecutionPlan");
    Str(plan.name(), kStrings);
    if (const auto* c = plan.container_meta_type()) {
      Table(c, kPlans, "ContainerMetadata"), Str(c->encoded_inp_str(), kStrings), Str(c->encoded_out_str(), kStrings);
    }
    Vec(plan.values(), kValues);
    if (plan.values()) {
      for (const auto* v : *plan.values()) Value(*v);
    }
    Vec(plan.inputs(), kPlans), Vec(plan.outputs(), kPlans);
    Vec(plan.chains(), kPlans);
    if (plan.chains()) {
      for (const auto* c : *plan.chains()) Chain(*c);
    }
    Vec(plan.operators(), kOperators);
    if (plan.operators()) {
      for (const auto* o : *plan.operators())
        Table(o, kOperators, "Operator"), Str(o->name(), kStrings), Str(o->overload(), kStrings);
    }
    Vec(plan.delegates(), kDelegates, /*empty_is_other=*/true);
    if (plan.delegates()) {
      for (const auto* d : *plan.delegates()) Delegate(*d);
    }
    Vec(plan.non_const_buffer_sizes(), kPlans);
    Vec(plan.non_const_buffer_device(), kPlans);
    if (plan.non_const_buffer_device()) {
      for (const auto* d : *plan.non_const_buffer_device()) Table(d, kPlans, "NonConstBufferDevice");
    }
  }

  void Delegate(const fbs::BackendDelegate& d) {
    Table(&d, kDelegates, "BackendDelegate"), Str(d.id(), kStrings),
        Table(d.processed(), kDelegates, "BackendDelegateDataReference");
    Vec(d.compile_specs(), kDelegates);
    if (!d.compile_specs()) return;
    for (const auto* cs : *d.compile_specs())
      Table(cs, kDelegates, "CompileSpec"), Str(cs->key(), kStrings), Vec(cs->value(), kDelegates);
  }

  void Chain(const fbs::Chain& c) {
    Table(&c, kPlans, "Chain"), Vec(c.inputs(), kPlans), Vec(c.outputs(), kPlans);
    Vec(c.instructions(), kInstructions);
    if (c.instructions()) {
      for (const auto* in : *c.instructions()) {
        Table(in, kInstructions, "Instruction");
        Table(in->instr_args(), kInstructions, fbs::EnumNameInstructionArguments(in->instr_args_type()));
        if (const auto* k = in->instr_args_as_KernelCall()) Vec(k->args(), kInstructions);
        if (const auto* d = in->instr_args_as_DelegateCall()) Vec(d->args(), kInstructions);
      }
    }
    Vec(c.stacktrace(), kDebug);
    if (!c.stacktrace()) return;
    for (const auto* fl : *c.stacktrace()) {
      Table(fl, kDebug, "FrameList"), Vec(fl->items(), kDebug);
      if (!fl->items()) continue;
      for (const auto* f : *fl->items()) {
        Table(f, kDebug, "Frame"), Str(f->filename(), kDebug), Str(f->name(), kDebug), Str(f->context(), kDebug);
      }
    }
  }

  void Value(const fbs::EValue& v) {
    Table(&v, kValues, "EValue");
    Table(v.val(), kValues, fbs::EnumNameKernelTypes(v.val_type()));
    if (!v.val()) return;  // a union tag without a value (the reader reports it)
    using K = fbs::KernelTypes;
    switch (v.val_type()) {
      case K::Tensor: {
        const auto* t = v.val_as_Tensor();
        Vec(t->sizes(), kValues), Vec(t->dim_order(), kValues),
            Table(t->allocation_info(), kValues, "AllocationDetails");
        if (const auto* e = t->extra_tensor_info())
          Table(e, kValues, "ExtraTensorInfo"), Str(e->fully_qualified_name(), kStrings);
        break;
      }
      case K::String:
        Str(v.val_as_String()->string_val(), kStrings);
        break;
      case K::IntList:
        Vec(v.val_as_IntList()->items(), kValues);
        break;
      case K::DoubleList:
        Vec(v.val_as_DoubleList()->items(), kValues);
        break;
      case K::BoolList:
        Vec(v.val_as_BoolList()->items(), kValues);
        break;
      case K::TensorList:
        Vec(v.val_as_TensorList()->items(), kValues);
        break;
      case K::OptionalTensorList:
        Vec(v.val_as_OptionalTensorList()->items(), kValues);
        break;
      default:
        break;
    }
  }

  // A table's inline part: its vtable offset and the fields present, up to
  // the end of the last one. (Not the vtable's object size: writers that
  // share vtables between tables with equal field offsets, like ExecuTorch's
  // Python serializer, leave another table's size there.)
  void Table(const void* t, FbPart part, const char* object) {
    if (!t) return;
    const auto* p = static_cast<const uint8_t*>(t);
    const uint8_t* vt = p - flatbuffers::ReadScalar<flatbuffers::soffset_t>(p);
    const auto vlen = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vt);
    uint64_t end = sizeof(flatbuffers::soffset_t);
    for (const auto& [slot, size] : InlineFields(object)) {
      if (slot + sizeof(flatbuffers::voffset_t) > vlen) continue;
      auto at = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vt + slot);
      if (at != 0) end = std::max<uint64_t>(end, at + size);
    }
    l_.Claim(Off(p), end, ids_[part]);
  }
  // (vtable slot, inline size) of each field of executorch_flatbuffer.<object>.
  static const std::vector<std::pair<uint16_t, uint8_t>>& InlineFields(const char* object) {
    static std::map<std::string, std::vector<std::pair<uint16_t, uint8_t>>> cache;
    auto it = cache.find(object);
    if (it != cache.end()) return it->second;
    std::vector<std::pair<uint16_t, uint8_t>> fields;
    const auto* obj = fb::ProgramSchema().FindObject(std::string("executorch_flatbuffer.") + object);
    // An unknown union tag names no table: only its vtable offset is claimed.
    if (obj) {
      for (const auto* f : *obj->fields()) {
        auto bt = f->type()->base_type();
        size_t size = flatbuffers::IsScalar(bt) ? flatbuffers::GetTypeSize(bt) : sizeof(flatbuffers::uoffset_t);
        fields.emplace_back(f->offset(), static_cast<uint8_t>(size));
      }
    }
    return cache.emplace(object, std::move(fields)).first->second;
  }
  template <typename T>
  void Vec(const flatbuffers::Vector<T>* v, FbPart part, bool empty_is_other = false) {
    if (!v) return;
    const auto* p = reinterpret_cast<const uint8_t*>(v);
    // An empty list of the things a part is named for is only a length field: "other", so
    // that a file with no inline constants or delegates does not show those parts (every
    // current file has an empty constant_buffer, most an empty backend_delegate_data).
    if (v->size() == 0 && empty_is_other) part = kFbOther;
    l_.Claim(Off(p), 4 + uint64_t{v->size()} * ElemSize<T>(), ids_[part]);
  }
  template <typename T>
  static constexpr uint64_t ElemSize() {
    if constexpr (flatbuffers::is_scalar<T>::value) {
      return sizeof(T);
    } else {
      return sizeof(flatbuffers::uoffset_t);  // offsets to tables or strings
    }
  }
  void Str(const flatbuffers::String* s, FbPart part) {
    if (s) l_.Claim(Off(reinterpret_cast<const uint8_t*>(s)), 4 + uint64_t{s->size()} + 1, ids_[part]);
  }
  uint64_t Off(const uint8_t* p) const { return static_cast<uint64_t>(p - base_); }

  const uint8_t* base_;
  Ledger& l_;
  int ids_[kNumFbParts];
};

struct SegmentRole {
  std::string kind;   // "constants", "delegate", "named data", "mutable data", "segment"
  std::string label;  // for the part and the band
};

std::vector<SegmentRole> SegmentRoles(const fbs::Program& p, size_t n) {
  std::vector<SegmentRole> roles(n, {"segment", "unreferenced segments"});
  auto set = [&](uint64_t i, std::string kind, std::string label) {
    if (i < n && roles[i].kind == "segment") roles[i] = {std::move(kind), std::move(label)};
  };
  if (const auto* cs = p.constant_segment(); cs && cs->offsets() && cs->offsets()->size() > 0) {
    set(cs->segment_index(), "constants", "constants");
  }
  if (p.mutable_data_segments()) {
    for (const auto* m : *p.mutable_data_segments()) set(m->segment_index(), "mutable data", "mutable data");
  }
  if (p.execution_plan()) {
    for (const auto* plan : *p.execution_plan()) {
      if (!plan->delegates()) continue;
      for (const auto* d : *plan->delegates()) {
        if (d->processed() && d->processed()->location() == fbs::DataLocation::SEGMENT) {
          set(d->processed()->index(), "delegate", "delegate " + (d->id() ? d->id()->str() : std::string("?")));
        }
      }
    }
  }
  if (p.named_data()) {
    for (const auto* nd : *p.named_data()) set(nd->segment_index(), "named data", "named data");
  }
  return roles;
}

bool IsExternal(const fbs::Tensor& t) {
  return t.extra_tensor_info() && t.extra_tensor_info()->location() == fbs::TensorDataLocation::EXTERNAL;
}

// For each data_buffer_idx: the most bytes a constant (or mutable) tensor reads from it.
std::map<uint32_t, uint64_t> BufferUse(const fbs::Program& p, bool mutable_state) {
  std::map<uint32_t, uint64_t> use;
  if (!p.execution_plan()) return use;
  for (const auto* plan : *p.execution_plan()) {
    if (!plan->values()) continue;
    for (const auto* v : *plan->values()) {
      const auto* t = v->val_as_Tensor();
      if (!t || t->data_buffer_idx() == 0 || IsExternal(*t)) continue;
      if ((t->allocation_info() != nullptr) != mutable_state) continue;
      uint64_t& u = use[t->data_buffer_idx()];
      u = std::max(u, TensorNbytes(*t).value_or(0));
    }
  }
  return use;
}

// Claims the used bytes of each sub-buffer of a subsegmented segment; the
// rest of the segment is its alignment padding.
void ClaimSubsegments(Ledger& l, const SegmentSpan& seg, const flatbuffers::Vector<uint64_t>* offsets,
                      const std::map<uint32_t, uint64_t>& use, int data_part, int pad_part) {
  l.Zone(seg.file_offset, seg.size, pad_part);
  if (!offsets) return;
  std::set<uint64_t> starts(offsets->begin(), offsets->end());
  for (uint32_t i = 0; i < offsets->size(); ++i) {
    uint64_t o = offsets->Get(i);
    if (o >= seg.size) continue;
    auto next = starts.upper_bound(o);
    uint64_t extent = (next == starts.end() ? seg.size : *next) - o;
    auto it = use.find(i);
    uint64_t used = it != use.end() ? std::min(extent, it->second) : (i == 0 ? 0 : extent);
    l.Claim(SatAdd(seg.file_offset, o), used, data_part);
  }
}

// Rounds each part's share to 0.1 % so that the shares add to exactly 100.0
// (largest remainder).
void AssignPercents(std::vector<SizePart>& parts, uint64_t total) {
  if (total == 0) return;
  std::vector<std::pair<long double, size_t>> rem;
  uint64_t sum = 0;
  std::vector<uint64_t> tenths(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    long double exact = static_cast<long double>(parts[i].bytes) * 1000 / total;
    tenths[i] = static_cast<uint64_t>(exact);
    sum += tenths[i];
    rem.push_back({exact - tenths[i], i});
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; sum < 1000 && k < rem.size(); ++k, ++sum) tenths[rem[k].second]++;
  for (size_t i = 0; i < parts.size(); ++i) parts[i].percent = tenths[i] / 10.0;
}

// Bands: header, flatbuffer, then segments in file order with the padding between them.
std::vector<SizeBand> Bands(uint64_t file_size, uint64_t header_end, uint64_t fb_end, const std::string& fb_kind,
                            std::vector<SizeBand> segs) {
  std::vector<SizeBand> out;
  header_end = std::min(header_end, file_size);
  fb_end = std::min(std::max(fb_end, header_end), file_size);
  if (header_end > 0) out.push_back({"header", "header", 0, header_end});
  if (fb_end > header_end) out.push_back({fb_kind, fb_kind, header_end, fb_end - header_end});
  std::stable_sort(segs.begin(), segs.end(), [](const SizeBand& a, const SizeBand& b) { return a.offset < b.offset; });
  uint64_t cursor = fb_end;
  for (SizeBand s : segs) {
    if (s.size == 0) continue;  // an empty segment takes no bytes: no band
    uint64_t end = std::min(file_size, SatAdd(s.offset, s.size));
    if (end <= cursor) continue;  // shares its bytes with an earlier segment, or outside the file
    if (s.offset > cursor) out.push_back({"padding", "padding", cursor, s.offset - cursor});
    s.offset = std::max(s.offset, cursor);
    s.size = end - s.offset;
    cursor = end;
    out.push_back(std::move(s));
  }
  if (cursor < file_size) out.push_back({"padding", "padding", cursor, file_size - cursor});
  return out;
}

FileSize PteParts(const PteFile& pte) {
  const fbs::Program& p = *pte.program();
  FileSize fs;
  fs.file = pte.name();
  fs.file_size = pte.file_size();
  Ledger l(fs.file_size);
  const uint64_t header_end = pte.header_size();  // README, "Sizes"
  l.Claim(0, header_end, l.Part("header", "header"));
  FlatbufferWalker w(pte.file().data, l);
  w.Program(p);
  l.Zone(0, pte.program_size(), w.id(kFbOther));
  const auto& segs = pte.segments();
  std::vector<SegmentRole> roles = SegmentRoles(p, segs.size());
  uint64_t last_end = pte.program_size();
  std::vector<SizeBand> seg_bands;
  for (size_t i = 0; i < segs.size(); ++i) {
    const SegmentSpan& s = segs[i];
    last_end = std::max(last_end, SatAdd(s.file_offset, s.size));
    seg_bands.push_back({roles[i].kind, "segment " + std::to_string(i) + ": " + roles[i].label, s.file_offset, s.size});
    if (roles[i].kind == "constants") {
      ClaimSubsegments(l, s, p.constant_segment()->offsets(), BufferUse(p, false), l.Part("segments", "constants"),
                       l.Part("padding", "constant tensor alignment"));
    } else if (roles[i].kind == "mutable data") {
      // The runtime reads initial states from mutable_data_segments[0] only.
      const auto* mds = p.mutable_data_segments();
      uint32_t k = 0;
      while (mds->Get(k)->segment_index() != i) ++k;
      ClaimSubsegments(l, s, mds->Get(k)->offsets(), k == 0 ? BufferUse(p, true) : std::map<uint32_t, uint64_t>{},
                       l.Part("segments", "mutable data"), l.Part("padding", "mutable data alignment"));
    } else {
      l.Claim(s.file_offset, s.size, l.Part("segments", roles[i].label));
    }
  }
  l.Zone(last_end, fs.file_size, l.Part("padding", "after the last segment"));
  fs.parts = l.Resolve(l.Part("padding", "segment alignment"));
  fs.shared_bytes = l.overlap();
  AssignPercents(fs.parts, fs.file_size);
  fs.bands = Bands(fs.file_size, header_end, pte.program_size(), "flatbuffer", std::move(seg_bands));
  return fs;
}

std::string Location(const fbs::Program& p, const fbs::Tensor& t) {
  if (IsExternal(t)) return "external";
  if (t.allocation_info()) return "mutable data";
  const auto* cs = p.constant_segment();
  return cs && cs->offsets() && cs->offsets()->size() > 0 ? "constant segment" : "constant_buffer (inline)";
}

void AddTensors(const PteFile& pte, const std::vector<const PtdFile*>& ptds, SizeReport& r) {
  const fbs::Program& p = *pte.program();
  std::map<std::string, size_t> seen;  // location + buffer index or key -> r.tensors index
  if (p.execution_plan()) {
    for (const auto* plan : *p.execution_plan()) {
      if (!plan->values()) continue;
      for (uint32_t vi = 0; vi < plan->values()->size(); ++vi) {
        const auto* t = plan->values()->Get(vi)->val_as_Tensor();
        if (!t || (t->data_buffer_idx() == 0 && !IsExternal(*t))) continue;
        const auto* eti = t->extra_tensor_info();
        std::string name = eti && eti->fully_qualified_name() ? eti->fully_qualified_name()->str() : "";
        std::string loc = Location(p, *t);
        std::string key = loc + "/" + (IsExternal(*t) ? name : std::to_string(t->data_buffer_idx()));
        if (auto it = seen.find(key); it != seen.end()) {
          r.tensors[it->second].uses++;
          continue;
        }
        if (loc == "external") {
          for (const PtdFile* ptd : ptds) {
            if (ptd->Has(name)) loc = "external " + std::filesystem::path(ptd->name()).filename().string();
          }
        }
        SizeTensor st{plan->name() ? plan->name()->str() : "",
                      vi,
                      name,
                      ScalarTypeName(int(t->scalar_type())),
                      {},
                      loc,
                      TensorNbytes(*t).value_or(0),
                      1};
        if (t->sizes()) st.shape.assign(t->sizes()->begin(), t->sizes()->end());
        seen[key] = r.tensors.size();
        r.tensors.push_back(std::move(st));
      }
    }
  }
  if (p.named_data()) {
    for (const auto* nd : *p.named_data()) {
      uint64_t bytes = nd->segment_index() < pte.segments().size() ? pte.segments()[nd->segment_index()].size : 0;
      r.tensors.push_back({"",
                           -1,
                           nd->key() ? nd->key()->str() : "",
                           "",
                           {},
                           "named data (segment " + std::to_string(nd->segment_index()) + ")",
                           bytes,
                           1});
    }
  }
  std::stable_sort(r.tensors.begin(), r.tensors.end(),
                   [](const SizeTensor& a, const SizeTensor& b) { return a.bytes > b.bytes; });
}

void AddDelegates(const PteFile& pte, SizeReport& r) {
  const fbs::Program& p = *pte.program();
  if (!p.execution_plan()) return;
  for (const auto* plan : *p.execution_plan()) {
    if (!plan->delegates()) continue;
    for (uint32_t i = 0; i < plan->delegates()->size(); ++i) {
      const auto* d = plan->delegates()->Get(i);
      SizeDelegate sd{plan->name() ? plan->name()->str() : "",
                      i,
                      d->id() ? d->id()->str() : "",
                      "",
                      0,
                      d->compile_specs() ? d->compile_specs()->size() : 0};
      if (const auto* ref = d->processed()) {
        uint32_t k = ref->index();
        if (ref->location() == fbs::DataLocation::SEGMENT) {
          sd.location = "segment " + std::to_string(k);
          sd.bytes = k < pte.segments().size() ? pte.segments()[k].size : 0;
        } else {
          sd.location = "inline " + std::to_string(k);
          const auto* bdd = p.backend_delegate_data();
          sd.bytes = bdd && k < bdd->size() && bdd->Get(k)->data() ? bdd->Get(k)->data()->size() : 0;
        }
      }
      r.delegates.push_back(std::move(sd));
    }
  }
  std::stable_sort(r.delegates.begin(), r.delegates.end(),
                   [](const SizeDelegate& a, const SizeDelegate& b) { return a.bytes > b.bytes; });
}

}  // namespace

FileSize AnalyzePtdSize(const PtdFile& ptd) {
  ptd.report().ThrowIfError();  // its first error, located; `ptepack verify` lists them all
  FileSize fs;
  fs.file = ptd.name();
  fs.file_size = ptd.file_size();
  Ledger l(fs.file_size);
  const FlatTensorHeader& h = ptd.header();
  const uint64_t header_end = 8 + h.length;
  const uint64_t fb_end = SatAdd(h.flatbuffer_offset, h.flatbuffer_size);
  l.Claim(0, header_end, l.Part("header", "header"));
  l.Zone(0, fb_end, l.Part("flatbuffer", "tensor metadata (flatbuffer)"));
  uint64_t last_end = fb_end;
  std::vector<SizeBand> bands;
  for (size_t i = 0; i < ptd.segments().size(); ++i) {
    const SegmentSpan& s = ptd.segments()[i];
    l.Zone(s.file_offset, s.size, l.Part("padding", "tensor alignment"));
    last_end = std::max(last_end, SatAdd(s.file_offset, s.size));
    bands.push_back({"segment", "segment " + std::to_string(i), s.file_offset, s.size});
  }
  for (const PtdEntry& e : ptd.entries()) {
    if (e.segment_index >= ptd.segments().size()) continue;
    uint64_t at = SatAdd(ptd.segments()[e.segment_index].file_offset, e.offset);
    l.Claim(at, e.size, l.Part("data", e.has_layout ? "tensors" : "named data"));
  }
  l.Zone(last_end, fs.file_size, l.Part("padding", "after the last segment"));
  fs.parts = l.Resolve(l.Part("padding", "segment alignment"));
  fs.shared_bytes = l.overlap();
  AssignPercents(fs.parts, fs.file_size);
  fs.bands = Bands(fs.file_size, header_end, fb_end, "flatbuffer", std::move(bands));
  return fs;
}

SizeReport AnalyzeSize(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  // Only files the reader accepted: the walker follows the program's tables
  // and unions, which a file with errors (an unknown union tag, segments past
  // its end) cannot be trusted for.
  pte.report().ThrowIfError();  // its first error, located; `ptepack verify` lists them all
  SizeReport r;
  r.pte = PteParts(pte);
  for (const PtdFile* ptd : ptds) r.ptds.push_back(AnalyzePtdSize(*ptd));
  AddTensors(pte, ptds, r);
  AddDelegates(pte, r);
  r.memory = AnalyzeMemory(pte, ptds);
  return r;
}

}  // namespace ptepack
