// `ptepack inspect` and `ptepack verify`.
#include <cstdlib>
#include <iostream>

#include "config/backend_config.h"
#include "serialize/model/package.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "tools/commands.h"

namespace ptepack::cli {
namespace {

struct Loaded {
  std::unique_ptr<PteFile> pte;
  std::unique_ptr<PtdFile> lone_ptd;  // when FILE itself is a .ptd
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptd_ptrs() const {
    std::vector<const PtdFile*> v;
    for (const auto& p : ptds) v.push_back(p.get());
    return v;
  }
};

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

struct Common {
  std::string file;
  std::vector<std::string> ptds;
  bool json = false;
  bool allow_legacy_ptd = false;
  uint64_t segment_alignment = 0;
  uint64_t tensor_alignment = 0;
};

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

// Adds to each external tensor of `d` its dtype, shape, dim order and bytes,
// and those of its .ptd entry (when a given .ptd holds the key), so that a
// script can compare them.
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

// A .pte with external tensors verified without any .ptd: nothing about them
// was checked; say so (a warning, an error with --strict).
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

// The config the file was written with, as `repack` infers it, and whether
// each segment starts where that segment alignment puts it. Where it cannot
// be inferred (invalid file, external data not given) the reason is said.
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

}  // namespace

bool IsPtdFile(const std::string& path) {
  auto m = MappedFile::Open(path);
  return m->size() >= 8 && std::memcmp(m->data() + 4, kFlatTensorId, 4) == 0;
}

void RegisterInspect(CLI::App& app) {
  auto o = std::make_shared<Common>();
  auto* c = app.add_subcommand("inspect",
                               "Explain a file's layout: header fields, methods with inputs and outputs, "
                               "operators, delegates and where their data lives, segments, constants with "
                               "offsets and alignment, named data, external keys, mutable buffer names, "
                               "stack traces. Problems found are listed too.");
  AddCommon(c, *o);
  c->callback([o]() {
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    ro.allow_legacy_ptd = true;  // inspect explains legacy files; verify judges them
    Loaded l = Load(o->file, o->ptds, ro);
    if (!l.pte) {  // a .ptd: streamed, one entry at a time
      if (o->json) {
        WritePtdJson(*l.lone_ptd, std::cout);
      } else {
        WritePtdText(*l.lone_ptd, [](const std::string& s) { std::cout << EscapeControl(s, /*keep_newlines=*/true); });
      }
      bool ok = l.lone_ptd->ok();
      for (const auto& p : l.ptds) ok = ok && p->ok();
      g_exit = ok ? kOk : kInvalid;
      return;
    }
    nlohmann::json d = l.pte ? DescribePte(*l.pte, l.ptd_ptrs()) : DescribePtd(*l.lone_ptd);
    if (l.pte) AddExternalLayouts(d, *l.pte, l.ptd_ptrs());
    if (l.pte) AddInferredConfig(d, *l.pte, l.ptd_ptrs());
    if (o->json) {
      std::cout << d.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      // Names come from the file: escape control characters (terminal escapes).
      std::cout << EscapeControl(l.pte ? RenderPteText(d) : RenderPtdText(d), /*keep_newlines=*/true);
    }
    bool ok = l.pte ? l.pte->ok() : l.lone_ptd->ok();
    for (const auto& p : l.ptds) ok = ok && p->ok();
    g_exit = ok ? kOk : kInvalid;
  });
}

void RegisterVerify(CLI::App& app) {
  auto o = std::make_shared<Common>();
  auto io = std::make_shared<IntegrityOptions>();
  auto checksum = std::make_shared<bool>(false);
  auto strict = std::make_shared<bool>(false);
  auto* c = app.add_subcommand("verify",
                               "Check a file: headers, FlatBuffers verifier, every segment, offset, size, "
                               "alignment, index and string. Exits 0 if valid, 1 with the problems otherwise.");
  AddCommon(c, *o);
  c->add_flag("--strict", *strict,
              "Warnings fail too (misaligned constants, deprecated constant_buffer, external tensors not "
              "checked for lack of a --ptd, ...)");
  c->add_flag("--checksum", *checksum,
              "Also compute XXH3-64 checksums of the program region, of each segment and of the padding "
              "(reads all data; without it verify only reads headers and flatbuffers)");
  c->add_option("--write-manifest", io->write_manifest,
                "Write the checksums to this JSON manifest (implies --checksum; only for valid files)");
  c->add_option("--manifest", io->manifest,
                "Compare the checksums with this manifest (implies --checksum); a difference is an error "
                "naming the segment")
      ->check(CLI::ExistingFile);
  c->callback([o, io, checksum, strict]() {
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    ro.allow_legacy_ptd = o->allow_legacy_ptd;
    Loaded l = Load(o->file, o->ptds, ro);
    if (l.pte && l.ptds.empty() && l.pte->program()) NoteUncheckedExternal(*l.pte);
    std::vector<const Report*> reports;
    if (l.pte) reports.push_back(&l.pte->report());
    if (l.lone_ptd) reports.push_back(&l.lone_ptd->report());
    for (const auto& p : l.ptds) reports.push_back(&p->report());
    bool ok = true;
    size_t warnings = 0;
    std::vector<std::string> unchecked;
    size_t external_unchecked = 0;
    for (const Report* r : reports) {
      ok = ok && r->ok();
      for (const auto& f : r->findings()) {
        if (f.severity != Finding::Severity::kWarning) continue;
        ++warnings;
        if (f.code == "external-not-checked") {
          external_unchecked = l.pte ? l.pte->ExternalKeys().size() : 0;
          unchecked.push_back("external tensors (no --ptd)");
        }
        if (f.code == "legacy-format") unchecked.push_back("a legacy-layout .ptd, accepted for older runtimes only");
      }
    }
    if (*strict && warnings > 0) ok = false;
    const bool sums = *checksum || !io->write_manifest.empty() || !io->manifest.empty();
    IntegrityResult ir;
    if (sums && ok) {
      std::vector<const PteFile*> ptes;
      std::vector<const PtdFile*> ptds = l.ptd_ptrs();
      if (l.pte) ptes.push_back(l.pte.get());
      if (l.lone_ptd) ptds.insert(ptds.begin(), l.lone_ptd.get());
      ir = RunIntegrity(ptes, ptds, *io);
      for (const auto& r : ir.reports) reports.push_back(&r);
      ok = ir.ok();
    }
    if (o->json) {
      nlohmann::json j{{"file", o->file},
                       {"valid", ok},
                       {"strict", *strict},
                       {"not_checked", unchecked},
                       {"findings", FindingsJson(reports)}};
      if (!ir.files.empty()) j["checksums"] = ManifestJson(ir.files)["files"];
      if (!io->write_manifest.empty() && !ir.files.empty()) j["manifest_written"] = io->write_manifest;
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      for (const Report* r : reports) {
        for (const auto& f : r->findings()) std::cerr << EscapeControl(f.ToString()) << "\n";
      }
      for (const auto& f : ir.files) std::cout << RenderChecksumsText(f);
      if (sums && ir.files.empty()) std::cerr << o->file << ": checksums skipped: the file is not valid\n";
      if (!io->write_manifest.empty() && !ir.files.empty()) {
        std::cout << "manifest written: " << io->write_manifest << "\n";
      }
      if (!io->manifest.empty() && !ir.files.empty() && ok) {
        std::cout << "manifest " << io->manifest << ": all checksums match\n";
      }
      if (ok) {
        std::string note;
        if (external_unchecked > 0) {
          // Only the program was checked (repack would refuse it, naming the missing data).
          note = " (program only: " + std::to_string(external_unchecked) +
                 " tensor(s) live in a .ptd data file that was not given; pass it with --ptd to check them)";
        }
        std::vector<std::string> others;  // the external tensors are said above
        for (const auto& u : unchecked) {
          if (u != "external tensors (no --ptd)") others.push_back(u);
        }
        if (!others.empty()) {
          note += " (not checked: ";
          for (size_t i = 0; i < others.size(); ++i) note += (i ? "; " : "") + others[i];
          note += ")";
        }
        if (warnings > 0) note += " with " + std::to_string(warnings) + " warning" + (warnings > 1 ? "s" : "");
        std::cout << o->file << ": OK" << note << "\n";
      } else {
        std::cerr << o->file << ": INVALID" << (*strict && warnings > 0 ? " (--strict: warnings fail)" : "") << "\n";
      }
    }
    g_exit = ok ? kOk : kInvalid;
  });
}

}  // namespace ptepack::cli
