#include "serialize/model/placement.h"

#include <map>
#include <set>
#include <unordered_map>

#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/dedup.h"

namespace ptepack {

using namespace prog;

namespace {

std::shared_ptr<fb::Table> LayoutFor(const fb::Table& tensor) {
  const auto& FS = fb::FlatTensorSchema();
  auto tl = fb::NewTable(FS, "flat_tensor_flatbuffer.TensorLayout");
  fb::Field(FS, *tl, "scalar_type") = F(tensor, "scalar_type").present()
                                          ? fb::ScalarValue(reflection::Byte, F(tensor, "scalar_type").bits)
                                          : fb::Value{};
  const auto& sizes = F(tensor, "sizes");
  if (sizes.present()) fb::Field(FS, *tl, "sizes") = fb::ScalarVector(reflection::Int, sizes.scalars);
  const auto& dims = F(tensor, "dim_order");
  if (dims.present()) fb::Field(FS, *tl, "dim_order") = fb::ScalarVector(reflection::UByte, dims.scalars);
  return tl;
}

// Where each external key is: (file index in pkg.external, entry index).
// Built once per MoveExternal, so finding a key is O(1), not a scan of every
// entry of every file (300,000 tensors: minutes of memcmp). For a key in
// several files, the last one, as the scans found it.
using KeyIndex = std::unordered_map<std::string, std::pair<size_t, size_t>>;

KeyIndex IndexKeys(const Package& pkg) {
  KeyIndex index;
  for (size_t f = 0; f < pkg.external.size(); ++f) {
    for (size_t e = 0; e < pkg.external[f].entries.size(); ++e) index[pkg.external[f].entries[e].key] = {f, e};
  }
  return index;
}

size_t FileFor(Package& pkg, const std::string& tag) {
  for (size_t f = 0; f < pkg.external.size(); ++f) {
    if (pkg.external[f].tag == tag) return f;
  }
  pkg.external.push_back(ExternalFile{tag, {}});
  return pkg.external.size() - 1;
}

void AddEntry(Package& pkg, KeyIndex& index, size_t file, NamedBlob b) {
  ExternalFile& f = pkg.external[file];
  auto it = index.find(b.key);
  if (it != index.end() && it->second.first == file) {
    if (!f.entries[it->second.second].data.Equals(b.data)) {
      throw Error("duplicate-key",
                  "external key \"" + b.key + "\" is used for two different tensors in " + f.tag + ".ptd");
    }
    return;
  }
  index[b.key] = {file, f.entries.size()};
  f.entries.push_back(std::move(b));
}

bool SameField(const fb::Value& a, const fb::Value& b) {
  if (a.present() != b.present()) return false;
  return !a.present() || (a.bits == b.bits && a.scalars.Equals(b.scalars));
}

// Same scalar type, sizes and dim order: ExecuTorch's runtime checks each external tensor
// against the TensorLayout stored under its key (validateTensorLayout).
bool SameLayout(const fb::Table& a, const fb::Table& b) {
  const auto& FS = fb::FlatTensorSchema();
  for (const char* f : {"scalar_type", "sizes", "dim_order"}) {
    if (!SameField(fb::Field(FS, a, f), fb::Field(FS, b, f))) return false;
  }
  return true;
}

// The key of an external tensor. A named tensor keeps its name; it is an error for one name to
// stand for two layouts or to go to two files (the runtime would check one tensor against the
// other's layout, or refuse the duplicate key when merging the .ptd files). An unnamed tensor
// gets `base` (constant_<buffer> / mutable_<buffer>) unless tensors of another layout, or in
// another file, already use it; then `base_1`, `base_2`, ...
std::string ExternalKey(const Package& pkg, const KeyIndex& index, const std::string& tag, const std::string& base,
                        bool named, const fb::Table& layout) {
  for (int n = 0;; ++n) {
    const std::string key = n == 0 ? base : base + "_" + std::to_string(n);
    auto it = index.find(key);
    if (it == index.end()) return key;
    const ExternalFile* file = &pkg.external[it->second.first];
    const NamedBlob* found = &file->entries[it->second.second];
    const bool same_file = file->tag == tag;
    const bool same_layout = found->tensor_layout && SameLayout(*found->tensor_layout, layout);
    if (same_file && same_layout) return key;
    if (named) {
      throw Error("duplicate-key", "external key \"" + key + "\" names two tensors" +
                                       (same_file ? " of different shapes or types in " + tag + ".ptd"
                                                  : " placed in " + file->tag + ".ptd and " + tag + ".ptd"));
    }
  }
}

bool AllDefault(const fb::Table& t) {
  for (const auto& v : t.fields) {
    if (v.kind != fb::Value::Kind::kAbsent && !(v.kind == fb::Value::Kind::kScalar && v.bits == 0)) return false;
  }
  return true;
}

}  // namespace

void MoveExternal(Package& pkg, const BackendConfig& cfg);

void ApplyPlacement(Package& pkg, const BackendConfig& cfg) {
  fb::Table& p = *pkg.program;
  if (!cfg.emit_stacktrace) {
    for (auto& plan : F(p, "execution_plan").elems) {
      for (auto& ch : F(*plan.table, "chains").elems) F(*ch.table, "stacktrace") = fb::Value{};
    }
  }
  // External placement first: an external mutable weight is keyed by its
  // name, which it keeps (as in ExecuTorch) even when names are not emitted.
  const bool want_const = cfg.external_constants || static_cast<bool>(cfg.external_constants_fn);
  if (want_const || cfg.external_mutable_weights) MoveExternal(pkg, cfg);
  if (!cfg.emit_mutable_buffer_names) {
    ForEachTensor(p, [&](fb::Table&, uint32_t, fb::Table& t) {
      auto& eti = F(t, "extra_tensor_info");
      if (!eti.table || !F(t, "allocation_info").table) return;
      if (fb::AsUInt(F(*eti.table, "location")) != 0) return;  // EXTERNAL keeps its key
      F(*eti.table, "fully_qualified_name") = fb::Value{};
      if (AllDefault(*eti.table)) eti = fb::Value{};
    });
  }
  // Names on constants that stay in the program were only placement hints
  // (ExecuTorch writes names only for external tensors and mutable buffers).
  ForEachTensor(p, [&](fb::Table&, uint32_t, fb::Table& t) {
    auto& eti = F(t, "extra_tensor_info");
    if (!eti.table || F(t, "allocation_info").table || fb::AsUInt(F(*eti.table, "location")) != 0) return;
    F(*eti.table, "fully_qualified_name") = fb::Value{};
    if (AllDefault(*eti.table)) eti = fb::Value{};
  });
}

void MoveExternal(Package& pkg, const BackendConfig& cfg) {
  fb::Table& p = *pkg.program;

  auto& cb = F(p, "constant_buffer");
  std::vector<bool> still_used(cb.elems.size(), false);
  std::vector<bool> mut_used(pkg.mutable_data ? pkg.mutable_data->size() : 0, false);
  std::map<uint32_t, bool> moved_const;  // buffer index -> moved
  // An external tensor's data_buffer_idx indexes ExecuTorch's
  // external_constant_buffer: one entry per distinct content, in first-use
  // order, shared by all tags (_emitter.py, external_constant_hash).
  uint32_t next_external_index = 0;
  DedupIndex external_dedup;
  KeyIndex keys = IndexKeys(pkg);
  ForEachTensor(p, [&](fb::Table& plan, uint32_t vi, fb::Table& t) {
    uint64_t idx = fb::AsUInt(F(t, "data_buffer_idx"));
    auto& eti = F(t, "extra_tensor_info");
    bool external = eti.table && fb::AsUInt(F(*eti.table, "location")) == 1;
    bool planned = F(t, "allocation_info").table != nullptr;
    if (idx == 0 || external) return;
    bool is_mutable = planned && pkg.mutable_data && idx < pkg.mutable_data->size();
    if (planned && !is_mutable) return;
    ConstantTensorInfo info;
    info.method = F(plan, "name").str;
    info.value_index = vi;
    info.name = eti.table ? F(*eti.table, "fully_qualified_name").str : "";
    info.scalar_type = static_cast<int>(fb::AsInt(F(t, "scalar_type")));
    for (size_t k = 0; k + 4 <= F(t, "sizes").scalars.size; k += 4) {
      info.sizes.push_back(static_cast<int32_t>(LoadU32(F(t, "sizes").scalars.data + k)));
    }
    info.nbytes = TensorNbytes(t);
    info.mutable_weight = is_mutable;
    std::optional<std::string> tag;
    if (is_mutable) {
      if (cfg.external_mutable_weights) tag = cfg.external_tag;
    } else if (cfg.external_constants_fn) {
      tag = cfg.external_constants_fn(info);
    } else if (cfg.external_constants) {
      tag = cfg.external_tag;
    }
    if (!tag) {
      if (is_mutable)
        mut_used[idx] = true;
      else if (idx < still_used.size())
        still_used[idx] = true;
      return;
    }
    Bytes data;
    if (is_mutable) {
      data = (*pkg.mutable_data)[idx];
    } else {
      if (idx >= cb.elems.size()) throw Error("index-out-of-range", "tensor data_buffer_idx past constant_buffer");
      data = F(*cb.elems[idx].table, "storage").scalars;
      moved_const[static_cast<uint32_t>(idx)] = true;
    }
    if (info.nbytes > 0 && info.nbytes <= data.size) data = data.Sub(0, info.nbytes);
    auto layout = LayoutFor(t);
    const std::string key = ExternalKey(
        pkg, keys, *tag, !info.name.empty() ? info.name : (is_mutable ? "mutable_" : "constant_") + std::to_string(idx),
        !info.name.empty(), *layout);
    // Alignment 1, as serialize_for_executorch adds external constants to its
    // NamedDataStore: in the .ptd they are aligned to its segment alignment.
    NamedBlob b{key, data, 1, layout};
    AddEntry(pkg, keys, FileFor(pkg, *tag), std::move(b));
    if (!eti.table) eti = fb::TableValue(New("ExtraTensorInfo"));
    F(*eti.table, "fully_qualified_name") = fb::StringValue(key);
    F(*eti.table, "location") = fb::UIntValue(reflection::Byte, 1);
    F(*eti.table, "mutable_data_segments_idx") = fb::Value{};
    uint32_t external_index = next_external_index;
    if (auto same = external_dedup.FindOrAdd(data, external_index)) {
      external_index = static_cast<uint32_t>(*same);
    } else {
      ++next_external_index;
    }
    F(t, "data_buffer_idx") = fb::UIntValue(reflection::UInt, external_index);
  });

  // Renumber what stays: constants keep index 0 as the reserved placeholder.
  if (!moved_const.empty()) {
    std::vector<uint32_t> remap(cb.elems.size(), 0);
    std::vector<fb::Value> kept;
    for (size_t i = 0; i < cb.elems.size(); ++i) {
      if (i == 0 || still_used[i]) {
        remap[i] = static_cast<uint32_t>(kept.size());
        kept.push_back(cb.elems[i]);
      }
    }
    ForEachTensor(p, [&](fb::Table&, uint32_t, fb::Table& t) {
      auto& eti = F(t, "extra_tensor_info");
      if ((eti.table && fb::AsUInt(F(*eti.table, "location")) == 1) || F(t, "allocation_info").table) return;
      uint64_t idx = fb::AsUInt(F(t, "data_buffer_idx"));
      if (idx > 0 && idx < remap.size()) F(t, "data_buffer_idx") = fb::UIntValue(reflection::UInt, remap[idx]);
    });
    cb.elems = std::move(kept);
  }
  if (cfg.external_mutable_weights && pkg.mutable_data) {
    bool any_left = false;
    for (size_t i = 1; i < mut_used.size(); ++i) any_left = any_left || mut_used[i];
    if (!any_left) pkg.mutable_data.reset();
  }
}

}  // namespace ptepack
