#include "tools/read_common.h"

namespace ptepack::cli {

Loaded Load(const std::string& file, const std::vector<std::string>& ptd_paths, const ReadOptions& ro) {
  Loaded l;
  if (IsPtdFile(file)) {
    l.lone_ptd = PtdFile::Open(file, ro);
    return l;
  }
  l.pte = PteFile::Open(file, ro);
  for (const auto& p : ptd_paths) l.ptds.push_back(PtdFile::Open(p, ro));
  if (!ptd_paths.empty()) l.pte->CheckExternalKeys(l.ptd_ptrs());
  return l;
}

void AddCommon(CLI::App* c, Common& o) {
  c->add_option("FILE", o.file, "A .pte program (or a .ptd data file)")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o.ptds, "External data file(s) the program refers to; checks every external key")
      ->check(CLI::ExistingFile);
  c->add_flag("--json", o.json, "Print machine-readable JSON instead of text");
  // Alignments are powers of two, as ExecuTorch's config requires (0: no extra check).
  const CLI::Validator power_of_two(
      [](std::string& v) -> std::string {
        uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
        return n == 0 || IsPowerOfTwo(n) ? "" : "must be a power of two (found " + v + ")";
      },
      "POWER OF TWO");
  c->add_option("--segment-alignment", o.segment_alignment,
                "Also require every segment to start at a multiple of N (a power of two)")
      ->check(power_of_two);
  c->add_option("--tensor-alignment", o.tensor_alignment,
                "Also require every constant tensor to start at a multiple of N within its segment (a power of two)")
      ->check(power_of_two);
  c->add_flag("--allow-legacy-ptd", o.allow_legacy_ptd,
              "Accept .ptd files in the FlatTensor layout of before June 2025 (older runtimes load them; "
              "current ones do not: `ptepack repack --upgrade-ptd` rewrites them)");
}

nlohmann::json LayoutJson(int scalar_type, std::vector<int64_t> sizes, std::vector<int64_t> dim_order,
                          std::optional<uint64_t> bytes) {
  nlohmann::json j{{"dtype", ScalarTypeName(scalar_type)}, {"shape", sizes}, {"dim_order", dim_order}};
  j["bytes"] = bytes ? nlohmann::json(*bytes) : nlohmann::json(nullptr);
  return j;
}

void AddExternalLayouts(nlohmann::json& d, const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  const auto* p = pte.program();
  if (!p || !p->execution_plan() || !d.contains("external_tensors")) return;
  for (auto& e : d["external_tensors"]) {
    const std::string method = e.value("method", "");
    const size_t vi = e.value("value", size_t{0});
    for (const auto* plan : *p->execution_plan()) {
      if (!plan->name() || plan->name()->str() != method || !plan->values() || vi >= plan->values()->size()) continue;
      const auto* t = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(vi))->val_as_Tensor();
      if (!t) continue;
      std::vector<int64_t> sizes, dims;
      if (t->sizes()) sizes.assign(t->sizes()->begin(), t->sizes()->end());
      if (t->dim_order()) dims.assign(t->dim_order()->begin(), t->dim_order()->end());
      nlohmann::json l = LayoutJson(static_cast<int>(t->scalar_type()), sizes, dims, TensorNbytes(*t));
      for (auto it = l.begin(); it != l.end(); ++it) e[it.key()] = it.value();
      break;
    }
    for (const PtdFile* ptd : ptds) {
      for (const auto& pe : ptd->entries()) {
        if (pe.key != e.value("key", "")) continue;
        nlohmann::json pj = pe.has_layout
                                ? LayoutJson(pe.scalar_type, std::vector<int64_t>(pe.sizes.begin(), pe.sizes.end()),
                                             std::vector<int64_t>(pe.dim_order.begin(), pe.dim_order.end()), pe.size)
                                : nlohmann::json{{"bytes", pe.size}};
        pj["file"] = ptd->name();
        e["ptd_entry"] = pj;
      }
    }
  }
}

void NoteUncheckedExternal(PteFile& pte) {
  std::vector<std::string> keys = pte.ExternalKeys();
  if (keys.empty()) return;
  std::string list;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) list += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) list += ", ...";
  pte.mutable_report().Warn("external-not-checked",
                            std::to_string(keys.size()) + " external tensors need a .ptd; not checked (keys: " + list +
                                "); give the data files with --ptd",
                            std::nullopt, "--ptd FILE.ptd", "no .ptd");
}

void AddInferredConfig(nlohmann::json& d, const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  uint64_t segment_alignment = 0;
  try {
    if (!pte.ok()) throw Error("invalid", "the file has errors");
    Package pkg = PackageFromPte(pte, ptds);
    InferredConfig inf = InferConfig(pte, pkg, ptds);
    d["config"] = inf.config.ToJson();
    d["config"]["reproduces_file_exactly"] = inf.exact;
    segment_alignment = inf.config.segment_alignment;
  } catch (const Error& e) {
    d["config"] = {{"inferred", false}, {"reason", e.finding().message}};
  }
  if (segment_alignment == 0 || !d.contains("segments")) return;
  for (auto& s : d["segments"]) {
    s["segment_alignment"] = segment_alignment;
    s["aligned"] = s["file_offset"].get<uint64_t>() % segment_alignment == 0;
  }
}

bool IsPtdFile(const std::string& path) {
  auto m = MappedFile::Open(path);
  return m->size() >= 8 && std::memcmp(m->data() + 4, kFlatTensorId, 4) == 0;
}

}  // namespace ptepack::cli
