#include "serialize/model/placement.h"

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "flat_tensor_views_generated.h"
#include "layout/file_plan.h"
#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/dedup.h"

namespace ptepack {

using namespace prog;
using executorch_flatbuffer::TensorDataLocation;

namespace {

std::shared_ptr<fb::Table> LayoutFor(const fb::Table& t) {
  const Tensor tensor{t};
  auto tl = ptd::TensorLayout<>::New();
  ptd::TensorLayout layout{*tl};
  layout.scalar_type() =
      tensor.scalar_type().present() ? fb::ScalarValue(reflection::Byte, tensor.scalar_type().bits()) : fb::Value{};
  const auto& sizes = tensor.sizes();
  if (sizes.present()) layout.sizes() = fb::ScalarVector(reflection::Int, sizes.scalars());
  const auto& dims = tensor.dim_order();
  if (dims.present()) layout.dim_order() = fb::ScalarVector(reflection::UByte, dims.scalars());
  return tl;
}

// Where each external key is: (file index in pkg.external, entry index).
// Built once per placement, so finding a key is O(1), not a scan of every
// entry of every file (300,000 tensors: minutes of memcmp). For a key in
// several files, the last one, as the scans found it. The keys stay in the
// entries: a slot is the two indexes (8 bytes), in a table open-addressed by
// the key's hash. An unordered_map of copied keys was 29 MB for 300,000
// tensors, live at the peak of a split (placement's).
class KeyIndex {
 public:
  struct Where {
    size_t file, entry;
  };
  explicit KeyIndex(const PackageParts& pkg) : pkg_(pkg) {
    for (size_t f = 0; f < pkg.external.size(); ++f) {
      for (size_t e = 0; e < pkg.external[f].entries.size(); ++e) Set(pkg.external[f].entries[e].key, f, e);
    }
  }

  std::optional<Where> Find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const Slot& s = slots_[Probe(key)];
    if (s.file == 0) return std::nullopt;
    return Where{s.file - 1u, s.entry};
  }

  // Adds the key, or moves it to (file, entry).
  void Set(std::string_view key, size_t file, size_t entry) {
    if (file >= UINT32_MAX || entry > UINT32_MAX) throw Error("limit-exceeded", "too many external entries");
    if (4 * (used_ + 1) > 3 * slots_.size()) Grow();
    Slot& s = slots_[Probe(key)];
    if (s.file == 0) ++used_;
    s = Slot{static_cast<uint32_t>(file + 1), static_cast<uint32_t>(entry)};
  }

 private:
  struct Slot {
    uint32_t file = 0;  // file index + 1; 0: empty
    uint32_t entry = 0;
  };
  const std::string& KeyOf(const Slot& s) const { return pkg_.external[s.file - 1].entries[s.entry].key; }
  // The slot holding `key`, or the empty slot where it would go.
  size_t Probe(std::string_view key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = std::hash<std::string_view>()(key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].file == 0 || KeyOf(slots_[i]) == key) return i;
    }
  }
  void Grow() {
    std::vector<Slot> old(slots_.empty() ? 1024 : 2 * slots_.size());
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.file != 0) slots_[Probe(KeyOf(s))] = s;
    }
  }

  const PackageParts& pkg_;
  std::vector<Slot> slots_;  // a power of two, at most 3/4 used
  size_t used_ = 0;
};

// A new file's entries are reserved for `expected` tensors: growing by
// doubling held up to twice them.
size_t FileFor(PackageParts& pkg, const std::string& tag, size_t expected) {
  for (size_t f = 0; f < pkg.external.size(); ++f) {
    if (pkg.external[f].tag == tag) return f;
  }
  pkg.external.push_back(ExternalFile{tag, {}});
  pkg.external.back().entries.reserve(expected);
  return pkg.external.size() - 1;
}

