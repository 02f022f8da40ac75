#include "serialize/format/fbtree.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <unordered_map>

#include "ptepack/error.h"
#include "serialize/io/bytes_source.h"

namespace ptepack::schema {
extern const uint8_t k_program_bfbs[];
extern const size_t k_program_bfbs_size;
extern const uint8_t k_flat_tensor_bfbs[];
extern const size_t k_flat_tensor_bfbs_size;
extern const uint8_t k_flat_tensor_legacy_bfbs[];
extern const size_t k_flat_tensor_legacy_bfbs_size;
extern const uint8_t k_bundled_program_bfbs[];
extern const size_t k_bundled_program_bfbs_size;
}  // namespace ptepack::schema

namespace ptepack::fb {
namespace {

[[noreturn]] void Fail(const std::string& msg) { throw Error("fbtree", msg); }

bool IsScalarType(reflection::BaseType t) { return t >= reflection::UType && t <= reflection::Double; }

uint64_t ReadBits(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  std::memcpy(&v, p, n);  // little-endian host assumed (checked at build)
  return v;
}

// Sign- or zero-extends a raw value of type t into int64.
int64_t ToInt(reflection::BaseType t, uint64_t bits) {
  switch (t) {
    case reflection::Byte:
      return static_cast<int8_t>(bits);
    case reflection::Short:
      return static_cast<int16_t>(bits);
    case reflection::Int:
      return static_cast<int32_t>(bits);
    case reflection::Long:
      return static_cast<int64_t>(bits);
    default:
      return static_cast<int64_t>(bits);
  }
}

size_t FieldSize(const reflection::Field& f) {
  auto t = f.type()->base_type();
  return IsScalarType(t) ? ScalarSize(t) : 4;
}

size_t PaddingBytes(size_t size, size_t align) { return (~size + 1) & (align - 1); }

// A FlatBuffers builder that grows downward, written to mirror the layout
// decisions of flatc (C++ FlatBufferBuilder) and of the Python Builder.
class Emitter {
 public:
  Emitter(Order order, size_t initial) : order_(order), buf_(initial), cap_(initial), head_(initial) {}

  size_t size() const { return cap_ - head_; }
  size_t minalign() const { return minalign_; }

  void Reserve(size_t n) {
    if (head_ < n) Grow(n);
  }
  // Asked once, when the buffer first grows past kHintFrom: the size the
  // whole buffer will likely need (see MeasureTree).
  void SetSizeHint(std::function<size_t()> hint) { hint_ = std::move(hint); }
  static constexpr size_t kHintFrom = size_t{2} << 20;
  __attribute__((noinline)) void Grow(size_t n) {
    size_t used = size();
    size_t cap = std::max(cap_ * 2, used + n + 1024);
    if (hint_ && cap > kHintFrom) {
      cap = std::max(cap, hint_());
      hint_ = nullptr;
    }
    std::vector<uint8_t> nb(cap);
    std::memcpy(nb.data() + cap - used, buf_.data() + head_, used);
    buf_.swap(nb);
    cap_ = cap;
    head_ = cap - used;
  }
  void PushBytes(const uint8_t* p, size_t n) {
    Reserve(n);
    head_ -= n;
    if (n) std::memcpy(&buf_[head_], p, n);
  }
  // Bytes below head_ were never written (buf_ starts zeroed, Reserve
  // copies only the used part into a zeroed buffer): padding is already 0.
  void Pad(size_t n) {
    Reserve(n);
    head_ -= n;
  }
  // flatc's C++ builder (since 2.0.7) ignores alignment requests for
  // zero-length data; older flatc and the Python builder honour them.
  void PreAlign(size_t len, size_t align) {
    if (len == 0 && order_ == Order::kFlatc) return;
    Align(len, align);
  }
  void Align(size_t a) { Align(0, a); }
  void Align(size_t len, size_t align) {
    minalign_ = std::max(minalign_, align);
    Pad(PaddingBytes(size() + len, align));
  }
  // Aligned to its own size, as Align(n) then the bytes, with one Reserve
  // (the padding below head_ is already 0, see Pad).
  uint32_t PushScalar(uint64_t bits, size_t n) {
    minalign_ = std::max(minalign_, n);
    const size_t pad = PaddingBytes(size(), n);
    Reserve(pad + n);
    head_ -= pad + n;
    switch (n) {  // fixed sizes: the copies are single stores
      case 1:
        buf_[head_] = static_cast<uint8_t>(bits);
        break;
      case 2:
        std::memcpy(&buf_[head_], &bits, 2);
        break;
      case 4:
        std::memcpy(&buf_[head_], &bits, 4);
        break;
      default:
        std::memcpy(&buf_[head_], &bits, n);
        break;
    }
    return static_cast<uint32_t>(size());
  }
  uint32_t ReferTo(uint32_t off) {
    Align(4);
    return static_cast<uint32_t>(size() - off + 4);
  }

  void StartTable() {
    table_start_ = static_cast<uint32_t>(size());
    fields_.clear();
    max_voffset_ = 0;
  }
  void AddScalar(uint16_t voff, uint64_t bits, size_t n) { Track(voff, PushScalar(bits, n)); }
  void AddOffset(uint16_t voff, uint32_t off) { Track(voff, PushScalar(ReferTo(off), 4)); }

  uint32_t EndTable() {
    uint32_t vtloc = PushScalar(0, 4);
    uint16_t vtsize = std::max<uint16_t>(static_cast<uint16_t>(max_voffset_ + 2), 4);
    // vt_ is reused and all zeros between tables: only the entries set here
    // are cleared again below (a memset of it per table was 1.1M
    // instructions of a 20,000-value program).
    const size_t n = vtsize / 2;
    if (vt_.size() < n) vt_.resize(n);
    uint16_t* vt = vt_.data();
    vt[0] = vtsize;
    vt[1] = static_cast<uint16_t>(vtloc - table_start_);
    for (auto& [voff, loc] : fields_) vt[voff / 2] = static_cast<uint16_t>(vtloc - loc);
    uint32_t vt_use = 0;
    if (!IsPython(order_)) {
      // flatc scans its vtables for an identical one; no two are identical,
      // so the one found by its bytes' hash is the same (the scan, a memcmp
      // per vtable per table, was 6M instructions of a 20,000-value program).
      const uint32_t h = HashVtable(vt, n);
      size_t slot = FindVtable(vt, vtsize, h);
      vt_use = vt_slots_[slot].pos;
      if (vt_use == 0) {
        PushBytes(reinterpret_cast<const uint8_t*>(vt), vtsize);
        vt_use = static_cast<uint32_t>(size());
        vt_slots_[slot] = {vt_use, h};
        if (++vt_count_ * 2 > vt_slots_.size()) RehashVtables();
      }
    } else {
      // The Python builder keys its vtables by the field offsets; from
      // flatbuffers 25.12.19 on, by the object size too.
      std::vector<uint16_t> key(vt + 2, vt + n);
      if (order_ == Order::kPythonObjectApi2026) key.push_back(vt[1]);
      auto it = py_vtables_.find(key);
      if (it != py_vtables_.end()) {
        vt_use = it->second;
      } else {
        PushBytes(reinterpret_cast<const uint8_t*>(vt), vtsize);
        vt_use = static_cast<uint32_t>(size());
        py_vtables_.emplace(std::move(key), vt_use);
      }
    }
    vt[0] = vt[1] = 0;
    for (auto& field : fields_) vt[field.first / 2] = 0;
    int32_t soff = static_cast<int32_t>(vt_use) - static_cast<int32_t>(vtloc);
    std::memcpy(&buf_[cap_ - vtloc], &soff, 4);
    return vtloc;
  }

