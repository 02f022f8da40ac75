#include "serialize/insight/diff.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "ptepack/error.h"
#include "serialize/io/hash.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"

namespace ptepack {
namespace {

namespace et = executorch_flatbuffer;

// ---- Content hash of the program tree, without layout and debug fields.

// Fields that only say where bytes are stored (or carry debug data); their
// content is compared through the summaries instead.
const std::set<std::string>& LayoutFields() {
  static const std::set<std::string> kFields = {"segments",        "constant_segment",  "mutable_data_segments",
                                                "named_data",      "constant_buffer",   "backend_delegate_data",
                                                "data_buffer_idx", "extra_tensor_info", "processed",
                                                "stacktrace",      "execution_plan"};
  return kFields;
}

// The memory plan: where each planned tensor is in its buffer and how large
// the buffers are (the memory_id stays content: which buffer a tensor uses).
const std::set<std::string>& PlanFields() {
  static const std::set<std::string> kFields = {"memory_offset_low", "memory_offset_high", "non_const_buffer_sizes"};
  return kFields;
}

class TreeHasher {
 public:
  // without_plan: leave the memory plan's fields out too.
  explicit TreeHasher(bool without_plan = false) : without_plan_(without_plan) {}
  void Table(const fb::Table& t) {
    const auto& fields = fb::ProgramSchema().FieldsById(*t.def);
    Mix(fields.size());
    for (size_t id = 0; id < fields.size(); ++id) {
      const reflection::Field* f = fields[id];
      if (f == nullptr || f->deprecated() || LayoutFields().count(f->name()->str())) continue;
      if (without_plan_ && PlanFields().count(f->name()->str())) continue;
      Mix(id);
      Field(*f, id < t.fields.size() ? t.fields[id] : fb::Value{});
    }
  }
  uint64_t Digest() const { return s_.Digest(); }

 private:
  void Mix(uint64_t v) { s_.Update(&v, sizeof v); }
  void Str(const std::string& s) {
    Mix(s.size());
    s_.Update(s.data(), s.size());
  }
  // Absent scalars hash as their default, absent strings and vectors as
  // empty: producers differ in which defaults they write.
  void Field(const reflection::Field& f, const fb::Value& v) {
    using K = fb::Value::Kind;
    switch (v.kind) {
      case K::kAbsent:
        if (fb::ScalarSize(f.type()->base_type()) != 0 && f.type()->base_type() <= reflection::Double) {
          Mix(f.default_integer());
          double d = f.default_real();
          uint64_t bits;
          std::memcpy(&bits, &d, sizeof bits);
          Mix(f.type()->base_type() >= reflection::Float ? bits : 0);
        } else {
          Mix(0);
        }
        return;
      case K::kScalar: {
        bool real = v.type == reflection::Float || v.type == reflection::Double;
        Mix(real ? 0 : v.bits());
        Mix(real ? v.bits() : 0);
        return;
      }
      case K::kString:
        Str(v.str());
        return;
      case K::kTable:
        Mix(1);
        Table(*v.table());
        return;
      case K::kScalarVector:
        Mix(v.scalars().size);
        s_.Update(v.scalars().data, v.scalars().size);
        return;
      case K::kOffsetVector:
        Mix(v.elems().size());
        for (const auto& e : v.elems()) {
          if (e.table()) {
            Table(*e.table());
          } else {
            Str(e.str());
          }
        }
        return;
    }
  }
  bool without_plan_ = false;
  Xxh3Stream s_;
};

// ---- Summaries.

struct Stored {
  std::string name;  // fully qualified name or key, where the file has one
  std::string desc;  // dtype[shape], bytes
  uint64_t bytes = 0;
  uint64_t hash = 0;
  std::string location;
  std::string method;  // constants: the method whose value it is
  bool given = true;   // false: an external tensor no given .ptd holds
};

struct DelegateInfo {
  std::string id;
  uint64_t size = 0;
  uint64_t hash = 0;
  std::map<std::string, std::string> specs;  // key -> value (hex, or size and hash)
};

struct MethodInfo {
  std::set<std::string> ops;
  uint64_t instructions = 0, values = 0, chains = 0;
  std::string inputs, outputs, planned;
  std::vector<DelegateInfo> delegates;
  uint64_t hash = 0;       // the plan's content, layout fields left out
  uint64_t hash_rest = 0;  // the same without the memory plan (offsets, buffer sizes)
  // Planned tensors: value index -> (memory_id, offset).
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> planned_at;
};

// Orders "forward/value 9" before "forward/value 10".
struct NaturalLess {
  bool operator()(const std::string& a, const std::string& b) const {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
        size_t ie = a.find_first_not_of("0123456789", i), je = b.find_first_not_of("0123456789", j);
        std::string na = a.substr(i, ie == std::string::npos ? std::string::npos : ie - i);
        std::string nb = b.substr(j, je == std::string::npos ? std::string::npos : je - j);
        if (na.size() != nb.size()) return na.size() < nb.size();
        if (na != nb) return na < nb;
        i += na.size();
        j += nb.size();
      } else {
        if (a[i] != b[j]) return a[i] < b[j];
        ++i, ++j;
      }
    }
    return a.size() - i < b.size() - j;
  }
};
using StoredMap = std::map<std::string, Stored, NaturalLess>;