// Adds `b` to `file` under a key ExternalKey chose: `found` is the entry the
// key already has (in this file, the data must be the same), or null.
// Returns the entry that holds `b`'s bytes.
KeyIndex::Where AddEntry(PackageParts& pkg, KeyIndex& index, size_t file, NamedBlob b,
                         const std::optional<KeyIndex::Where>& found) {
  ExternalFile& f = pkg.external[file];
  if (found && found->file == file) {
    if (!f.entries[found->entry].data.Equals(b.data)) {
      throw Error("duplicate-key",
                  "external key \"" + b.key + "\" is used for two different tensors in " + f.tag + ".ptd");
    }
    return *found;
  }
  f.entries.push_back(std::move(b));
  index.Set(f.entries.back().key, file, f.entries.size() - 1);
  return KeyIndex::Where{file, f.entries.size() - 1};
}

bool SameField(const fb::Value& a, const fb::Value& b) {
  if (a.present() != b.present()) return false;
  return !a.present() || (a.bits() == b.bits() && a.scalars().Equals(b.scalars()));
}

// Same scalar type, sizes and dim order: ExecuTorch's runtime checks each external tensor
// against the TensorLayout stored under its key (validateTensorLayout).
bool SameLayout(const fb::Table& a, const fb::Table& b) {
  const ptd::TensorLayout la{a}, lb{b};
  return SameField(la.scalar_type(), lb.scalar_type()) && SameField(la.sizes(), lb.sizes()) &&
         SameField(la.dim_order(), lb.dim_order());
}

// The key of an external tensor. A named tensor keeps its name; it is an error for one name to
// stand for two layouts or to go to two files (the runtime would check one tensor against the
// other's layout, or refuse the duplicate key when merging the .ptd files). An unnamed tensor
// gets `base` (constant_<buffer> / mutable_<buffer>) unless tensors of another layout, or in
// another file, already use it; then `base_1`, `base_2`, ...
// `*existing` is where the returned key already is (in `tag`'s file, of the
// same layout), or empty for a new key: one lookup serves AddEntry too.
std::string ExternalKey(const PackageParts& pkg, const KeyIndex& index, const std::string& tag, const std::string& base,
                        bool named, const fb::Table& layout, std::optional<KeyIndex::Where>* existing) {
  existing->reset();
  for (int n = 0;; ++n) {
    std::string key = n == 0 ? base : base + "_" + std::to_string(n);
    const std::optional<KeyIndex::Where> at = index.Find(key);
    if (!at) return key;
    const ExternalFile* file = &pkg.external[at->file];
    const NamedBlob* found = &file->entries[at->entry];
    const bool same_file = file->tag == tag;
    const bool same_layout = found->tensor_layout && SameLayout(*found->tensor_layout, layout);
    if (same_file && same_layout) {
      *existing = at;
      return key;
    }
    if (named) {
      throw Error("duplicate-key", "external key \"" + key + "\" names two tensors" +
                                       (same_file ? " of different shapes or types in " + tag + ".ptd"
                                                  : " placed in " + file->tag + ".ptd and " + tag + ".ptd"));
    }
  }
}

bool AllDefault(const fb::Table& t) {
  for (const auto& v : t.fields) {
    if (v.kind != fb::Value::Kind::kAbsent && !(v.kind == fb::Value::Kind::kScalar && v.bits() == 0)) return false;
  }
  return true;
}

// Drops a name that is only a placement hint from a tensor that keeps its
// data in the program, and the ExtraTensorInfo if nothing else is left.
// `t` is owned (fb::Own); its ExtraTensorInfo is owned here.
void DropName(fb::Table& t) {
  auto& eti = Tensor{t}.extra_tensor_info();
  ExtraTensorInfo info{fb::Own(eti.mutable_table())};
  info.fully_qualified_name() = fb::Value{};
  if (AllDefault(*eti.table())) eti = fb::Value{};
}

// DropName would change the tensor (so it is owned only then).
bool NameToDrop(const fb::Table& t) {
  const auto& eti = Tensor{t}.extra_tensor_info();
  return eti.table() &&
         (ExtraTensorInfo{std::as_const(*eti.table())}.fully_qualified_name().present() || AllDefault(*eti.table()));
}

bool HasSegmentInfo(const fb::Table& t) {
  const auto& eti = Tensor{t}.extra_tensor_info();
  return eti.table() && ExtraTensorInfo{*eti.table()}.get_location() == TensorDataLocation::SEGMENT;
}