  void StartVector(size_t len_bytes, size_t elemsize, size_t force_align, size_t count) {
    (void)count;
    if (force_align > 1) PreAlign(len_bytes, force_align);
    PreAlign(len_bytes, 4);
    PreAlign(len_bytes, elemsize);
  }
  uint32_t CreateScalarVector(const uint8_t* data, size_t count, size_t elemsize, size_t force_align) {
    StartVector(count * elemsize, elemsize, force_align, count);
    PushBytes(data, count * elemsize);
    return PushScalar(count, 4);
  }
  uint32_t CreateOffsetVector(const std::vector<uint32_t>& offs, size_t force_align) {
    StartVector(offs.size() * 4, 4, force_align, offs.size());
    for (size_t i = offs.size(); i-- > 0;) PushScalar(ReferTo(offs[i]), 4);
    return PushScalar(offs.size(), 4);
  }
  uint32_t CreateString(std::string_view s) {
    PreAlign(s.size() + 1, 4);
    Pad(1);
    PushBytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    return PushScalar(s.size(), 4);
  }
  std::vector<uint8_t> Finish(uint32_t root, const std::string& ident) {
    PreAlign(4 + (ident.empty() ? 0 : 4), minalign_);
    if (!ident.empty()) PushBytes(reinterpret_cast<const uint8_t*>(ident.data()), 4);
    PushScalar(ReferTo(root), 4);
    // The finished bytes moved to the front of the buffer and the buffer
    // returned: a copy of them held two flatbuffers at once (26 MB each for a
    // split of 300,000 constants). The spare capacity behind them lets the
    // caller insert a header in place.
    const size_t used = size();
    std::memmove(buf_.data(), buf_.data() + head_, used);
    buf_.resize(used);
    cap_ = used;
    head_ = 0;
    return std::move(buf_);
  }

 private:
  std::function<size_t()> hint_;
  void Track(uint16_t voff, uint32_t loc) {
    fields_.emplace_back(voff, loc);
    max_voffset_ = std::max(max_voffset_, voff);
  }
  Order order_;
  std::vector<uint8_t> buf_;
  size_t cap_;  // buf_.size(), kept here: read for every scalar
  size_t head_;
  size_t minalign_ = 1;
  uint32_t table_start_ = 0;
  uint16_t max_voffset_ = 0;
  std::vector<std::pair<uint16_t, uint32_t>> fields_;
  std::vector<uint16_t> vt_;
  // flatc's vtables (their positions from the end of the buffer), found by
  // hash: open addressing, at most half full, pos 0 = empty slot.
  struct VtSlot {
    uint32_t pos = 0;
    uint32_t hash = 0;
  };
  std::vector<VtSlot> vt_slots_ = std::vector<VtSlot>(64);
  size_t vt_count_ = 0;
  static uint32_t HashVtable(const uint16_t* vt, size_t n) {
    uint32_t h = 2166136261u;  // FNV-1a over the 16-bit entries
    for (size_t i = 0; i < n; ++i) h = (h ^ vt[i]) * 16777619u;
    return h;
  }
  // The slot holding the vtable equal to `vt`, or the empty slot to put it in.
  size_t FindVtable(const uint16_t* vt, uint16_t vtsize, uint32_t h) const {
    const size_t mask = vt_slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const VtSlot& s = vt_slots_[i];
      if (s.pos == 0) return i;
      if (s.hash != h) continue;
      const uint8_t* old = &buf_[cap_ - s.pos];
      uint16_t old_size;
      std::memcpy(&old_size, old, 2);
      if (old_size == vtsize && std::memcmp(old, vt, vtsize) == 0) return i;
    }
  }
  void RehashVtables() {
    std::vector<VtSlot> old(vt_slots_.size() * 2);
    old.swap(vt_slots_);
    const size_t mask = vt_slots_.size() - 1;
    for (const VtSlot& s : old) {
      if (s.pos == 0) continue;
      size_t i = s.hash & mask;
      while (vt_slots_[i].pos != 0) i = (i + 1) & mask;
      vt_slots_[i] = s;
    }
  }
  std::map<std::vector<uint16_t>, uint32_t> py_vtables_;
};

class Encoder {
 public:
  Encoder(const Schema& s, const EncodeOptions& o)
      : s_(s), o_(o), e_(o.order, std::max<size_t>(4096, std::min<size_t>(o.size_hint, size_t{1} << 31))) {}

  // Found once per field and encode (a name built and looked up per vector
  // was 4% of encoding a 20,000-value program).
  size_t ForceAlign(const reflection::Object& obj, const reflection::Field& f) {
    auto it = force_align_.find(&f);
    if (it != force_align_.end()) return it->second;
    size_t a = FindForceAlign(obj, f);
    force_align_.emplace(&f, a);
    return a;
  }

  size_t FindForceAlign(const reflection::Object& obj, const reflection::Field& f) const {
    std::string name = obj.name()->str();
    auto dot = name.rfind('.');
    std::string key = (dot == std::string::npos ? name : name.substr(dot + 1)) + "." + f.name()->str();
    auto it = o_.force_align.find(key);
    if (it != o_.force_align.end()) return it->second;
    if (f.attributes()) {
      if (auto* kv = f.attributes()->LookupByKey("force_align")) {
        return std::stoul(kv->value()->str());
      }
    }
    return 1;
  }

  size_t MaxForceAlign() const {
    size_t m = 1;
    for (auto* obj : *s_.raw().objects()) {
      for (auto* f : *obj->fields()) m = std::max(m, FindForceAlign(*obj, *f));
    }
    return m;
  }

