// `ptepack pack`, `repack`, `split` and `extract`.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "serialize/model/package.h"
#include "serialize/model/spec.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "tools/commands.h"

namespace ptepack::cli {
namespace {

struct Overrides {
  std::string config_file;
  std::optional<uint64_t> segment_alignment, constant_tensor_alignment, delegate_alignment, ptd_segment_alignment;
  std::optional<bool> extract_delegate_segments, emit_stacktrace, emit_mutable_buffer_names;
  std::string order;
};

void AddOverrides(CLI::App* c, Overrides& o) {
  c->add_option("--config", o.config_file, "BackendConfig as JSON (ExecutorchBackendConfig field names)")
      ->check(CLI::ExistingFile);
  c->add_option("--segment-alignment", o.segment_alignment, "Alignment of each segment (power of two)");
  c->add_option("--constant-tensor-alignment", o.constant_tensor_alignment,
                "Alignment of each constant tensor in the constant segment (power of two)");
  c->add_option("--delegate-alignment", o.delegate_alignment, "Alignment of inline delegate data (power of two)");
  c->add_option("--ptd-segment-alignment", o.ptd_segment_alignment, "Segment alignment of written .ptd files");
  c->add_option("--extract-delegate-segments", o.extract_delegate_segments,
                "Move delegate payloads into segments (true) or keep them inline (false)");
  c->add_option("--emit-stacktrace", o.emit_stacktrace, "Keep (true) or drop (false) stack traces");
  c->add_option("--emit-mutable-buffer-names", o.emit_mutable_buffer_names, "Keep or drop mutable buffer names");
  c->add_option("--flatbuffer-order", o.order,
                "Flatbuffer byte layout to produce: flatc, flatc-legacy or python (default: as the input)")
      ->check(CLI::IsMember({"flatc", "flatc-legacy", "python"}));
}

void Apply(const Overrides& o, BackendConfig& c) {
  if (!o.config_file.empty()) {
    BackendConfig f = BackendConfig::FromFile(o.config_file);
    c = f;
  }
  if (o.segment_alignment) c.segment_alignment = *o.segment_alignment;
  if (o.constant_tensor_alignment) c.constant_tensor_alignment = *o.constant_tensor_alignment;
  if (o.delegate_alignment) c.delegate_alignment = *o.delegate_alignment;
  if (o.ptd_segment_alignment) c.ptd_segment_alignment = *o.ptd_segment_alignment;
  if (o.extract_delegate_segments) c.extract_delegate_segments = *o.extract_delegate_segments;
  if (o.emit_stacktrace) c.emit_stacktrace = *o.emit_stacktrace;
  if (o.emit_mutable_buffer_names) c.emit_mutable_buffer_names = *o.emit_mutable_buffer_names;
  if (!o.order.empty()) fb::ParseOrder(o.order, &c.flatbuffer_order);
  c.Validate();
}

struct Input {
  std::unique_ptr<PteFile> pte;
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptrs;
  std::vector<std::string> paths;
};

Input LoadInput(const std::string& in, const std::vector<std::string>& ptds) {
  Input i;
  i.pte = PteFile::Open(in);
  i.paths.push_back(in);
  for (const auto& p : ptds) {
    i.ptds.push_back(PtdFile::Open(p));
    i.ptrs.push_back(i.ptds.back().get());
    i.paths.push_back(p);
  }
  for (const auto& r : {&i.pte->report()}) r->ThrowIfError();
  for (const auto& p : i.ptds) p->report().ThrowIfError();
  // A program whose tensors live in .ptd files cannot be rewritten without
  // them. (verify without --ptd checks the program alone and says so.)
  {
    auto probe = PteFile::Open(in);
    probe->CheckExternalKeys(i.ptrs);
    for (const auto& f : probe->report().findings()) {
      if (f.code != "dangling-external-key") continue;
      Finding e = f;
      e.code = "missing-ptd";
      e.message = f.message + (ptds.empty() ? "; the program keeps tensors in a separate .ptd data file: give it with "
                                              "--ptd FILE.ptd"
                                            : "; give the .ptd file that holds it with --ptd");
      throw Error(std::move(e));
    }
  }
  return i;
}

// Re-reads what was written and fails loudly if it does not verify.
bool CheckOutputs(const WriteResult& r, bool quiet, nlohmann::json* out) {
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptrs;
  bool ok = true;
  for (const auto& p : r.ptds) {
    ptds.push_back(PtdFile::Open(p.path));
    ptrs.push_back(ptds.back().get());
    ok = ok && ptds.back()->ok();
    for (const auto& f : ptds.back()->report().findings()) std::cerr << f.ToString() << "\n";
  }
  auto pte = PteFile::Open(r.pte.path);
  pte->CheckExternalKeys(ptrs);
  for (const auto& f : pte->report().findings()) std::cerr << f.ToString() << "\n";
  ok = ok && pte->ok();
  nlohmann::json files = nlohmann::json::array();
  files.push_back({{"path", r.pte.path}, {"size", r.pte.size}});
  for (const auto& p : r.ptds) files.push_back({{"path", p.path}, {"size", p.size}});
  *out = {{"files", files},
          {"flatbuffer_size", r.flatbuffer_size},
          {"segments", r.num_segments},
          {"dedup_bytes_saved", r.dedup_bytes_saved},
          {"verified", ok}};
  if (!quiet) {
    std::cerr << "wrote " << r.pte.path << " (" << r.pte.size << " bytes, " << r.num_segments << " segments)";
    for (const auto& p : r.ptds) std::cerr << ", " << p.path << " (" << p.size << " bytes)";
    std::cerr << (ok ? "; verified OK" : "; OUTPUT DOES NOT VERIFY") << "\n";
  }
  return ok;
}

// Flags every writing command has.
struct OutputFlags {
  std::string out;
  bool in_place = false, json = false, quiet = false, force = false, dry_run = false;
};

void AddOutputFlags(CLI::App* c, OutputFlags& f, bool in_place) {
  c->add_option("-o,--output", f.out,
                in_place ? "Output .pte (.ptd files go next to it); with --in-place, default the input"
                         : "Output .pte (.ptd files go next to it)");
  if (in_place) {
    c->add_flag("--in-place", f.in_place,
                "Allow the output to replace an input file (keeps its mode); -o defaults to the input");
  }
  c->add_flag("--force", f.force, "Replace an existing .ptd beside the output that this command did not read");
  c->add_flag("--dry-run", f.dry_run, "Check everything and list the files that would be written; write nothing");
  c->add_flag("--json", f.json, "Print a JSON summary");
  c->add_flag("-q,--quiet", f.quiet, "No progress or summary on stderr");
}

// -o, or the input with --in-place.
void ResolveOutput(OutputFlags& f, const std::string& in) {
  if (!f.out.empty()) return;
  if (f.in_place) {
    f.out = in;
    return;
  }
  throw Error("usage", "an output is required: give -o OUT.pte (or --in-place to replace the input)");
}

void PrintDryRun(const WriteResult& r, bool json) {
  nlohmann::json files = nlohmann::json::array();
  files.push_back({{"path", r.pte.path}, {"size", r.pte.size}});
  for (const auto& p : r.ptds) files.push_back({{"path", p.path}, {"size", p.size}});
  if (json) {
    std::cout << nlohmann::json{{"dry_run", true}, {"files", files}}.dump(2, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace)
              << "\n";
    return;
  }
  std::cout << "would write:\n";
  for (const auto& e : files) {
    std::cout << "  " << e["path"].get<std::string>() << " (" << e["size"].get<uint64_t>() << " bytes)\n";
  }
}

// Writes, re-reads and verifies the outputs, prints the summary and sets the
// exit code.
WriteResult WriteAndReport(const Package& pkg, const BackendConfig& cfg, const std::vector<std::string>& inputs,
                           const OutputFlags& f, nlohmann::json extra = nlohmann::json::object()) {
  WriteOptions wo{inputs, f.in_place, ProgressPrinter(f.quiet)};
  wo.force = f.force;
  wo.dry_run = f.dry_run;
  WriteResult r = WritePackage(pkg, cfg, f.out, wo);
  if (f.dry_run) {
    PrintDryRun(r, f.json);
    g_exit = kOk;
    return r;
  }
  nlohmann::json j;
  bool ok = CheckOutputs(r, f.quiet, &j);
  j["config"] = cfg.ToJson();
  j.update(extra);
  if (f.json) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  g_exit = ok ? kOk : kFailed;
  return r;
}

}  // namespace

void RegisterRepack(CLI::App& app) {
  struct O {
    std::string in;
    std::vector<std::string> ptds;
    Overrides ov;
    OutputFlags out;
    bool upgrade_ptd = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "repack",
      "Rewrite a program with a different layout. Starts from the config that reproduces the input byte for "
      "byte (inferred), then applies --config and the flags. .ptd files given with --ptd are rewritten next to "
      "the output under their own names.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's .ptd files")->check(CLI::ExistingFile);
  AddOverrides(c, o->ov);
  c->add_flag("--upgrade-ptd", o->upgrade_ptd,
              "Rewrite .ptd files in the legacy (pre June 2025) FlatTensor layout in the current layout, which "
              "current ExecuTorch runtimes require");
  AddOutputFlags(c, o->out, true);
  c->callback([o]() {
    ResolveOutput(o->out, o->in);
    Input in = LoadInput(o->in, o->ptds);
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    InferredConfig inf = InferConfig(*in.pte, pkg, in.ptrs);
    BackendConfig cfg = inf.config;
    Apply(o->ov, cfg);
    if (o->upgrade_ptd) {
      for (auto& ef : pkg.external) UpgradeLegacy(ef);
    }
    WriteAndReport(pkg, cfg, in.paths, o->out, {{"input_reproducible", inf.exact}});
    // --emit-* true cannot bring back what the input no longer has: say so.
    bool traces = false, names = false;
    if (const auto* plans = in.pte->program() ? in.pte->program()->execution_plan() : nullptr) {
      for (const auto* plan : *plans) {
        if (plan->chains()) {
          for (const auto* ch : *plan->chains()) traces = traces || (ch->stacktrace() && ch->stacktrace()->size());
        }
        if (!plan->values()) continue;
        for (const auto* v : *plan->values()) {
          if (v->val_type() != executorch_flatbuffer::KernelTypes::Tensor || !v->val()) continue;
          const auto* eti = v->val_as_Tensor()->extra_tensor_info();
          names = names || (eti && eti->fully_qualified_name() &&
                            eti->location() != executorch_flatbuffer::TensorDataLocation::EXTERNAL);
        }
      }
    }
    if (o->ov.emit_stacktrace.value_or(false) && !traces) {
      std::cerr << "ptepack: note: " << o->in
                << " has no stack traces; --emit-stacktrace true cannot add them (re-export with them)\n";
    }
    if (o->ov.emit_mutable_buffer_names.value_or(false) && !names) {
      std::cerr << "ptepack: note: " << o->in
                << " has no mutable buffer names; --emit-mutable-buffer-names true cannot add them\n";
    }
  });
}

void RegisterSplit(CLI::App& app) {
  struct O {
    std::string in, tag;
    std::vector<std::string> ptds;
    bool mutable_weights = false;
    Overrides ov;
    OutputFlags out;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "split",
      "Move constant tensors (and with --mutable-weights, trainable weights) out of a program into TAG.ptd "
      "next to the output. Tensors keep their names as keys; unnamed constants are keyed constant_<index>.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's existing .ptd files")->check(CLI::ExistingFile);
  c->add_option("--external-constants", o->tag, "Tag of the data file to create (TAG.ptd)")->required();
  c->add_flag("--mutable-weights", o->mutable_weights, "Also move mutable weights with an initial state");
  AddOverrides(c, o->ov);
  AddOutputFlags(c, o->out, true);
  c->callback([o]() {
    ResolveOutput(o->out, o->in);
    Input in = LoadInput(o->in, o->ptds);
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    BackendConfig cfg = InferConfig(*in.pte, pkg, in.ptrs).config;
    Apply(o->ov, cfg);
    cfg.external_constants = true;
    cfg.external_tag = o->tag;
    cfg.external_mutable_weights = o->mutable_weights;
    cfg.inline_constants = false;
    cfg.Validate();
    WriteResult r = WriteAndReport(pkg, cfg, in.paths, o->out);
    if (r.ptds.empty()) {
      std::cerr << "ptepack: note: " << o->in << " has no constants to move (none stored in the program"
                << (o->mutable_weights ? ", no mutable weights" : "") << "); no " << o->tag << ".ptd was "
                << (o->out.dry_run ? "planned" : "written") << "\n";
    }
  });
}

void RegisterPack(CLI::App& app) {
  struct O {
    std::string config, spec;
    OutputFlags out;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "pack",
      "Build a program from a JSON description. SPEC is ExecuTorch's own JSON form of a Program (what "
      "`flatc --json` prints for program.fbs) extended with \"data\" files: see README, \"pack spec\".");
  c->add_option("CONFIG", o->config, "BackendConfig JSON file")->required()->check(CLI::ExistingFile);
  c->add_option("SPEC", o->spec, "Program description JSON")->required()->check(CLI::ExistingFile);
  AddOutputFlags(c, o->out, false);
  c->callback([o]() {
    ResolveOutput(o->out, "");
    BackendConfig cfg = BackendConfig::FromFile(o->config);
    WriteAndReport(LoadSpec(o->spec), cfg, {o->config, o->spec}, o->out);
  });
}

void RegisterExtract(CLI::App& app) {
  struct O {
    std::string in, dir;
    std::vector<std::string> ptds;
    bool force = false, dry_run = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "extract",
      "Write a program's parts to a directory: program.json (the flatbuffer as JSON), one file per segment, "
      "constant, delegate payload and named blob, and index.json describing them. The directory is filled "
      "under a temporary name and renamed into place when complete; an existing non-empty directory is "
      "replaced only with --force.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's .ptd files")->check(CLI::ExistingFile);
  c->add_option("-o,--output", o->dir, "Output directory (created)")->required();
  c->add_flag("--force", o->force, "Replace an existing non-empty output directory");
  c->add_flag("--dry-run", o->dry_run, "List the files that would be written; write nothing");
  c->callback([o]() {
    namespace fs = std::filesystem;
    Input in = LoadInput(o->in, o->ptds);
    // Everything to write, in order: (file name, bytes).
    std::vector<std::pair<std::string, Bytes>> files;
    nlohmann::json index;
    index["program_json"] = "program.json";
    {
      std::string j = ProgramToJson(*in.pte);
      files.emplace_back("program.json", Bytes::Copy(j.data(), j.size()));
    }
    auto add_blob = [&](const std::string& name, const Bytes& b) {
      files.emplace_back(name, b);
      return nlohmann::json{{"file", name}, {"size", b.size}};
    };
    nlohmann::json segs = nlohmann::json::array();
    for (size_t i = 0; i < in.pte->segments().size(); ++i) {
      segs.push_back(add_blob("segment_" + std::to_string(i) + ".bin", in.pte->SegmentData(i)));
    }
    index["segments"] = segs;
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    nlohmann::json consts = nlohmann::json::array();
    const auto& cb = prog::F(*pkg.program, "constant_buffer").elems;
    for (size_t i = 1; i < cb.size(); ++i) {
      consts.push_back(add_blob("constant_" + std::to_string(i) + ".bin", prog::F(*cb[i].table, "storage").scalars));
    }
    index["constants"] = consts;
    nlohmann::json dels = nlohmann::json::array();
    const auto& bdd = prog::F(*pkg.program, "backend_delegate_data").elems;
    for (size_t i = 0; i < bdd.size(); ++i) {
      dels.push_back(add_blob("delegate_" + std::to_string(i) + ".bin", prog::F(*bdd[i].table, "data").scalars));
    }
    index["delegates"] = dels;
    nlohmann::json named = nlohmann::json::array();
    for (size_t i = 0; i < pkg.named_data.size(); ++i) {
      auto j = add_blob("named_" + std::to_string(i) + ".bin", pkg.named_data[i].data);
      j["key"] = pkg.named_data[i].key;
      named.push_back(j);
    }
    index["named_data"] = named;
    nlohmann::json ext = nlohmann::json::array();
    for (const auto& ef : pkg.external) {
      for (size_t i = 0; i < ef.entries.size(); ++i) {
        auto j = add_blob(ef.tag + "_" + std::to_string(i) + ".bin", ef.entries[i].data);
        j["key"] = ef.entries[i].key;
        j["tag"] = ef.tag;
        ext.push_back(j);
      }
    }
    index["external"] = ext;
    {
      std::string s = index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
      files.emplace_back("index.json", Bytes::Copy(s.data(), s.size()));
    }

    // The target: absent, an empty directory, or (with --force) any directory.
    const fs::path dir = fs::path(o->dir).lexically_normal();
    const fs::path target = dir.filename().empty() ? dir.parent_path() : dir;
    std::error_code ec;
    auto st = fs::symlink_status(target, ec);
    bool exists = !ec && fs::exists(st);
    if (exists && fs::is_symlink(st)) {
      Finding f{Finding::Severity::kError,
                "output-symlink",
                "output directory is a symbolic link; ptepack does not "
                "write through links: give the link's target",
                target.string(),
                {},
                {},
                {}};
      throw Error(std::move(f));
    }
    if (exists && !fs::is_directory(st)) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-not-directory",
                          "output exists and is not a directory",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    const bool non_empty = exists && !fs::is_empty(target, ec);
    if (non_empty && !o->force) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-exists",
                          "output directory is not empty (its files could mix with this program's); pass --force to "
                          "replace it, or choose an empty or new directory",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    if (non_empty && !fs::exists(target / "index.json")) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-exists",
                          "output directory is not empty and holds no index.json (it is not an earlier extract); "
                          "refusing to replace it even with --force",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    if (o->dry_run) {
      std::cout << "would write " << (non_empty ? "(replacing the directory) " : "") << target.string() << "/:\n";
      for (const auto& [name, b] : files) std::cout << "  " << name << " (" << b.size << " bytes)\n";
      return;
    }
    WritingScope writing;
    // Fill a sibling temporary directory, then rename it into place.
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    fs::create_directories(parent);
    const fs::path tmp = parent / (target.filename().string() + ".tmp-" + std::to_string(::getpid()));
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code e;
        if (!p.empty()) fs::remove_all(p, e);
      }
    } cleanup;
    fs::remove_all(tmp, ec);
    if (::mkdir(tmp.c_str(), 0755) != 0) {
      throw Error(Finding{Finding::Severity::kError,
                          "create-failed",
                          std::string("cannot create temporary directory: ") + std::strerror(errno),
                          tmp.string(),
                          {},
                          {},
                          {}});
    }
    cleanup.p = tmp;
    // No fsync per file: the filled directory is synced once before it is
    // renamed into place (10,000 files: one sync, not 10,000).
    AtomicFile::Options unsynced;
    unsynced.sync = false;
    for (const auto& [name, b] : files) {
      ThrowIfInterrupted();
      AtomicFile f((tmp / name).string(), unsynced);
      f.Write(b);
      f.Commit();
    }
    ThrowIfInterrupted();
    SyncTree(tmp.string());
    fs::path old;
    if (exists) {
      old = parent / (target.filename().string() + ".old-" + std::to_string(::getpid()));
      if (::rename(target.c_str(), old.c_str()) != 0) {
        throw Error(Finding{Finding::Severity::kError,
                            "write-failed",
                            std::string("cannot move the old directory aside: ") + std::strerror(errno),
                            target.string(),
                            {},
                            {},
                            {}});
      }
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
      int e = errno;
      if (!old.empty()) ::rename(old.c_str(), target.c_str());
      throw Error(Finding{Finding::Severity::kError,
                          "write-failed",
                          std::string("cannot rename the temporary directory into place: ") + std::strerror(e),
                          target.string(),
                          {},
                          {},
                          {}});
    }
    cleanup.p = old;  // the replaced directory goes
    std::cout << "extracted to " << o->dir << "\n";
  });
}

}  // namespace ptepack::cli
