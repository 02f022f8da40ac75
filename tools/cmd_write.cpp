// `ptepack pack`, `repack`, `split` and `extract`.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "serialize/package.h"
#include "serialize/ptd_reader.h"
#include "serialize/pte_reader.h"
#include "serialize/pte_writer.h"
#include "serialize/spec.h"
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
  bool in_place = false, json = false, quiet = false;
};

void AddOutputFlags(CLI::App* c, OutputFlags& f, bool in_place) {
  c->add_option("-o,--output", f.out, "Output .pte (.ptd files go next to it)")->required();
  if (in_place) c->add_flag("--in-place", f.in_place, "Allow the output to replace an input file");
  c->add_flag("--json", f.json, "Print a JSON summary");
  c->add_flag("-q,--quiet", f.quiet, "No progress or summary on stderr");
}

// Writes, re-reads and verifies the outputs, prints the summary and sets the
// exit code.
void WriteAndReport(const Package& pkg, const BackendConfig& cfg, const std::vector<std::string>& inputs,
                    const OutputFlags& f, nlohmann::json extra = nlohmann::json::object()) {
  WriteOptions wo{inputs, f.in_place, ProgressPrinter(f.quiet)};
  WriteResult r = WritePackage(pkg, cfg, f.out, wo);
  nlohmann::json j;
  bool ok = CheckOutputs(r, f.quiet, &j);
  j["config"] = cfg.ToJson();
  j.update(extra);
  if (f.json) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  g_exit = ok ? kOk : kFailed;
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
    Input in = LoadInput(o->in, o->ptds);
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    InferredConfig inf = InferConfig(*in.pte, pkg, in.ptrs);
    BackendConfig cfg = inf.config;
    Apply(o->ov, cfg);
    if (o->upgrade_ptd) {
      for (auto& ef : pkg.external) UpgradeLegacy(ef);
    }
    WriteAndReport(pkg, cfg, in.paths, o->out, {{"input_reproducible", inf.exact}});
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
    Input in = LoadInput(o->in, o->ptds);
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    BackendConfig cfg = InferConfig(*in.pte, pkg, in.ptrs).config;
    Apply(o->ov, cfg);
    cfg.external_constants = true;
    cfg.external_tag = o->tag;
    cfg.external_mutable_weights = o->mutable_weights;
    cfg.inline_constants = false;
    cfg.Validate();
    WriteAndReport(pkg, cfg, in.paths, o->out);
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
    BackendConfig cfg = BackendConfig::FromFile(o->config);
    WriteAndReport(LoadSpec(o->spec), cfg, {o->config, o->spec}, o->out);
  });
}

void RegisterExtract(CLI::App& app) {
  struct O {
    std::string in, dir;
    std::vector<std::string> ptds;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "extract",
      "Write a program's parts to a directory: program.json (the flatbuffer as JSON), one file per segment, "
      "constant, delegate payload and named blob, and index.json describing them.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's .ptd files")->check(CLI::ExistingFile);
  c->add_option("-o,--output", o->dir, "Output directory (created)")->required();
  c->callback([o]() {
    Input in = LoadInput(o->in, o->ptds);
    std::filesystem::create_directories(o->dir);
    nlohmann::json index;
    index["program_json"] = "program.json";
    {
      AtomicFile f(o->dir + "/program.json");
      std::string j = ProgramToJson(*in.pte);
      f.Write(j.data(), j.size());
      f.Commit();
    }
    auto write_blob = [&](const std::string& name, const Bytes& b) {
      AtomicFile f(o->dir + "/" + name);
      f.Write(b);
      f.Commit();
      return nlohmann::json{{"file", name}, {"size", b.size}};
    };
    nlohmann::json segs = nlohmann::json::array();
    for (size_t i = 0; i < in.pte->segments().size(); ++i) {
      segs.push_back(write_blob("segment_" + std::to_string(i) + ".bin", in.pte->SegmentData(i)));
    }
    index["segments"] = segs;
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    nlohmann::json consts = nlohmann::json::array();
    const auto& cb = prog::F(*pkg.program, "constant_buffer").elems;
    for (size_t i = 1; i < cb.size(); ++i) {
      consts.push_back(write_blob("constant_" + std::to_string(i) + ".bin", prog::F(*cb[i].table, "storage").scalars));
    }
    index["constants"] = consts;
    nlohmann::json dels = nlohmann::json::array();
    const auto& bdd = prog::F(*pkg.program, "backend_delegate_data").elems;
    for (size_t i = 0; i < bdd.size(); ++i) {
      dels.push_back(write_blob("delegate_" + std::to_string(i) + ".bin", prog::F(*bdd[i].table, "data").scalars));
    }
    index["delegates"] = dels;
    nlohmann::json named = nlohmann::json::array();
    for (size_t i = 0; i < pkg.named_data.size(); ++i) {
      auto j = write_blob("named_" + std::to_string(i) + ".bin", pkg.named_data[i].data);
      j["key"] = pkg.named_data[i].key;
      named.push_back(j);
    }
    index["named_data"] = named;
    nlohmann::json ext = nlohmann::json::array();
    for (const auto& ef : pkg.external) {
      for (size_t i = 0; i < ef.entries.size(); ++i) {
        auto j = write_blob(ef.tag + "_" + std::to_string(i) + ".bin", ef.entries[i].data);
        j["key"] = ef.entries[i].key;
        j["tag"] = ef.tag;
        ext.push_back(j);
      }
    }
    index["external"] = ext;
    AtomicFile f(o->dir + "/index.json");
    std::string s = index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    f.Write(s.data(), s.size());
    f.Commit();
    std::cout << "extracted to " << o->dir << "\n";
  });
}

}  // namespace ptepack::cli