struct Summary {
  std::map<std::string, MethodInfo> methods;
  StoredMap constants;        // constants and mutable initial states, by "method/value N"
  StoredMap named;            // named data in the .pte, by key
  uint64_t program_hash = 0;  // program fields outside the plans
  nlohmann::json config;
  std::map<std::string, SettingFit> fits;  // what the file shows of each setting inference reads
  std::map<std::string, uint64_t> sizes;
  std::vector<std::pair<std::string, uint64_t>> file_hashes;  // pte, then .ptd by base name
};

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {kHex[p[i] >> 4], kHex[p[i] & 15]};
  return s;
}

std::string TensorDesc(const et::Tensor& t) {
  std::string s = ScalarTypeName(static_cast<int>(t.scalar_type()));
  s += "[";
  if (t.sizes()) {
    for (flatbuffers::uoffset_t i = 0; i < t.sizes()->size(); ++i) {
      s += (i ? "," : "") + std::to_string(t.sizes()->Get(i));
    }
  }
  return s + "]";
}

std::string ValueDesc(const et::ExecutionPlan& plan, int32_t index) {
  if (!plan.values() || index < 0 || static_cast<uint32_t>(index) >= plan.values()->size()) return "?";
  const et::EValue* v = plan.values()->Get(static_cast<flatbuffers::uoffset_t>(index));
  if (const auto* t = v->val_as_Tensor()) return TensorDesc(*t);
  if (const auto* i = v->val_as_Int()) return "int " + std::to_string(i->int_val());
  if (const auto* b = v->val_as_Bool()) return b->bool_val() ? "bool true" : "bool false";
  if (const auto* d = v->val_as_Double()) return "double " + std::to_string(d->double_val());
  const char* name = et::EnumNameKernelTypes(v->val_type());
  return name && *name ? name : "?";
}

std::string ValueList(const et::ExecutionPlan& plan, const flatbuffers::Vector<int32_t>* idx) {
  std::string s;
  if (idx) {
    for (flatbuffers::uoffset_t i = 0; i < idx->size(); ++i) s += (i ? ", " : "") + ValueDesc(plan, idx->Get(i));
  }
  return "(" + s + ")";
}

std::string PlannedDesc(const et::ExecutionPlan& plan) {
  std::string s;
  if (plan.non_const_buffer_sizes()) {
    for (flatbuffers::uoffset_t i = 0; i < plan.non_const_buffer_sizes()->size(); ++i) {
      s += (i ? ", " : "") + std::to_string(plan.non_const_buffer_sizes()->Get(i));
    }
  }
  return "[" + s + "]";
}