  // What encoding needs of one field, read from the schema once.
  struct FieldPlan {
    const reflection::Field* f = nullptr;  // null: no field with this id
    reflection::BaseType type = reflection::None;
    uint16_t voffset = 0;
    uint8_t size = 0;  // scalars
    // Integer scalars: the default's bits under the size's mask (IsDefault,
    // without reading the schema per table); floats ask IsDefault.
    bool is_float = false;
    uint64_t mask = 0;
    uint64_t default_bits = 0;
    bool Default(uint64_t bits) const { return is_float ? IsDefault(*f, bits) : (bits & mask) == default_bits; }
  };
  // An object's fields by id, and the order flatc adds them in: largest
  // first, in reverse declaration order within one size. Found once per
  // object and encode (reading them from the schema for every table was a
  // quarter of encoding a 20,000-value program).
  struct ObjectPlan {
    std::vector<FieldPlan> fields;
    std::vector<uint16_t> flatc_order;
    std::vector<uint16_t> offset_ids;  // the fields that are not scalars, by id: made first
  };
  // A direct-mapped cache in front of plans_ (the hash lookup per table was
  // 1.2M instructions of a 20,000-value program); plans_ never moves a plan.
  const ObjectPlan& PlanOf(const reflection::Object& obj) {
    PlanSlot& slot = plan_cache_[(reinterpret_cast<uintptr_t>(&obj) / 4) % kPlanCache];
    if (slot.obj == &obj) return *slot.plan;
    const ObjectPlan& plan = FindPlan(obj);
    slot = {&obj, &plan};
    return plan;
  }
  const ObjectPlan& FindPlan(const reflection::Object& obj) {
    auto it = plans_.find(&obj);
    if (it != plans_.end()) return it->second;
    ObjectPlan plan;
    const auto& fields = s_.FieldsById(obj);
    plan.fields.resize(fields.size());
    for (size_t id = 0; id < fields.size(); ++id) {
      if (const reflection::Field* f = fields[id]) {
        FieldPlan& fp = plan.fields[id];
        fp.f = f;
        fp.type = f->type()->base_type();
        fp.voffset = f->offset();
        fp.size = IsScalarType(fp.type) ? static_cast<uint8_t>(ScalarSize(fp.type)) : 0;
        fp.is_float = fp.type == reflection::Float || fp.type == reflection::Double;
        if (fp.size != 0 && !fp.is_float) {
          fp.mask = fp.size == 8 ? ~0ull : ((1ull << (8 * fp.size)) - 1);
          fp.default_bits = static_cast<uint64_t>(f->default_integer()) & fp.mask;
        }
      }
    }
    for (size_t id = 0; id < fields.size(); ++id) {
      if (plan.fields[id].f != nullptr && plan.fields[id].size == 0)
        plan.offset_ids.push_back(static_cast<uint16_t>(id));
    }
    for (size_t size = 8; size > 0; size /= 2) {
      for (size_t id = fields.size(); id-- > 0;) {
        if (fields[id] && FieldSize(*fields[id]) == size) plan.flatc_order.push_back(static_cast<uint16_t>(id));
      }
    }
    return plans_.emplace(&obj, std::move(plan)).first->second;
  }

  uint32_t EncodeTable(const Table& t) {
    const ObjectPlan& plan = PlanOf(*t.def);
    const auto& fields = plan.fields;
    const size_t nf = fields.size();  // read once: the buffer's byte stores may alias anything
    if (t.fields.size() != nf) Fail("table " + t.def->name()->str() + " has wrong field count");
    uint32_t small[16];  // child[id] is read only for the fields set below
    std::vector<uint32_t> large;
    if (nf > 16) large.assign(nf, 0);
    uint32_t* child = large.empty() ? small : large.data();
    for (uint16_t id : plan.offset_ids) {
      const Value& v = t.fields[id];
      const FieldPlan& fp = fields[id];
      if (!v.present()) continue;
      switch (fp.type) {
        case reflection::String:
          child[id] = e_.CreateString(v.str_view());
          break;
        case reflection::Obj:
        case reflection::Union:
          child[id] = EncodeChild(v, *fp.f);
          break;
        case reflection::Vector:
          child[id] = EncodeVector(*t.def, *fp.f, v);
          break;
        default:
          child[id] = 0;
          break;
      }
    }
    e_.StartTable();
    auto add = [&](size_t id) {
      const Value& v = t.fields[id];
      const FieldPlan& fp = fields[id];
      if (fp.f == nullptr || !v.present()) return;
      if (fp.size != 0) {
        if (!fp.Default(v.bits())) e_.AddScalar(fp.voffset, v.bits(), fp.size);
      } else {
        e_.AddOffset(fp.voffset, child[id]);
      }
    };
    if (!IsPython(o_.order)) {
      for (uint16_t id : plan.flatc_order) add(id);
    } else {
      for (size_t id = 0; id < nf; ++id) add(id);
    }
    return e_.EndTable();
  }

  // A lazy table is decoded for its encode alone (Peek), its own children
  // likewise: encoding a DecodeOnDemand tree holds one path of it.
  uint32_t EncodeChild(const Value& v, const reflection::Field& f) {
    const PeekedTable t = Peek(v);
    if (!t) Fail("field " + f.name()->str() + " has no table");
    return EncodeTable(*t);
  }

  uint32_t EncodeVector(const reflection::Object& obj, const reflection::Field& f, const Value& v) {
    auto et = f.type()->element();
    size_t force = ForceAlign(obj, f);
    if (IsScalarType(et)) {
      size_t es = ScalarSize(et);
      if (v.scalars_size() % es != 0) Fail("vector " + f.name()->str() + " has a partial element");
      return e_.CreateScalarVector(v.scalars_data(), v.scalars_size() / es, es, force);
    }
    std::vector<uint32_t> offs;
    offs.reserve(ElementCount(v));
    ForEachElement(v, [&](const Value& e) {
      if (et == reflection::String) {
        offs.push_back(e_.CreateString(e.str_view()));
      } else if (et == reflection::Obj && e.kind == Value::Kind::kTable) {
        offs.push_back(EncodeChild(e, f));
      } else {
        Fail("unsupported vector element in " + f.name()->str());
      }
    });
    return e_.CreateOffsetVector(offs, force);
  }

  Encoded Run(const Table& root) {
    // Asked only by trees whose buffer grows past 2 MiB (the estimate is a
    // walk of the whole tree: 6 % of ProgramBuilder's instructions for a
    // 1.4 MB program, which the doublings up to 2 MiB cost less than). At
    // most the 2 GiB a flatbuffer's offsets reach: a larger tree fails as it
    // did, when its buffer grows past that.
    if (o_.size_hint == 0) {
      e_.SetSizeHint(
          [&root] { return static_cast<size_t>(std::min<uint64_t>(MeasureTree(root).estimate, uint64_t{1} << 31)); });
    }
    uint32_t r = EncodeTable(root);
    Encoded out;
    out.data = e_.Finish(r, s_.FileIdent());
    out.max_force_align = MaxForceAlign();
    return out;
  }

 private:
  const Schema& s_;
  const EncodeOptions& o_;
  Emitter e_;
  std::unordered_map<const reflection::Field*, size_t> force_align_;
  std::unordered_map<const reflection::Object*, ObjectPlan> plans_;
  struct PlanSlot {
    const reflection::Object* obj = nullptr;
    const ObjectPlan* plan = nullptr;
  };
  static constexpr size_t kPlanCache = 64;
  PlanSlot plan_cache_[kPlanCache];
};

uint64_t Padded4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

// MeasureTree's walk. The estimate lets a large buffer grow once past 2 MiB
// to its size: it grew by doubling, and a 26 MB program had its 16 MB buffer
// copied into a 32 MB one, both resident (and the 8 and 16 MB ones left among
// the heap's free pages). A table is its offset to the vtable, its fields
// (defaults too) and room to align them; strings and vectors are their
// length, bytes and padding (force_align is not looked up: what it adds past
// the estimate grows the buffer as before). Vtables are not counted: the
// tables of a program share a few. Read from the values alone, without the
// schema (looking the plan up per table made it a third of the encode).
void Measure(const Table& t, TreeSize& s);

// What Measure counts of each kind of field; the flatbuffer's own reading of
// an unchanged lazy table (Decoder::MeasureUnchanged) counts the same.
// A table adds 8, a scalar its size, a child table its 4-byte offset (and
// itself), an offset vector's element its 4-byte offset (and itself).
void CountString(TreeSize& s, uint64_t n, bool element) {
  s.payload += 4 + n + 1;
  s.estimate += (element ? 0 : 4) + Padded4(4 + n + 1);  // an element's offset is counted with it
}
void CountScalarVector(TreeSize& s, uint64_t bytes) {
  s.payload += 4 + bytes;
  s.estimate += 4 + 8 + Padded4(bytes);
}
void CountOffsetVector(TreeSize& s, uint64_t count) {
  s.payload += 4 + 4 * count;
  s.estimate += 4 + 8;
}

// A lazy table is measured in its flatbuffer when no change reaches it,
// else decoded to be measured, and not kept (after Decoder, below).
void MeasureChild(const Value& v, TreeSize& s);

void Measure(const Table& t, TreeSize& s) {
  s.estimate += 8;
  for (const Value& v : t.fields) {
    switch (v.kind) {
      case Value::Kind::kScalar:
        s.estimate += ScalarSize(v.type);
        break;
      case Value::Kind::kString:
        CountString(s, v.scalars_size(), false);
        break;
      case Value::Kind::kTable:
        s.estimate += 4;
        MeasureChild(v, s);
        break;
      case Value::Kind::kScalarVector:
        CountScalarVector(s, v.scalars_size());
        break;
      case Value::Kind::kOffsetVector:
        CountOffsetVector(s, ElementCount(v));
        ForEachElement(v, [&s](const Value& e) {
          s.estimate += 4;
          if (e.kind == Value::Kind::kTable) MeasureChild(e, s);
          if (e.kind == Value::Kind::kString) CountString(s, e.scalars_size(), true);
        });
        break;
      case Value::Kind::kAbsent:
        break;
    }
  }
}

}  // namespace