// Moves the constants (and mutable weights) the config places externally
// into ExternalFile entries, in program order, and renumbers what stays.
class ExternalMover {
 public:
  ExternalMover(PackageParts& pkg, const BackendConfig& cfg)
      : pkg_(pkg),
        cfg_(cfg),
        cb_(Program{*pkg.program}.constant_buffer()),
        still_used_(cb_.elems().size(), false),
        mut_used_(pkg.mutable_data ? pkg.mutable_data->size() : 0, false),
        keys_(pkg),
        external_dedup_([this](size_t id) {
          const KeyIndex::Where& w = external_at_[id];
          return pkg_.external[w.file].entries[w.entry].data;
        }) {}

  void Run() {
    CountConstantUses();
    ForEachTensorCow(*pkg_.program, [&](const fb::Table& plan, uint32_t vi, const fb::Table& t,
                                        const EditTensorFn& edit) { Visit(plan, vi, t, edit); });
    if (any_const_moved_) RenumberConstants();
    if (cfg_.external_mutable_weights && pkg_.mutable_data) DropMutableDataIfUnused();
  }

 private:
  void Visit(const fb::Table& plan, uint32_t vi, const fb::Table& t, const EditTensorFn& edit) {
    Tensor tensor{t};
    const uint64_t idx = tensor.get_data_buffer_idx();
    const bool planned = IsPlanned(t);
    if (idx == 0 || IsExternal(t)) return;
    const bool is_mutable = planned && pkg_.mutable_data && idx < pkg_.mutable_data->size();
    if (planned && !is_mutable) return;
    ConstantTensorInfo info = InfoOf(plan, vi, t, is_mutable);
    std::optional<std::string> tag = ExternalTagFor(info, cfg_);
    if (tag) {
      Move(t, edit, idx, info, *tag);
    } else if (is_mutable) {
      mut_used_[idx] = true;
    } else if (idx < still_used_.size()) {
      still_used_[idx] = true;
    }
  }

  static ConstantTensorInfo InfoOf(const fb::Table& plan, uint32_t vi, const fb::Table& t, bool is_mutable) {
    Tensor tensor{t};
    const auto& eti = tensor.extra_tensor_info();
    ConstantTensorInfo info;
    info.method = ExecutionPlan{plan}.get_name();
    info.value_index = vi;
    info.name = eti.table() ? ExtraTensorInfo{*eti.table()}.get_fully_qualified_name() : "";
    info.scalar_type = static_cast<ScalarType>(tensor.get_scalar_type());
    info.sizes = tensor.get_sizes();
    info.nbytes = TensorNbytes(t).value_or(0);
    info.mutable_weight = is_mutable;
    return info;
  }

  Bytes DataOf(uint64_t idx, const ConstantTensorInfo& info) {
    Bytes data;
    if (info.mutable_weight) {
      data = (*pkg_.mutable_data)[idx];
    } else {
      if (idx >= cb_.elems().size()) throw Error("index-out-of-range", "tensor data_buffer_idx past constant_buffer");
      data = Buffer{*cb_.elems()[idx].table()}.get_storage();
      any_const_moved_ = true;
      // The last tensor of this constant moved: its Buffer table is freed
      // now (the data is a view of the input), so the tables made for the
      // tensors that follow can take its memory. Freed all at once at the
      // end they were 29 MB (300,000 constants) above what placement needs
      // at its peak, which was the split's.
      if (--uses_[idx] == 0) cb_.mutable_elems()[idx].mutable_table().reset();
    }
    if (info.nbytes > 0 && info.nbytes <= data.size) data = data.Sub(0, info.nbytes);
    return data;
  }