Stored HashStored(const Bytes& b, std::string desc, std::string location) {
  Stored s;
  s.desc = std::move(desc);
  s.bytes = b.size;
  s.hash = HashBytes(b);
  s.location = std::move(location);
  return s;
}

class Summarizer {
 public:
  Summarizer(const PteFile& pte, const std::vector<const PtdFile*>& ptds)
      : pte_(pte), ptds_(ptds), p_(*pte.program()) {}

  Summary Run() {
    if (p_.execution_plan()) {
      auto tree = fb::Decode(fb::ProgramSchema(), pte_.flatbuffer().data, pte_.flatbuffer().size, pte_.file().owner);
      const auto& plans = fb::Field(fb::ProgramSchema(), *tree, "execution_plan").elems();
      for (flatbuffers::uoffset_t i = 0; i < p_.execution_plan()->size(); ++i) {
        Method(*p_.execution_plan()->Get(i), i < plans.size() && plans[i].table() ? plans[i].table().get() : nullptr);
      }
      TreeHasher h;
      h.Table(*tree);
      out_.program_hash = h.Digest();
    }
    NamedData();
    Files();
    Config();
    return std::move(out_);
  }

 private:
  void Method(const et::ExecutionPlan& plan, const fb::Table* tree) {
    std::string name = plan.name() ? plan.name()->str() : "";
    MethodInfo& m = out_.methods[name];
    if (plan.operators()) {
      for (const auto* op : *plan.operators()) m.ops.insert(OperatorName(*op));
    }
    if (plan.chains()) {
      m.chains = plan.chains()->size();
      for (const auto* c : *plan.chains()) m.instructions += c->instructions() ? c->instructions()->size() : 0;
    }
    m.values = plan.values() ? plan.values()->size() : 0;
    m.inputs = ValueList(plan, plan.inputs());
    m.outputs = ValueList(plan, plan.outputs());
    m.planned = PlannedDesc(plan);
    if (plan.delegates()) {
      for (const auto* d : *plan.delegates()) m.delegates.push_back(Delegate(*d));
    }
    if (tree) {
      TreeHasher h;
      h.Table(*tree);
      m.hash = h.Digest();
      TreeHasher rest(/*without_plan=*/true);
      rest.Table(*tree);
      m.hash_rest = rest.Digest();
    }
    if (plan.values()) {
      for (flatbuffers::uoffset_t vi = 0; vi < plan.values()->size(); ++vi) {
        const auto* t = plan.values()->Get(vi)->val_as_Tensor();
        if (!t) continue;
        if (const auto* ai = t->allocation_info()) {
          m.planned_at[vi] = {ai->memory_id(),
                              (uint64_t{ai->memory_offset_high()} << 32) | uint64_t{ai->memory_offset_low()}};
        }
        Tensor(name, vi, *t);
      }
    }
  }

  DelegateInfo Delegate(const et::BackendDelegate& d) {
    DelegateInfo info;
    info.id = d.id() ? d.id()->str() : "";
    Bytes payload;
    if (const auto* ref = d.processed()) {
      if (ref->location() == et::DataLocation::SEGMENT) {
        payload = pte_.SegmentData(ref->index());
      } else if (p_.backend_delegate_data() && ref->index() < p_.backend_delegate_data()->size()) {
        const auto* data = p_.backend_delegate_data()->Get(ref->index())->data();
        if (data) payload = Bytes::View(data->data(), data->size());
      }
    }
    info.size = payload.size;
    info.hash = HashBytes(payload);
    if (d.compile_specs()) {
      for (const auto* cs : *d.compile_specs()) {
        const auto* v = cs->value();
        size_t n = v ? v->size() : 0;
        std::string val = n <= 16
                              ? (n ? "0x" + Hex(v->data(), n) : "(empty)")
                              : std::to_string(n) + " bytes, xxh3 " + HexDigest(HashBytes(Bytes::View(v->data(), n)));
        info.specs[cs->key() ? cs->key()->str() : ""] = val;
      }
    }
    return info;
  }