// What a lazily decoded table reads: the flatbuffer's owner (the views of
// the tables decoded from it hold it too) and its schema; for a table that
// was changed, the source its child tables read (`base`, without changes)
// and the changes: those of the source it had before (`before`), then
// EditTable's functions, then a walk's TableEdits.
struct LazySource {
  std::shared_ptr<const void> owner;
  const Schema* schema;
  std::shared_ptr<const LazySource> base;
  std::shared_ptr<const LazySource> before;
  std::vector<std::function<void(Table&)>> edits;
  std::shared_ptr<const TableEdits> keyed;
};

// Decodes tables: whole, or (with a LazySource) one table at a time, its
// child tables left in the flatbuffer as kLazy values.
class Decoder {
 public:
  Decoder(const Schema& s, std::shared_ptr<const void> owner) : s_(s), owner_(std::move(owner)) {}
  explicit Decoder(std::shared_ptr<const LazySource> src)
      : s_(*src->schema), owner_(src->owner), src_(std::move(src)) {}

  // A child table: decoded now, or left where it is.
  void Child(Value& v, int object_index, const void* table) {
    v.kind = Value::Kind::kTable;
    if (src_) {
      v.SetLazy(static_cast<const uint8_t*>(table), static_cast<uint32_t>(object_index), src_);
    } else {
      v.mutable_table() = DecodeTable(object_index, static_cast<const flatbuffers::Table*>(table));
    }
  }

  std::shared_ptr<Table> DecodeTable(int object_index, const flatbuffers::Table* ft) {
    const Schema::ObjectDecode& obj = s_.DecodeOf(object_index);
    if (obj.object->is_struct()) Fail("structs are not supported: " + obj.object->name()->str());
    auto t = MakeTable(obj.object, obj.field_count);
    const uint8_t* const table = reinterpret_cast<const uint8_t*>(ft);
    for (const Schema::FieldDecode& f : obj.fields) {
      const flatbuffers::voffset_t at = ft->GetOptionalFieldOffset(f.offset);
      if (at == 0) continue;
      const uint8_t* const p = table + at;  // the field's scalar, or the offset to its data
      auto target = [p] { return p + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(p); };
      Value& v = t->fields[f.id];
      const auto bt = f.type;
      if (IsScalarType(bt)) {
        v.kind = Value::Kind::kScalar;
        v.type = bt;
        v.set_bits(ReadBits(p, ScalarSize(bt)));
      } else if (bt == reflection::String) {
        auto* s = reinterpret_cast<const flatbuffers::String*>(target());
        v.kind = Value::Kind::kString;
        v.set_view(reinterpret_cast<const uint8_t*>(s->c_str()), s->size(), owner_);
      } else if (bt == reflection::Obj) {
        Child(v, f.index, target());
      } else if (bt == reflection::Union) {
        const int member = UnionMemberOf(s_, f, ft);
        if (member < 0) continue;  // unknown tag: keep absent
        Child(v, member, target());
      } else if (bt == reflection::Vector) {
        const uint8_t* vec = target();
        uint32_t count = flatbuffers::ReadScalar<uint32_t>(vec);
        const uint8_t* data = vec + 4;
        auto et = f.element;
        v.type = et;
        if (IsScalarType(et)) {
          v.kind = Value::Kind::kScalarVector;
          v.set_view(data, static_cast<size_t>(count) * ScalarSize(et), owner_);
        } else {
          v.kind = Value::Kind::kOffsetVector;
          auto& elems = v.mutable_elems();
          elems.resize(count);
          for (uint32_t i = 0; i < count; ++i) {
            const uint8_t* ep = data + 4 * static_cast<size_t>(i);
            const uint8_t* elem = ep + flatbuffers::ReadScalar<uint32_t>(ep);
            Value& e = elems[i];
            if (et == reflection::String) {
              auto* s = reinterpret_cast<const flatbuffers::String*>(elem);
              e.kind = Value::Kind::kString;
              e.set_view(reinterpret_cast<const uint8_t*>(s->c_str()), s->size(), owner_);
            } else if (et == reflection::Obj) {
              Child(e, f.index, elem);
            } else {
              Fail("unsupported vector element type in " + f.field->name()->str());
            }
          }
        }
      } else {
        Fail("unsupported field type in " + f.field->name()->str());
      }
    }
    return t;
  }

  // Measure's reading of a lazy table no change reaches (its source has no
  // base, so neither do its children's): what Measure counts of the tree
  // DecodeTable would give, read from the flatbuffer without decoding it
  // (decoding every table to measure it was an eighth of `pack`). False for
  // any other value.
  static bool MeasureUnchanged(const Value& v, TreeSize& s) {
    if (v.store_ != Value::Store::kLazy || v.lazy_.src->base) return false;
    MeasureFlatbuffer(*v.lazy_.src->schema, static_cast<int>(v.size_),
                      reinterpret_cast<const flatbuffers::Table*>(v.lazy_.table), s);
    return true;
  }

 private:
  // The object a union field `f` of `ft` holds, by its `_type` field (-1: none or unknown).
  static int UnionMemberOf(const Schema& sc, const Schema::FieldDecode& f, const flatbuffers::Table* ft) {
    return sc.UnionMemberIndex(f.index, f.tag_offset ? ft->GetField<uint8_t>(f.tag_offset, 0) : uint8_t{0});
  }