  // How many tensors each constant_buffer entry has that may move (a
  // constant tensor not yet external): DataOf frees an entry once they all
  // moved.
  void CountConstantUses() {
    uses_.assign(cb_.elems().size(), 0);
    ForEachTensorCow(*pkg_.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn&) {
      const uint64_t idx = Tensor{t}.get_data_buffer_idx();
      if (idx != 0 && idx < uses_.size() && !IsPlanned(t) && !IsExternal(t)) ++uses_[idx];
    });
  }

  // `t` is read to place its data; the change to it is `edit`'s (kept, not
  // made, while the value is still in the input: ForEachTensorCow).
  void Move(const fb::Table& t, const EditTensorFn& edit, uint64_t idx, const ConstantTensorInfo& info,
            const std::string& tag) {
    Bytes data = DataOf(idx, info);
    const std::shared_ptr<fb::Table>& layout = SharedLayoutFor(t);
    const bool named = !info.name.empty();
    const std::string base = named ? info.name : (info.mutable_weight ? "mutable_" : "constant_") + std::to_string(idx);
    std::optional<KeyIndex::Where> found;
    const std::string key = ExternalKey(pkg_, keys_, tag, base, named, *layout, &found);
    // Alignment 1, as serialize_for_executorch adds external constants to its
    // NamedDataStore: in the .ptd they are aligned to its segment alignment.
    const KeyIndex::Where at =
        AddEntry(pkg_, keys_, FileFor(pkg_, tag, ExpectedPerFile()), NamedBlob{key, data, 1, layout}, found);
    // An external tensor's data_buffer_idx indexes ExecuTorch's
    // external_constant_buffer: one entry per distinct content, in first-use
    // order, shared by all tags (_emitter.py, external_constant_hash).
    uint32_t external_index = next_external_index_;
    if (auto same = external_dedup_.FindOrAdd(data, external_index)) {
      external_index = static_cast<uint32_t>(*same);
    } else {
      ++next_external_index_;
      external_at_.push_back(at);  // the entry holds these bytes
    }
    // The key's bytes in one arena: a shared std::string a tensor
    // (set_fully_qualified_name) was 64 bytes of heap each, 19 MB for
    // 300,000 tensors, held through the program's encode.
    fb::Value name = key_bytes_.CopyOf(fb::Value::Kind::kString, reflection::None, key.data(), key.size());
    edit([name = std::move(name), external_index](fb::Table& owned) {
      Tensor tensor{owned};
      auto& eti = tensor.extra_tensor_info();
      if (!eti.table()) eti = fb::TableValue(ExtraTensorInfo<>::New());
      ExtraTensorInfo external{fb::Own(eti.mutable_table())};
      external.fully_qualified_name() = name;
      external.set_location(TensorDataLocation::EXTERNAL);
      external.mutable_data_segments_idx() = fb::Value{};
      tensor.set_data_buffer_idx(external_index);
    });
  }

  // Every constant and mutable weight may go to one tag's file; a callback
  // may spread them over several (then nothing is reserved).
  size_t ExpectedPerFile() const { return cfg_.external_constants_fn ? 0 : still_used_.size() + mut_used_.size(); }

  // One TensorLayout table per distinct type, sizes and dim order, shared by
  // the entries that have it (read-only: fb::Own copies a shared table). A
  // table per tensor was 60 MB of a split of 300,000 constants of one shape;
  // the .ptd encodes each entry's layout all the same.
  const std::shared_ptr<fb::Table>& SharedLayoutFor(const fb::Table& t) {
    const Tensor tensor{t};
    const Bytes sizes = tensor.sizes().scalars();
    const Bytes dims = tensor.dim_order().scalars();
    layout_key_.clear();
    const uint8_t flags = static_cast<uint8_t>(tensor.scalar_type().present()) |
                          static_cast<uint8_t>(tensor.sizes().present() << 1) |
                          static_cast<uint8_t>(tensor.dim_order().present() << 2);
    const uint64_t st = tensor.scalar_type().bits();
    const uint64_t n = sizes.size;
    layout_key_.append(reinterpret_cast<const char*>(&flags), 1);
    layout_key_.append(reinterpret_cast<const char*>(&st), sizeof st);
    layout_key_.append(reinterpret_cast<const char*>(&n), sizeof n);
    layout_key_.append(reinterpret_cast<const char*>(sizes.data), sizes.size);
    layout_key_.append(reinterpret_cast<const char*>(dims.data), dims.size);
    auto it = layouts_.find(layout_key_);
    if (it == layouts_.end()) it = layouts_.emplace(layout_key_, LayoutFor(t)).first;
    return it->second;
  }

  // Renumbers what stays: constants keep index 0 as the reserved placeholder.
  void RenumberConstants() {
    std::vector<uint32_t> remap(cb_.elems().size(), 0);
    std::vector<fb::Value> kept;
    for (size_t i = 0; i < cb_.elems().size(); ++i) {
      if (i == 0 || still_used_[i]) {
        remap[i] = static_cast<uint32_t>(kept.size());
        kept.push_back(cb_.elems()[i]);
      }
    }
    ForEachTensorCow(*pkg_.program, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn& edit) {
      if (IsExternal(t) || IsPlanned(t)) return;
      uint64_t idx = Tensor{t}.get_data_buffer_idx();
      if (idx == 0 || idx >= remap.size() || remap[idx] == idx) return;
      edit([to = remap[idx]](fb::Table& owned) { Tensor{owned}.set_data_buffer_idx(to); });
    });
    cb_.mutable_elems() = std::move(kept);
  }

  void DropMutableDataIfUnused() {
    bool any_left = false;
    for (size_t i = 1; i < mut_used_.size(); ++i) any_left = any_left || mut_used_[i];
    if (!any_left) pkg_.mutable_data.reset();
  }

  PackageParts& pkg_;
  const BackendConfig& cfg_;
  fb::Value& cb_;  // Program.constant_buffer
  std::vector<bool> still_used_;
  std::vector<uint32_t> uses_;  // CountConstantUses
  std::vector<bool> mut_used_;
  KeyIndex keys_;
  std::unordered_map<std::string, std::shared_ptr<fb::Table>> layouts_;  // SharedLayoutFor
  std::string layout_key_;
  bool any_const_moved_ = false;
  uint32_t next_external_index_ = 0;
  std::vector<KeyIndex::Where> external_at_;  // an entry with each external index's bytes
  DedupIndex external_dedup_;                 // reads them from there
  fb::TableArena key_bytes_;                  // the moved tensors' keys
};