  // Constant tensors (constant buffer, inline or external) and mutable
  // initial states, named by their fully qualified name where they have one.
  void Tensor(const std::string& method, uint32_t vi, const et::Tensor& t) {
    const auto* eti = t.extra_tensor_info();
    const bool external = eti && eti->location() == et::TensorDataLocation::EXTERNAL;
    const bool planned = t.allocation_info() != nullptr;
    const bool mutable_state = planned && eti && eti->mutable_data_segments_idx() > 0;
    if (!external && !mutable_state && (planned || t.data_buffer_idx() == 0)) return;
    std::string fqn = eti && eti->fully_qualified_name() ? eti->fully_qualified_name()->str() : "";
    // By position, not name: names (keys) are written only for some layouts.
    std::string key = method + "/value " + std::to_string(vi);
    uint64_t nbytes = TensorNbytes(t).value_or(0);
    std::string desc = TensorDesc(t) + (mutable_state ? " mutable initial state" : "");
    Bytes data;
    std::string where;
    if (external) {
      where = "not given";
      for (const PtdFile* ptd : ptds_) {
        if (auto b = ptd->Find(fqn)) {
          data = b->Sub(0, std::min<uint64_t>(nbytes, b->size));
          where = BaseName(ptd->name());
        }
      }
    } else if (mutable_state) {
      const auto* mds = p_.mutable_data_segments();
      if (!mds || mds->size() == 0) throw Error("diff-bad-index", pte_.name() + ": mutable data without a segment");
      data = SubsegmentItem(*mds->Get(0), eti->mutable_data_segments_idx(), nbytes);
      where = "pte mutable data segment";
    } else {
      data = ConstantData(t.data_buffer_idx(), nbytes, &where);
    }
    out_.constants[key] = HashStored(data, desc, where);
    out_.constants[key].name = fqn;
    out_.constants[key].method = method;
    out_.constants[key].given = !external || where != "not given";
  }

  Bytes SubsegmentItem(const et::SubsegmentOffsets& s, uint64_t idx, uint64_t nbytes) {
    if (!s.offsets() || idx >= s.offsets()->size()) throw Error("diff-bad-index", "sub-segment index out of range");
    Bytes seg = pte_.SegmentData(s.segment_index());
    uint64_t off = s.offsets()->Get(static_cast<flatbuffers::uoffset_t>(idx));
    if (off > seg.size) throw Error("diff-bad-offset", "sub-segment offset beyond its segment");
    return seg.Sub(off, std::min<uint64_t>(nbytes, seg.size - off));
  }

  Bytes ConstantData(uint32_t idx, uint64_t nbytes, std::string* where) {
    const auto* cs = p_.constant_segment();
    if (cs && cs->offsets() && cs->offsets()->size() > 0) {
      *where = "pte constant segment";
      return SubsegmentItem(*cs, idx, nbytes);
    }
    *where = "pte inline constant_buffer";
    if (!p_.constant_buffer() || idx >= p_.constant_buffer()->size()) return {};
    const auto* st = p_.constant_buffer()->Get(idx)->storage();
    return st ? Bytes::View(st->data(), std::min<uint64_t>(nbytes, st->size())) : Bytes{};
  }

  void NamedData() {
    if (!p_.named_data()) return;
    for (const auto* nd : *p_.named_data()) {
      std::string key = nd->key() ? nd->key()->str() : "";
      out_.named[key] = HashStored(pte_.SegmentData(nd->segment_index()), "", "pte segment");
    }
  }

  void Files() {
    out_.sizes["pte file"] = pte_.file().size;
    out_.sizes["flatbuffer"] = pte_.flatbuffer_size();  // README, "Sizes"
    out_.sizes["segments"] = pte_.segments().size();
    out_.file_hashes.push_back({"pte", HashBytes(pte_.file())});
    std::vector<std::pair<std::string, uint64_t>> ptd;
    for (const PtdFile* f : ptds_) {
      out_.sizes["ptd file " + BaseName(f->name())] = f->file().size;
      ptd.push_back({BaseName(f->name()), HashBytes(f->file())});
    }
    std::sort(ptd.begin(), ptd.end());
    out_.file_hashes.insert(out_.file_hashes.end(), ptd.begin(), ptd.end());
  }