  static void MeasureFlatbuffer(const Schema& sc, int object_index, const flatbuffers::Table* ft, TreeSize& s) {
    s.estimate += 8;
    const uint8_t* const table = reinterpret_cast<const uint8_t*>(ft);
    auto length = [](const uint8_t* str) { return flatbuffers::ReadScalar<flatbuffers::uoffset_t>(str); };
    for (const Schema::FieldDecode& f : sc.DecodeOf(object_index).fields) {
      const flatbuffers::voffset_t at = ft->GetOptionalFieldOffset(f.offset);
      if (at == 0) continue;
      const uint8_t* const p = table + at;
      const uint8_t* const target =
          IsScalarType(f.type) ? nullptr : p + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(p);
      if (IsScalarType(f.type)) {
        s.estimate += ScalarSize(f.type);
      } else if (f.type == reflection::String) {
        CountString(s, length(target), false);
      } else if (f.type == reflection::Obj || f.type == reflection::Union) {
        const int member = f.type == reflection::Obj ? f.index : UnionMemberOf(sc, f, ft);
        if (member < 0) continue;  // decoded as absent
        s.estimate += 4;
        MeasureFlatbuffer(sc, member, reinterpret_cast<const flatbuffers::Table*>(target), s);
      } else if (f.type == reflection::Vector) {
        const uint64_t count = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(target);
        if (IsScalarType(f.element)) {
          CountScalarVector(s, count * ScalarSize(f.element));
          continue;
        }
        CountOffsetVector(s, count);
        for (uint64_t i = 0; i < count; ++i) {
          const uint8_t* ep = target + 4 + 4 * i;
          const uint8_t* elem = ep + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(ep);
          s.estimate += 4;
          if (f.element == reflection::String) CountString(s, length(elem), true);
          if (f.element == reflection::Obj) {
            MeasureFlatbuffer(sc, f.index, reinterpret_cast<const flatbuffers::Table*>(elem), s);
          }
        }
      }
    }
  }

  const Schema& s_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const LazySource> src_;  // set: child tables stay lazy
};

namespace {
void MeasureChild(const Value& v, TreeSize& s) {
  if (Decoder::MeasureUnchanged(v, s)) return;
  if (const PeekedTable t = Peek(v)) Measure(*t, s);
}
}  // namespace

// --- Value ---

// A program holds about one value per schema field of every table; keep it small.
static_assert(sizeof(void*) != 8 || sizeof(Value) == 32, "fb::Value grew");

void Value::Reset() noexcept {
  switch (store_) {
    case Store::kTable:
      table_.~shared_ptr();
      break;
    case Store::kBlob:
      blob_.~Blob();
      break;
    case Store::kBytes:
      bytes_.~shared_ptr();
      break;
    case Store::kElems:
      elems_.~vector();
      break;
    case Store::kLazy:
      lazy_.~Lazy();
      break;
    case Store::kGen:
      gen_.~shared_ptr();
      break;
    case Store::kBits:
      break;
  }
  store_ = Store::kBits;
  size_ = 0;
  bits_ = 0;
}

template <typename V>
void Value::Take(V&& o) {
  kind = o.kind;
  type = o.type;
  size_ = o.size_;
  switch (o.store_) {
    case Store::kBits:
      bits_ = o.bits_;
      break;
    case Store::kTable:
      new (&table_) std::shared_ptr<Table>(std::forward<V>(o).table_);
      break;
    case Store::kBlob:
      new (&blob_) Blob(std::forward<V>(o).blob_);
      break;
    case Store::kBytes:
      new (&bytes_) std::shared_ptr<const Bytes>(std::forward<V>(o).bytes_);
      break;
    case Store::kElems:
      new (&elems_) std::vector<Value>(std::forward<V>(o).elems_);
      break;
    case Store::kLazy:
      new (&lazy_) Lazy(std::forward<V>(o).lazy_);
      break;
    case Store::kGen:
      new (&gen_) std::shared_ptr<const Maker>(std::forward<V>(o).gen_);
      break;
  }
  store_ = o.store_;
}

Value::Value(const Value& o) : bits_(0) { Take(o); }

void Value::MovePayload(Value&& o) noexcept {
  switch (store_) {
    case Store::kBits:
      bits_ = o.bits_;
      break;
    case Store::kTable:
      new (&table_) std::shared_ptr<Table>(std::move(o.table_));
      break;
    case Store::kBlob:
      new (&blob_) Blob(std::move(o.blob_));
      break;
    case Store::kBytes:
      new (&bytes_) std::shared_ptr<const Bytes>(std::move(o.bytes_));
      break;
    case Store::kElems:
      new (&elems_) std::vector<Value>(std::move(o.elems_));
      break;
    case Store::kLazy:
      new (&lazy_) Lazy(std::move(o.lazy_));
      break;
    case Store::kGen:
      new (&gen_) std::shared_ptr<const Maker>(std::move(o.gen_));
      break;
  }
}

Value& Value::operator=(const Value& o) {
  if (this != &o) {
    Value copy(o);  // `o` may live inside this value's payload
    Reset();
    Take(std::move(copy));
  }
  return *this;
}

Value& Value::MoveAssignSlow(Value&& o) noexcept {
  if (this != &o) {
    Value moved(std::move(o));  // `o` may live inside this value's payload
    Reset();
    Take(std::move(moved));
  }
  return *this;
}

void Value::set_view(const uint8_t* data, size_t size, std::shared_ptr<const void> owner) {
  if (size > UINT32_MAX) {
    throw Error("limit-exceeded",
                "a string or vector of " + std::to_string(size) + " bytes is over the 4 GiB a flatbuffer can hold");
  }
  Reset();
  new (&blob_) Blob{data, std::move(owner)};
  store_ = Store::kBlob;
  size_ = static_cast<uint32_t>(size);
}

void Value::set_str(std::string s) {
  auto owned = std::make_shared<const std::string>(std::move(s));
  const auto* data = reinterpret_cast<const uint8_t*>(owned->data());
  size_t size = owned->size();
  set_view(data, size, std::move(owned));
}

// A payload of another store may be replaced only when it holds nothing.
void Value::ReplaceEmptyPayload(const char* what) {
  bool empty = (store_ == Store::kBits && bits_ == 0) || (store_ == Store::kTable && !table_) ||
               ((store_ == Store::kBlob || store_ == Store::kBytes) && scalars_size() == 0) ||
               (store_ == Store::kElems && elems_.empty());
  if (!empty) throw Error("internal", std::string("a value that holds something else used as ") + what);
  Reset();
}

void Value::SetLazy(const uint8_t* table, uint32_t object_index, const std::shared_ptr<const LazySource>& src) {
  Reset();
  new (&lazy_) Lazy{table, src};
  store_ = Store::kLazy;
  size_ = object_index;
}

namespace {
// The changes `s` keeps for the table at `at`, oldest first.
void ApplyChanges(const LazySource& s, const uint8_t* at, Table& t) {
  if (s.before) ApplyChanges(*s.before, at, t);
  for (const auto& edit : s.edits) edit(t);
  if (s.keyed) s.keyed->Apply(at, t);
}

std::shared_ptr<Table> DecodeLazy(const uint8_t* table, uint32_t object_index,
                                  const std::shared_ptr<const LazySource>& src) {
  auto t = Decoder(src->base ? src->base : src)
               .DecodeTable(static_cast<int>(object_index), reinterpret_cast<const flatbuffers::Table*>(table));
  if (src->base) ApplyChanges(*src, table, *t);
  return t;
}
}  // namespace

std::shared_ptr<Table>& Value::Materialize() {
  std::shared_ptr<Table> t = DecodeLazy(lazy_.table, size_, lazy_.src);  // may throw: this value stays lazy
  Reset();
  new (&table_) std::shared_ptr<Table>(std::move(t));
  store_ = Store::kTable;
  return table_;
}

const reflection::Object* Value::lazy_def() const {
  return store_ == Store::kLazy ? &lazy_.src->schema->ObjectAt(static_cast<int>(size_)) : nullptr;
}