// Drops every Chain.stacktrace (owning only the plans and chains that have one).
void DropStacktraces(fb::Table& p) {
  for (auto& plan : Program{p}.execution_plan().mutable_elems()) {
    const auto& chains = ExecutionPlan{std::as_const(*plan.table())}.chains().elems();
    for (size_t c = 0; c < chains.size(); ++c) {
      if (!Chain{std::as_const(*chains[c].table())}.stacktrace().present()) continue;
      auto& owned = ExecutionPlan{fb::Own(plan.mutable_table())}.chains().mutable_elems();
      Chain{fb::Own(owned[c].mutable_table())}.stacktrace() = fb::Value{};
    }
  }
}

}  // namespace

void ApplyPlacement(PackageParts& pkg, const BackendConfig& cfg) {
  fb::Table& p = *pkg.program;
  if (!cfg.emit_stacktrace) DropStacktraces(p);
  // External placement first: an external mutable weight is keyed by its
  // name, which it keeps (as in ExecuTorch) even when names are not emitted.
  const bool want_const = cfg.external_constants || static_cast<bool>(cfg.external_constants_fn);
  if (want_const || cfg.external_mutable_weights) ExternalMover(pkg, cfg).Run();
  if (!cfg.emit_mutable_buffer_names) {
    ForEachTensorCow(p, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn& edit) {
      if (IsPlanned(t) && HasSegmentInfo(t) && NameToDrop(t)) edit(DropName);  // EXTERNAL keeps its key
    });
  }
  // Names on constants that stay in the program were only placement hints
  // (ExecuTorch writes names only for external tensors and mutable buffers).
  ForEachTensorCow(p, [&](const fb::Table&, uint32_t, const fb::Table& t, const EditTensorFn& edit) {
    if (!IsPlanned(t) && HasSegmentInfo(t) && NameToDrop(t)) edit(DropName);
  });
}

}  // namespace ptepack