  void Config() {
    try {
      PackageParts pkg = PackageFromPte(pte_, ptds_);
      InferredConfig inf = InferConfig(pte_, pkg, ptds_);
      out_.config = ConfigToJson(inf.config);
      out_.config["reproduces_file_exactly"] = inf.exact;
      out_.fits = SettingFits(inf);
    } catch (const Error& e) {
      out_.config = {{"inferred", false}, {"reason", e.finding().message}};
    }
  }

  const PteFile& pte_;
  const std::vector<const PtdFile*>& ptds_;
  const et::Program& p_;
  Summary out_;
};

// ---- Comparison.

class Comparer {
 public:
  Comparer(const Summary& a, const Summary& b, std::vector<DiffChange>* out) : a_(a), b_(b), out_(*out) {}

  void Run() {
    Config();
    Sizes();
    for (const auto& [name, m] : a_.methods) {
      if (!b_.methods.count(name)) Add("method", name, "removed", MethodLine(m), "");
    }
    for (const auto& [name, m] : b_.methods) {
      if (!a_.methods.count(name)) Add("method", name, "added", "", MethodLine(m));
    }
    for (const auto& [name, ma] : a_.methods) {
      auto it = b_.methods.find(name);
      if (it != b_.methods.end()) Method(name, ma, it->second);
    }
    Stores("constant", a_.constants, b_.constants);
    Stores("named_data", a_.named, b_.named);
    if (a_.program_hash != b_.program_hash) {
      Add("program", "program", "changed", "program fields outside the methods differ (e.g. version)", "");
    }
  }

 private:
  void Add(std::string cat, std::string subject, std::string kind, std::string a, std::string b, bool layout = false,
           bool plan = false) {
    out_.push_back(
        DiffChange{std::move(cat), std::move(subject), std::move(kind), std::move(a), std::move(b), layout, plan});
  }

  static std::string MethodLine(const MethodInfo& m) {
    return std::to_string(m.instructions) + " instructions, " + std::to_string(m.values) + " values, " +
           std::to_string(m.ops.size()) + " operators, " + std::to_string(m.delegates.size()) + " delegates; inputs " +
           m.inputs + ", outputs " + m.outputs;
  }

  void Config() {
    std::set<std::string> keys;
    for (auto it = a_.config.begin(); it != a_.config.end(); ++it) keys.insert(it.key());
    for (auto it = b_.config.begin(); it != b_.config.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      // A setting a file cannot tell (every value in a range writes its bytes) changed only
      // when no one value fits both files; shown as what fits.
      auto fa = a_.fits.find(k), fb = b_.fits.find(k);
      if (fa != a_.fits.end() && fb != b_.fits.end()) {
        if (!fa->second.Overlaps(fb->second)) Add("config", k, "changed", fa->second.Text(), fb->second.Text(), true);
        continue;
      }
      std::string va = a_.config.contains(k) ? a_.config[k].dump() : "(none)";
      std::string vb = b_.config.contains(k) ? b_.config[k].dump() : "(none)";
      if (va != vb) Add("config", k, "changed", va, vb, true);
    }
  }

  void Sizes() {
    for (const auto& [k, v] : a_.sizes) {
      auto it = b_.sizes.find(k);
      if (it == b_.sizes.end()) {
        Add("size", k, "removed", std::to_string(v), "", true);
      } else if (it->second != v) {
        Add("size", k, "changed", std::to_string(v), std::to_string(it->second), true);
      }
    }
    for (const auto& [k, v] : b_.sizes) {
      if (!a_.sizes.count(k)) Add("size", k, "added", "", std::to_string(v), true);
    }
  }