PeekedTable::PeekedTable(const Value& v) {
  if (v.store_ == Value::Store::kLazy) {
    held_ = DecodeLazy(v.lazy_.table, v.size_, v.lazy_.src);
    p_ = held_.get();
  } else {
    p_ = v.table().get();
  }
}

void EditTable(Value& v, std::function<void(Table&)> fn) {
  if (v.store_ != Value::Store::kLazy) {
    fn(Own(v.mutable_table()));
    return;
  }
  const std::shared_ptr<const LazySource>& src = v.lazy_.src;
  auto edited = std::make_shared<LazySource>();
  edited->schema = src->schema;
  edited->base = src->base ? src->base : src;
  if (src->base) edited->before = src;  // shared with copies of `v`: not changed
  edited->edits.push_back(std::move(fn));
  v.lazy_.src = std::move(edited);
}

TableEdits::~TableEdits() = default;

const uint8_t* EditTableWith(Value& v, const std::shared_ptr<const TableEdits>& edits) {
  if (v.store_ != Value::Store::kLazy) throw Error("internal", "EditTableWith: the value is not a lazy table");
  std::shared_ptr<const LazySource>& src = v.lazy_.src;
  if (src->keyed == edits) return v.lazy_.table;  // already: its changes are asked for once a decode
  std::weak_ptr<const LazySource>& made = edits->sources_[src.get()];
  std::shared_ptr<const LazySource> shared = made.lock();
  if (!shared) {
    auto edited = std::make_shared<LazySource>();
    edited->schema = src->schema;
    edited->base = src->base ? src->base : src;
    if (src->base) edited->before = src;
    edited->keyed = edits;
    made = edited;
    shared = std::move(edited);
  }
  src = std::move(shared);
  return v.lazy_.table;
}

std::shared_ptr<Table>& Value::mutable_table() {
  if (store_ == Store::kLazy) return Materialize();
  if (store_ != Store::kTable) {
    ReplaceEmptyPayload("a table");
    new (&table_) std::shared_ptr<Table>();
    store_ = Store::kTable;
  }
  return table_;
}

Bytes Value::scalars() const {
  if (store_ == Store::kBytes) return *bytes_;
  if (store_ != Store::kBlob) return Bytes{};
  return Bytes::View(blob_.data, size_, blob_.owner);
}

void Value::set_scalars(Bytes b) {
  if (b.size == 0) {
    set_view(nullptr, 0, nullptr);
    return;
  }
  if (MappingOf(b) != nullptr || IsZeros(b) || b.size > UINT32_MAX) {
    auto kept = std::make_shared<const Bytes>(std::move(b));
    Reset();
    new (&bytes_) std::shared_ptr<const Bytes>(std::move(kept));
    store_ = Store::kBytes;
    return;
  }
  const uint8_t* data = b.data;
  size_t size = b.size;
  std::shared_ptr<const void> owner = std::move(b.owner);
  if (!owner) {  // a view of memory nobody owns: keep a copy
    auto copy = std::make_shared<const std::vector<uint8_t>>(data, data + size);
    data = copy->data();
    owner = std::move(copy);
  }
  set_view(data, size, std::move(owner));
}

const std::vector<Value>& Value::elems() const {
  static const std::vector<Value> kNone;
  if (store_ == Store::kGen) return const_cast<Value*>(this)->mutable_elems();
  return store_ == Store::kElems ? elems_ : kNone;
}

std::vector<Value>& Value::mutable_elems() {
  if (store_ == Store::kGen) {  // made now, and kept
    std::vector<Value> made;
    made.reserve(size_);
    for (size_t i = 0; i < size_; ++i) made.push_back((*gen_)(i));
    Reset();
    new (&elems_) std::vector<Value>(std::move(made));
    store_ = Store::kElems;
    return elems_;
  }
  if (store_ != Store::kElems) {
    ReplaceEmptyPayload("a vector");
    new (&elems_) std::vector<Value>();
    store_ = Store::kElems;
  }
  return elems_;
}

// --- FieldList, MakeTable ---

void FieldList::Free(Value* p) noexcept { ::operator delete(p); }

void FieldList::Regrow(size_t n) {
  if (n > UINT32_MAX) throw Error("limit-exceeded", "a table of " + std::to_string(n) + " fields");
  auto* block = static_cast<Value*>(::operator new(n * sizeof(Value)));
  for (uint32_t i = 0; i < size_; ++i) {
    new (block + i) Value(std::move(data_[i]));
    data_[i].~Value();
  }
  if (heap_) Free(data_);
  data_ = block;
  cap_ = static_cast<uint32_t>(n);
  heap_ = true;
}

void FieldList::resize(size_t n) {
  if (n > cap_) Regrow(n);
  while (size_ > n) data_[--size_].~Value();
  for (; size_ < n; ++size_) new (data_ + size_) Value();
}

void FieldList::Assign(const FieldList& o) {
  reserve(o.size_);
  for (const Value& v : o) {
    new (data_ + size_) Value(v);
    ++size_;
  }
}

void FieldList::Take(FieldList& o) {
  if (o.heap_) {
    data_ = o.data_;
    size_ = o.size_;
    cap_ = o.cap_;
    heap_ = true;
    o.data_ = nullptr;
    o.size_ = o.cap_ = 0;
    o.heap_ = false;
    return;
  }
  reserve(o.size_);
  for (Value& v : o) {
    new (data_ + size_) Value(std::move(v));
    ++size_;
  }
  o.Clear();
}

FieldList& FieldList::operator=(FieldList&& o) {
  if (this == &o) return *this;
  FieldList moved;
  moved.Take(o);  // `o` may live inside one of these values
  Clear();
  if (moved.heap_ && (heap_ || cap_ < moved.size_)) {
    if (heap_) Free(data_);
    heap_ = false;
    data_ = nullptr;
    cap_ = 0;
    Take(moved);
  } else {
    reserve(moved.size_);
    for (Value& v : moved) {
      new (data_ + size_) Value(std::move(v));
      ++size_;
    }
  }
  return *this;
}

namespace {
// Allocates `room` bytes more than asked: allocate_shared's block then holds
// the control block, the table and, after the table, its fields.
template <typename T>
struct RoomAllocator {
  using value_type = T;
  size_t room;
  explicit RoomAllocator(size_t r) noexcept : room(r) {}
  template <typename U>
  RoomAllocator(const RoomAllocator<U>& o) noexcept : room(o.room) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T) + room)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p); }
  template <typename U>
  bool operator==(const RoomAllocator<U>& o) const {
    return room == o.room;
  }
  template <typename U>
  bool operator!=(const RoomAllocator<U>& o) const {
    return room != o.room;
  }
};
}  // namespace

// The table lies inside the control block's storage, so the `room` bytes
// past the block's end cover n values from the table's end on (Table's size
// is a multiple of its alignment, which is Value's).
static_assert(alignof(Table) == alignof(Value) && sizeof(Table) % alignof(Value) == 0);

std::shared_ptr<Table> MakeTable(const reflection::Object* def, size_t n) {
  if (n > UINT32_MAX) throw Error("limit-exceeded", "a table of " + std::to_string(n) + " fields");
  return std::allocate_shared<Table>(RoomAllocator<Table>(n * sizeof(Value)), Table::RoomAfter{}, def, n);
}

// --- TableArena ---

