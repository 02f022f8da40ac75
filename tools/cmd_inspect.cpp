// `ptepack inspect` and `ptepack verify`.
#include <iostream>

#include "serialize/checksum.h"
#include "serialize/describe.h"
#include "serialize/ptd_reader.h"
#include "serialize/pte_reader.h"
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
  uint64_t segment_alignment = 0;
  uint64_t tensor_alignment = 0;
};

void AddCommon(CLI::App* c, Common& o) {
  c->add_option("FILE", o.file, "A .pte program (or a .ptd data file)")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o.ptds, "External data file(s) the program refers to; checks every external key")
      ->check(CLI::ExistingFile);
  c->add_flag("--json", o.json, "Print machine-readable JSON instead of text");
  c->add_option("--segment-alignment", o.segment_alignment, "Also require every segment to start at a multiple of N");
  c->add_option("--tensor-alignment", o.tensor_alignment,
                "Also require every constant tensor to start at a multiple of N within its segment");
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
    Loaded l = Load(o->file, o->ptds, ro);
    nlohmann::json d = l.pte ? DescribePte(*l.pte, l.ptd_ptrs()) : DescribePtd(*l.lone_ptd);
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
  auto* c = app.add_subcommand("verify",
                               "Check a file: headers, FlatBuffers verifier, every segment, offset, size, "
                               "alignment, index and string. Exits 0 if valid, 1 with the problems otherwise.");
  AddCommon(c, *o);
  c->add_flag("--checksum", *checksum,
              "Also compute XXH3-64 checksums of the program region, of each segment and of the padding "
              "(reads all data; without it verify only reads headers and flatbuffers)");
  c->add_option("--write-manifest", io->write_manifest,
                "Write the checksums to this JSON manifest (implies --checksum; only for valid files)");
  c->add_option("--manifest", io->manifest,
                "Compare the checksums with this manifest (implies --checksum); a difference is an error "
                "naming the segment")
      ->check(CLI::ExistingFile);
  c->callback([o, io, checksum]() {
    ReadOptions ro;
    ro.segment_alignment = o->segment_alignment;
    ro.tensor_alignment = o->tensor_alignment;
    Loaded l = Load(o->file, o->ptds, ro);
    std::vector<const Report*> reports;
    if (l.pte) reports.push_back(&l.pte->report());
    if (l.lone_ptd) reports.push_back(&l.lone_ptd->report());
    for (const auto& p : l.ptds) reports.push_back(&p->report());
    bool ok = true;
    for (const Report* r : reports) ok = ok && r->ok();
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
      nlohmann::json j{{"file", o->file}, {"valid", ok}, {"findings", FindingsJson(reports)}};
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
        // Without its .ptd, only the program was checked: say so (repack
        // would refuse it, naming the missing data).
        size_t external = 0;
        if (l.pte && o->ptds.empty()) {
          auto probe = PteFile::Open(o->file, ro);
          probe->CheckExternalKeys({});
          for (const auto& f : probe->report().findings()) external += f.code == "dangling-external-key";
        }
        std::cout << o->file << ": OK";
        if (external > 0) {
          std::cout << " (program only: " << external
                    << " tensor(s) live in a .ptd data file that was not given; pass it with --ptd to check them)";
        }
        std::cout << "\n";
      } else {
        std::cerr << o->file << ": INVALID\n";
      }
    }
    g_exit = ok ? kOk : kInvalid;
  });
}

}  // namespace ptepack::cli