  void Method(const std::string& name, const MethodInfo& a, const MethodInfo& b) {
    size_t before = out_.size();
    for (const auto& op : a.ops) {
      if (!b.ops.count(op)) Add("operators", name, "removed", op, "");
    }
    for (const auto& op : b.ops) {
      if (!a.ops.count(op)) Add("operators", name, "added", "", op);
    }
    auto count = [&](const char* what, uint64_t x, uint64_t y) {
      if (x != y) Add("counts", name + " " + what, "changed", std::to_string(x), std::to_string(y));
    };
    count("instructions", a.instructions, b.instructions);
    count("values", a.values, b.values);
    count("chains", a.chains, b.chains);
    if (a.inputs != b.inputs) Add("io", name + " inputs", "changed", a.inputs, b.inputs);
    if (a.outputs != b.outputs) Add("io", name + " outputs", "changed", a.outputs, b.outputs);
    Delegates(name, a.delegates, b.delegates);
    const bool listed = out_.size() != before;
    if (a.planned != b.planned) Add("memory", name + " planned buffers", "changed", a.planned, b.planned, false, true);
    if (!listed && a.hash_rest != b.hash_rest) {
      Add("method", name, "changed", "values or instruction arguments differ", "");
    } else if (!listed && a.hash != b.hash) {
      MovedTensors(name, a, b);
    }
  }

  // The same program with planned tensors at other offsets of their buffers.
  void MovedTensors(const std::string& name, const MethodInfo& a, const MethodInfo& b) {
    size_t moved = 0;
    std::string first;
    for (const auto& [v, at] : a.planned_at) {
      auto it = b.planned_at.find(v);
      if (it == b.planned_at.end() || it->second == at) continue;
      if (moved++ == 0) {
        first = "values[" + std::to_string(v) + "] at " + std::to_string(at.second) + " -> " +
                std::to_string(it->second.second) + " in buffer " + std::to_string(at.first);
      }
    }
    Add("memory", name + " planned tensor offsets", "changed",
        std::to_string(moved) + " of " + std::to_string(a.planned_at.size()) +
            " planned tensors moved (first: " + first + ")",
        "", false, true);
  }

  void Delegates(const std::string& method, const std::vector<DelegateInfo>& a, const std::vector<DelegateInfo>& b) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      std::string subject = method + " delegate " + std::to_string(i);
      if (i >= b.size()) {
        Add("delegate", subject, "removed", a[i].id, "");
        continue;
      }
      if (i >= a.size()) {
        Add("delegate", subject, "added", "", b[i].id);
        continue;
      }
      if (a[i].id != b[i].id) Add("delegate", subject + " backend", "changed", a[i].id, b[i].id);
      if (a[i].hash != b[i].hash) {
        Add("delegate", subject + " payload", "changed", PayloadDesc(a[i]), PayloadDesc(b[i]));
      }
      for (const auto& [k, v] : a[i].specs) {
        auto it = b[i].specs.find(k);
        if (it == b[i].specs.end()) {
          Add("delegate", subject + " compile spec " + k, "removed", v, "");
        } else if (it->second != v) {
          Add("delegate", subject + " compile spec " + k, "changed", v, it->second);
        }
      }
      for (const auto& [k, v] : b[i].specs) {
        if (!a[i].specs.count(k)) Add("delegate", subject + " compile spec " + k, "added", "", v);
      }
    }
  }

  static std::string PayloadDesc(const DelegateInfo& d) {
    return std::to_string(d.size) + " bytes, xxh3 " + HexDigest(d.hash);
  }
  static std::string StoredDesc(const Stored& s) {
    std::string head = (s.name.empty() ? "" : s.name + " ") + (s.desc.empty() ? "" : s.desc + ", ");
    if (!s.given) return head + "data not given (no .ptd given holds this key)";
    return head + std::to_string(s.bytes) + " bytes, xxh3 " + HexDigest(s.hash);
  }

  // Constants of a method only one side has are covered by the method's change.
  bool InBoth(const Stored& s) const {
    return s.method.empty() || (a_.methods.count(s.method) && b_.methods.count(s.method));
  }

  void Stores(const char* cat, const StoredMap& a, const StoredMap& b) {
    for (const auto& [k, sa] : a) {
      if (!InBoth(sa)) continue;
      auto it = b.find(k);
      if (it == b.end()) {
        Add(cat, k, "removed", StoredDesc(sa), "");
      } else if (it->second.hash != sa.hash || it->second.desc != sa.desc || it->second.bytes != sa.bytes) {
        Add(cat, k, "changed", StoredDesc(sa), StoredDesc(it->second));
      } else if (it->second.location != sa.location) {
        Add(cat, k, "moved", sa.location, it->second.location, true);
      }
    }
    for (const auto& [k, sb] : b) {
      if (!a.count(k) && InBoth(sb)) Add(cat, k, "added", "", StoredDesc(sb));
    }
  }

  const Summary& a_;
  const Summary& b_;
  std::vector<DiffChange>& out_;
};