// The arena's blocks, counted: one reference for the TableArena, one for
// every table in them and one for owner()'s control block (whose copies the
// views hold).
namespace {
// The blocks of arenas that are gone, kept (up to kKeep bytes) for the next
// arena to take. Without it a tree built again and again (a server, the
// bench) had its blocks unmapped or trimmed and faulted in again each time:
// three times the page faults, the kernel's zeroing costing more time than
// the allocations it saved. Any thread may return blocks (the last table of
// an arena may be dropped anywhere); blocks come and go a few per arena.
class BlockCache {
 public:
  static constexpr size_t kKeep = size_t{32} << 20;
  // Never destroyed: an arena may outlive static destruction (a global
  // Package), and blocks kept here stay reachable for leak checkers.
  static BlockCache& Get() {
    static BlockCache* cache = new BlockCache;
    return *cache;
  }
  // A block of `bytes` (aligned as operator new aligns).
  void* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = kept_.size(); i-- > 0;) {  // arenas ask for the same sizes each time
        if (kept_[i].bytes == bytes) {
          void* p = kept_[i].p;
          kept_bytes_ -= bytes;
          kept_.erase(kept_.begin() + static_cast<ptrdiff_t>(i));
          return p;
        }
      }
    }
    return ::operator new(bytes);
  }
  void Give(void* p, size_t bytes) noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_bytes_ + bytes <= kKeep && kept_.size() < 256) {
        try {
          kept_.push_back(Kept{p, bytes});
          kept_bytes_ += bytes;
          return;
        } catch (...) {  // no room to note it: free it
        }
      }
    }
    ::operator delete(p);
  }

 private:
  struct Kept {
    void* p;
    size_t bytes;
  };
  std::mutex mu_;
  std::vector<Kept> kept_;
  size_t kept_bytes_ = 0;
};
}  // namespace

// A bump allocator over blocks from the cache (16 KiB first, each half as
// large again as the last, as libstdc++'s std::pmr::monotonic_buffer_resource
// grows; that resource is not in the libc++ Emscripten builds the viewer
// with), all given back at once when the last reference goes.
struct TableArena::Blocks {
  struct Block {
    void* p;
    size_t bytes;
  };
  std::vector<Block> blocks;
  uint8_t* cur = nullptr;
  size_t left = 0;
  size_t next = 16384;
  std::atomic<size_t> refs{1};

  ~Blocks() {
    for (const Block& b : blocks) BlockCache::Get().Give(b.p, b.bytes);
  }
  void* Allocate(size_t bytes, size_t align) {
    auto pad = [&] { return (align - reinterpret_cast<uintptr_t>(cur) % align) % align; };
    if (cur == nullptr || pad() + bytes > left) {
      const size_t size = std::max(next, bytes + align);
      blocks.reserve(blocks.size() + 1);  // nothing to undo once the block is taken
      void* p = BlockCache::Get().Take(size);
      blocks.push_back(Block{p, size});
      next = size + size / 2;
      cur = static_cast<uint8_t*>(p);
      left = size;
    }
    const size_t skip = pad();
    uint8_t* r = cur + skip;
    cur = r + bytes;
    left -= skip + bytes;
    return r;
  }
  void Ref() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

namespace {
// allocate_shared's allocator for a table in an arena: the block (control
// block, table, `room` bytes of fields) comes from the arena, and holds a
// reference to it until deallocated.
template <typename T>
struct ArenaAllocator {
  using value_type = T;
  TableArena::Blocks* b;
  size_t room;
  ArenaAllocator(TableArena::Blocks* blocks, size_t r) noexcept : b(blocks), room(r) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& o) noexcept : b(o.b), room(o.room) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    void* p = b->Allocate(n * sizeof(T) + room, alignof(T) < 8 ? 8 : alignof(T));
    b->Ref();
    return static_cast<T*>(p);
  }
  void deallocate(T*, size_t) noexcept { b->Unref(); }  // the memory goes with the blocks
  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const {
    return b == o.b && room == o.room;
  }
  template <typename U>
  bool operator!=(const ArenaAllocator<U>& o) const {
    return !(*this == o);
  }
};
}  // namespace

TableArena::TableArena() : b_(new Blocks) {}

TableArena::~TableArena() {
  owner_.reset();
  b_->Unref();
}

std::shared_ptr<Table> TableArena::NewTable(const reflection::Object* def, size_t n) {
  if (n > UINT32_MAX) throw Error("limit-exceeded", "a table of " + std::to_string(n) + " fields");
  return std::allocate_shared<Table>(ArenaAllocator<Table>(b_, n * sizeof(Value)), Table::RoomAfter{}, def, n);
}

uint8_t* TableArena::AllocBytes(size_t n) { return static_cast<uint8_t*>(b_->Allocate(n == 0 ? 1 : n, 8)); }

Value TableArena::CopyOf(Value::Kind kind, reflection::BaseType type, const void* data, size_t n) {
  Value v;
  v.kind = kind;
  v.type = type;
  if (n == 0) {
    v.set_view(nullptr, 0, nullptr);
    return v;
  }
  uint8_t* dst = AllocBytes(n);
  std::memcpy(dst, data, n);
  v.set_view(dst, n, owner());
  return v;
}

const std::shared_ptr<const void>& TableArena::owner() {
  if (!owner_) {
    b_->Ref();  // released by the deleter (also when the control block cannot be made)
    owner_ = std::shared_ptr<const void>(b_, [](Blocks* b) { b->Unref(); });
  }
  return owner_;
}

bool IsDefault(const reflection::Field& f, uint64_t bits) {
  auto t = f.type()->base_type();
  if (t == reflection::Float) {
    float v;
    uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b, 4);
    return v == static_cast<float>(f.default_real());
  }
  if (t == reflection::Double) {
    double v;
    std::memcpy(&v, &bits, 8);
    return v == f.default_real();
  }
  size_t n = ScalarSize(t);
  uint64_t mask = n == 8 ? ~0ull : ((1ull << (8 * n)) - 1);
  return (bits & mask) == (static_cast<uint64_t>(f.default_integer()) & mask);
}

Schema::Schema(const uint8_t* bfbs, size_t size) {
  flatbuffers::Verifier v(bfbs, size);
  if (!reflection::VerifySchemaBuffer(v)) Fail("embedded schema is corrupt");
  schema_ = reflection::GetSchema(bfbs);
  // Everything is read here, once: a Schema is not changed afterwards (the
  // program schema is shared by every thread).
  const auto* objects = schema_->objects();
  for (uint32_t i = 0; i < objects->size(); ++i) {
    const reflection::Object* obj = objects->Get(i);
    if (obj == schema_->root_table()) root_index_ = static_cast<int>(i);
    std::vector<const reflection::Field*> by_id;
    for (const reflection::Field* f : *obj->fields()) {
      if (by_id.size() <= f->id()) by_id.resize(f->id() + 1u, nullptr);
      by_id[f->id()] = f;
    }
    ObjectDecode d{obj, by_id.size(), {}};
    for (size_t id = 0; id < by_id.size(); ++id) {
      const reflection::Field* f = by_id[id];
      if (f == nullptr || f->deprecated()) continue;
      const reflection::Field* tag = id > 0 ? by_id[id - 1] : nullptr;
      d.fields.push_back(FieldDecode{f, f->offset(), f->id(), tag ? tag->offset() : uint16_t{0}, f->type()->base_type(),
                                     f->type()->element(), f->type()->index()});
    }
    decode_.push_back(std::move(d));
    by_id_.emplace(obj, std::move(by_id));
  }
  const auto* enums = schema_->enums();
  union_members_.resize(enums->size());
  for (uint32_t e = 0; e < enums->size(); ++e) {
    const reflection::Enum* en = enums->Get(e);
    if (!en->is_union()) continue;
    auto& m = union_members_[e];
    m.assign(256, -1);
    for (const reflection::EnumVal* ev : *en->values()) {
      if (ev->value() > 0 && ev->value() < 256 && ev->union_type() != nullptr) {
        m[static_cast<size_t>(ev->value())] = ev->union_type()->index();
      }
    }
  }
}