nlohmann::json SummaryJson(const PteFile& pte, const std::vector<const PtdFile*>& ptds, const Summary& s) {
  nlohmann::json j;
  j["file"] = pte.name();
  j["ptd"] = nlohmann::json::array();
  for (const PtdFile* p : ptds) j["ptd"].push_back(p->name());
  j["sizes"] = s.sizes;
  j["config"] = s.config;
  j["methods"] = nlohmann::json::object();
  for (const auto& [name, m] : s.methods) {
    j["methods"][name] = {{"instructions", m.instructions},
                          {"values", m.values},
                          {"operators", m.ops},
                          {"inputs", m.inputs},
                          {"outputs", m.outputs},
                          {"planned_buffers", m.planned},
                          {"delegates", m.delegates.size()}};
  }
  j["constants"] = s.constants.size();
  j["named_data"] = s.named.size();
  return j;
}

}  // namespace

const char* DiffVerdictName(DiffVerdict v) {
  switch (v) {
    case DiffVerdict::kIdentical:
      return "identical";
    case DiffVerdict::kLayoutOnly:
      return "layout only";
    case DiffVerdict::kMemoryPlanOnly:
      return "memory plan only";
    case DiffVerdict::kDifferent:
      return "different";
  }
  return "?";
}

size_t DiffResult::content_changes() const {
  return static_cast<size_t>(
      std::count_if(changes.begin(), changes.end(), [](const DiffChange& c) { return !c.layout && !c.plan; }));
}

size_t DiffResult::plan_changes() const {
  return static_cast<size_t>(std::count_if(changes.begin(), changes.end(), [](const DiffChange& c) { return c.plan; }));
}

DiffResult DiffPrograms(const PteFile& a, const std::vector<const PtdFile*>& ptds_a, const PteFile& b,
                        const std::vector<const PtdFile*>& ptds_b) {
  for (const PteFile* f : {&a, &b}) {
    f->report().ThrowIfError();
    if (!f->program()) throw Error("flatbuffer-invalid", f->name() + ": no program to read");
  }
  for (const auto* list : {&ptds_a, &ptds_b}) {
    for (const PtdFile* p : *list) p->report().ThrowIfError();
  }
  Summary sa = Summarizer(a, ptds_a).Run();
  Summary sb = Summarizer(b, ptds_b).Run();
  DiffResult r;
  r.a = {a.name(), SummaryJson(a, ptds_a, sa)};
  r.b = {b.name(), SummaryJson(b, ptds_b, sb)};
  Comparer(sa, sb, &r.changes).Run();
  if (r.content_changes() > 0) {
    r.verdict = DiffVerdict::kDifferent;
  } else if (r.plan_changes() > 0) {
    r.verdict = DiffVerdict::kMemoryPlanOnly;
  } else if (!r.changes.empty() || sa.file_hashes != sb.file_hashes) {
    r.verdict = DiffVerdict::kLayoutOnly;
  } else {
    r.verdict = DiffVerdict::kIdentical;
  }
  return r;
}