const reflection::Object* Schema::FindObject(const std::string& name) const {
  return schema_->objects()->LookupByKey(name.c_str());
}

const reflection::Field& Schema::FieldOf(const reflection::Object& obj, const std::string& name) const {
  auto* f = obj.fields()->LookupByKey(name.c_str());
  if (f == nullptr) Fail("no field " + name + " in " + obj.name()->str());
  return *f;
}

const std::vector<const reflection::Field*>& Schema::FieldsById(const reflection::Object& obj) const {
  auto it = by_id_.find(&obj);
  if (it == by_id_.end()) Fail("object " + obj.name()->str() + " is not of this schema");
  return it->second;
}

const reflection::Object* Schema::UnionMember(int union_index, uint8_t tag) const {
  const int i = UnionMemberIndex(union_index, tag);
  return i < 0 ? nullptr : &ObjectAt(i);
}

std::string Schema::FileIdent() const { return schema_->file_ident() ? schema_->file_ident()->str() : std::string(); }

const Schema& detail::LoadProgramSchema() {
  static const Schema s(schema::k_program_bfbs, schema::k_program_bfbs_size);
  return s;
}

const Schema& FlatTensorSchema() {
  static const Schema s(schema::k_flat_tensor_bfbs, schema::k_flat_tensor_bfbs_size);
  return s;
}

const Schema& FlatTensorLegacySchema() {
  static const Schema s(schema::k_flat_tensor_legacy_bfbs, schema::k_flat_tensor_legacy_bfbs_size);
  return s;
}

const Schema& BundledProgramSchema() {
  static const Schema s(schema::k_bundled_program_bfbs, schema::k_bundled_program_bfbs_size);
  return s;
}

std::shared_ptr<Table> Decode(const Schema& schema, const uint8_t* buf, size_t size,
                              std::shared_ptr<const void> owner) {
  if (size < 8) Fail("flatbuffer too small");
  Decoder d(schema, std::move(owner));
  return d.DecodeTable(schema.RootIndex(), flatbuffers::GetRoot<flatbuffers::Table>(buf));
}

std::shared_ptr<Table> DecodeOnDemand(const Schema& schema, const uint8_t* buf, size_t size,
                                      std::shared_ptr<const void> owner) {
  if (size < 8) Fail("flatbuffer too small");
  auto src = std::make_shared<LazySource>();
  src->owner = std::move(owner);
  src->schema = &schema;
  Decoder d(std::move(src));
  return d.DecodeTable(schema.RootIndex(), flatbuffers::GetRoot<flatbuffers::Table>(buf));
}

TreeSize MeasureTree(const Table& t) {
  TreeSize s;
  Measure(t, s);
  return s;
}

Encoded Encode(const Schema& schema, const Table& root, const EncodeOptions& options) {
  Encoder e(schema, options);
  return e.Run(root);
}

namespace {
Value CloneValue(const Value& v) {
  if (v.lazy() || v.generated()) return v;  // still the flatbuffer's or the maker's: nothing to copy
  Value c = v;
  if (v.table()) c.mutable_table() = Clone(*v.table());
  if (!v.elems().empty()) {
    for (auto& e : c.mutable_elems()) e = CloneValue(e);
  }
  return c;
}
}  // namespace

std::shared_ptr<Table> Clone(const Table& t) {
  auto c = MakeTable(t.def, t.fields.size());
  for (size_t i = 0; i < t.fields.size(); ++i) c->fields[i] = CloneValue(t.fields[i]);
  return c;
}

std::shared_ptr<Table> ShallowClone(const Table& t) {
  auto c = MakeTable(t.def, t.fields.size());
  for (size_t i = 0; i < t.fields.size(); ++i) c->fields[i] = t.fields[i];
  return c;
}

Table& Own(std::shared_ptr<Table>& slot) {
  if (!slot) Fail("no table to change");
  if (slot.use_count() > 1) slot = ShallowClone(*slot);
  return *slot;
}

Value& Field(const Schema& s, Table& t, const std::string& name) {
  const auto& f = s.FieldOf(*t.def, name);
  if (f.id() >= t.fields.size()) t.fields.resize(f.id() + 1);
  return t.fields[f.id()];
}

const Value& Field(const Schema& s, const Table& t, const std::string& name) {
  const auto& f = s.FieldOf(*t.def, name);
  static const Value kAbsent;
  return f.id() < t.fields.size() ? t.fields[f.id()] : kAbsent;
}

std::shared_ptr<Table> NewTable(const Schema& s, const std::string& qualified_name) {
  const auto* obj = s.FindObject(qualified_name);
  if (obj == nullptr) Fail("no table " + qualified_name);
  return MakeTable(obj, s.FieldsById(*obj).size());
}

Value UIntValue(reflection::BaseType type, uint64_t x) { return ScalarValue(type, x); }

Value StringValue(std::string s) {
  Value v;
  v.kind = Value::Kind::kString;
  v.set_str(std::move(s));
  return v;
}

Value TableValue(std::shared_ptr<Table> t) {
  Value v;
  v.kind = Value::Kind::kTable;
  v.mutable_table() = std::move(t);
  return v;
}

Value OffsetVector(std::vector<Value> elems, reflection::BaseType elem_type) {
  Value v;
  v.kind = Value::Kind::kOffsetVector;
  v.type = elem_type;
  v.mutable_elems() = std::move(elems);
  return v;
}

Value GeneratedVector(size_t count, reflection::BaseType elem_type, std::function<Value(size_t)> make) {
  if (count > UINT32_MAX) throw Error("limit-exceeded", "a vector of " + std::to_string(count) + " elements");
  Value v;
  v.kind = Value::Kind::kOffsetVector;
  v.type = elem_type;
  new (&v.gen_) std::shared_ptr<const Value::Maker>(std::make_shared<const Value::Maker>(std::move(make)));
  v.store_ = Value::Store::kGen;
  v.size_ = static_cast<uint32_t>(count);
  return v;
}

Value GeneratedElement(const Value& v, size_t i) {
  if (v.store_ != Value::Store::kGen || i >= v.size_) throw Error("internal", "not an element of a generated vector");
  return (*v.gen_)(i);
}

size_t ElementCount(const Value& v) { return v.store_ == Value::Store::kGen ? v.size_ : v.elems().size(); }

Value ScalarVector(reflection::BaseType elem_type, Bytes raw) {
  Value v;
  v.kind = Value::Kind::kScalarVector;
  v.type = elem_type;
  v.set_scalars(std::move(raw));
  return v;
}

uint64_t AsUInt(const Value& v, uint64_t dflt) { return v.kind == Value::Kind::kScalar ? v.bits() : dflt; }

int64_t AsInt(const Value& v, int64_t dflt) { return v.kind == Value::Kind::kScalar ? ToInt(v.type, v.bits()) : dflt; }

}  // namespace ptepack::fb