namespace {

// How many changes of each kind per category, in the order the categories come:
// [("constant", [("moved", 83)]), ("size", [("changed", 2), ("added", 1)])].
std::vector<std::pair<std::string, std::vector<std::pair<std::string, size_t>>>> CountChanges(const DiffResult& r) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, size_t>>>> out;
  for (const DiffChange& c : r.changes) {
    if (out.empty() || out.back().first != c.category) out.push_back({c.category, {}});
    auto& kinds = out.back().second;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == c.kind; });
    if (it == kinds.end()) {
      kinds.push_back({c.kind, 1});
    } else {
      ++it->second;
    }
  }
  return out;
}

}  // namespace

nlohmann::json DiffJson(const DiffResult& r) {
  nlohmann::json j;
  j["verdict"] = DiffVerdictName(r.verdict);
  j["content_changes"] = r.content_changes();
  j["plan_changes"] = r.plan_changes();
  j["summary"] = nlohmann::json::object();
  for (const auto& [category, kinds] : CountChanges(r)) {
    for (const auto& [kind, n] : kinds) j["summary"][category][kind] = n;
  }
  j["a"] = r.a.summary;
  j["b"] = r.b.summary;
  j["changes"] = nlohmann::json::array();
  for (const auto& c : r.changes) {
    j["changes"].push_back({{"category", c.category},
                            {"subject", c.subject},
                            {"kind", c.kind},
                            {"a", c.a},
                            {"b", c.b},
                            {"layout", c.layout},
                            {"plan", c.plan}});
  }
  return j;
}

std::string RenderDiffText(const DiffResult& r) {
  std::ostringstream o;
  o << "a: " << r.a.name << "\nb: " << r.b.name << "\n";
  switch (r.verdict) {
    case DiffVerdict::kIdentical:
      o << "identical: every file byte for byte the same\n";
      break;
    case DiffVerdict::kLayoutOnly:
      o << "layout only: the same content, stored differently\n";
      break;
    case DiffVerdict::kMemoryPlanOnly:
      o << "memory plan only: the same content with planned tensors at other offsets or planned buffers of other "
           "sizes\n";
      break;
    case DiffVerdict::kDifferent:
      o << "different: " << r.content_changes() << " content change" << (r.content_changes() == 1 ? "" : "s") << "\n";
      break;
  }
  // One line that counts them before the lists: "changes: constant 83 moved; size 2 changed, 1 added".
  const auto counts = CountChanges(r);
  if (!counts.empty()) {
    o << "changes:";
    for (size_t i = 0; i < counts.size(); ++i) {
      o << (i ? "; " : " ") << counts[i].first;
      for (size_t k = 0; k < counts[i].second.size(); ++k) {
        o << (k ? ", " : " ") << counts[i].second[k].second << " " << counts[i].second[k].first;
      }
    }
    o << "\n";
  }
  for (size_t i = 0; i < r.changes.size(); ++i) {
    const DiffChange& c = r.changes[i];
    if (i == 0 || r.changes[i - 1].category != c.category) {
      bool all_layout = true, all_plan = true;
      for (size_t k = i; k < r.changes.size() && r.changes[k].category == c.category; ++k) {
        all_layout = all_layout && r.changes[k].layout;
        all_plan = all_plan && r.changes[k].plan;
      }
      o << c.category << (all_layout ? " (layout only)" : all_plan ? " (memory plan only)" : "") << ":\n";
    }
    const char* mark = c.kind == "added" ? "+" : c.kind == "removed" ? "-" : c.kind == "moved" ? ">" : "~";
    o << "  " << mark << " " << c.subject << ": ";
    if (c.kind == "added") {
      o << c.b;
    } else if (c.kind == "removed" || c.b.empty()) {
      o << c.a;
    } else {
      o << c.a << " -> " << c.b;
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace ptepack
