#include "tools/write_common.h"

#include <cstdlib>
#include <memory>
#include <utility>

#include "serialize/api/repack_json.h"

namespace ptepack::cli {

void AddOverrides(Args& a, Overrides& o) {
  a.Input("--config", &o.config_file, "BackendConfig as JSON (ExecutorchBackendConfig field names)", InputKind::kFile,
          "CONFIG.json");
  a.Alignment("--segment-alignment", &o.segment_alignment, "Alignment of each segment (power of two)");
  a.Alignment("--constant-tensor-alignment", &o.constant_tensor_alignment,
              "Alignment of each constant tensor in the constant segment (power of two)");
  a.Alignment("--delegate-alignment", &o.delegate_alignment, "Alignment of inline delegate data (power of two)");
  a.Alignment("--ptd-segment-alignment", &o.ptd_segment_alignment,
              "Segment alignment of written .ptd files (power of two)");
  a.Bool("--extract-delegate-segments", &o.extract_delegate_segments,
         "Move delegate payloads into segments (true) or keep them inline (false)");
  a.Bool("--emit-stacktrace", &o.emit_stacktrace, "Keep (true) or drop (false) stack traces");
  a.Bool("--emit-mutable-buffer-names", &o.emit_mutable_buffer_names,
         "Keep (true) or drop (false) mutable buffer names");
  a.Choice("--flatbuffer-order", &o.order, {"flatc", "flatc-legacy", "python", "python-2026"},
           "Flatbuffer byte layout to produce (default: as the input)");
}

void Apply(const Overrides& o, BackendConfig& c) {
  if (!o.config_file.empty()) {
    BackendConfig f = LoadConfigFile(o.config_file);
    c = f;
  }
  if (o.segment_alignment) c.segment_alignment = *o.segment_alignment;
  if (o.constant_tensor_alignment) c.constant_tensor_alignment = *o.constant_tensor_alignment;
  if (o.delegate_alignment) c.delegate_alignment = *o.delegate_alignment;
  if (o.ptd_segment_alignment) c.ptd_segment_alignment = *o.ptd_segment_alignment;
  if (o.extract_delegate_segments) c.extract_delegate_segments = *o.extract_delegate_segments;
  if (o.emit_stacktrace) c.emit_stacktrace = *o.emit_stacktrace;
  if (o.emit_mutable_buffer_names) c.emit_mutable_buffer_names = *o.emit_mutable_buffer_names;
  if (!o.order.empty()) ParseFlatbufferOrder(o.order, &c.flatbuffer_order);
  c.Validate();
}

bool CheckOutputs(const WriteResult& r, bool quiet, nlohmann::json* out) {
  // The writer read every output back once before renaming it into place
  // (serialize/write/output_files.h); its findings are printed here.
  bool ok = true;
  for (const auto& f : r.findings) {
    std::cerr << f.ToString() << "\n";
    ok = ok && f.severity != Finding::Severity::kError;
  }
  nlohmann::json files = WrittenFilesJson(r);
  *out = {{"files", files},
          {"flatbuffer_size", r.flatbuffer_size},
          {"segments", r.num_segments},
          {"dedup_bytes_saved", r.dedup_bytes_saved},
          {"verified", ok}};
  if (!quiet) {
    std::cerr << "wrote " << r.pte.path << " (" << r.pte.size << " bytes, " << r.num_segments
              << (r.num_segments == 1 ? " segment)" : " segments)");
    for (const auto& p : r.ptds) {
      if (!p.kept) std::cerr << ", " << p.path << " (" << p.size << " bytes)";
    }
    for (const auto& p : r.ptds) {
      if (p.kept) std::cerr << "; kept " << p.path << " as it was (it would be written byte for byte the same)";
    }
    std::cerr << (ok ? "; verified OK" : "; OUTPUT DOES NOT VERIFY") << "\n";
  }
  return ok;
}

CLI::Option* AddOutputFlags(Args& a, OutputFlags& f, bool in_place) {
  CLI::Option* out =
      a.Output("-o,--output", &f.out,
               in_place ? "Output .pte (.ptd files go next to it; `-` for stdout); required unless --in-place, which "
                          "makes it default to the input"
                        : "Output .pte (.ptd files go next to it; `-` for stdout)",
               "OUT.pte");
  if (in_place) {
    a.Flag("--in-place", &f.in_place,
           "Allow the output to replace an input file (keeps its mode); -o defaults to the input");
  }
  a.Flag("--force", &f.force, "Replace an existing .ptd beside the output that this command did not read");
  a.Flag("--dry-run", &f.dry_run, "Check everything and list the files that would be written; write nothing");
  a.Flag("--json", &f.json, "Print a JSON summary");
  a.Flag("-q,--quiet", &f.quiet, "No progress or summary on stderr");
  if (!in_place) out->required();
  return out;
}

StdoutStage::~StdoutStage() {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

void ResolveOutput(OutputFlags& f, const std::string& in) {
  if (f.out == "-") {
    if (f.in_place) throw Error("usage", "-o - (stdout) and --in-place exclude each other");
    if (f.json) throw Error("usage", "-o - writes the program to stdout, so --json cannot print there too");
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ptepack-stdout.XXXXXX";
    if (!::mkdtemp(templ.data()))
      throw Error("io", templ + ": cannot create a temporary directory: " + std::strerror(errno));
    f.to_stdout = std::make_shared<StdoutStage>();
    f.to_stdout->dir = templ;
    f.out = templ + "/stdout.pte";
    return;
  }
  if (!f.out.empty()) return;
  if (f.in_place) {
    f.out = in;
    return;
  }
  throw Error("usage", "an output is required: give -o OUT.pte (or --in-place to replace the input)");
}

void PrintDryRun(const WriteResult& r, bool json) {
  nlohmann::json files = WrittenFilesJson(r);
  if (json) {
    std::cout << nlohmann::json{{"dry_run", true}, {"files", files}}.dump(2, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace)
              << "\n";
    return;
  }
  std::cout << "would write:\n";
  for (const auto& e : files) {
    if (e.value("kept", false)) continue;
    std::cout << "  " << e["path"].get<std::string>() << " (" << e["size"].get<uint64_t>() << " bytes)\n";
  }
  for (const auto& p : r.ptds) {
    if (p.kept) std::cout << "would keep " << p.path << " as it is (it would be written byte for byte the same)\n";
  }
}

WriteOptions MakeWriteOptions(const OutputFlags& f, const std::vector<std::string>& inputs) {
  WriteOptions wo{inputs, f.in_place, ProgressPrinter(f.quiet)};
  wo.force = f.force;
  wo.dry_run = f.dry_run;
  return wo;
}

namespace {

// `-o -`: the staged, verified program goes to stdout; the summary to stderr.
void CopyToStdout(const WriteResult& r, const OutputFlags& f) {
  if (!r.ptds.empty()) {
    throw Error("usage", "-o - writes one file, but this program also has " + std::to_string(r.ptds.size()) +
                             " .ptd file(s): give -o OUT.pte");
  }
  nlohmann::json j;
  if (!CheckOutputs(r, /*quiet=*/true, &j))
    throw Error("output-invalid", "the output does not verify; nothing written");
  std::ifstream in(r.pte.path, std::ios::binary);
  std::cout << in.rdbuf();
  std::cout.flush();
  if (!std::cout) throw Error("io", "stdout: write failed");
  if (!f.quiet) {
    std::cerr << "wrote - (" << r.pte.size << " bytes, " << r.num_segments
              << (r.num_segments == 1 ? " segment" : " segments") << "); verified OK\n";
  }
  g_exit = kOk;
}

}  // namespace

void ReportWritten(const WriteResult& r, const BackendConfig& cfg, const OutputFlags& f, nlohmann::json extra) {
  if (f.dry_run) {
    PrintDryRun(r, f.json);
    g_exit = kOk;
    return;
  }
  nlohmann::json j;
  if (f.to_stdout) return CopyToStdout(r, f);
  bool ok = CheckOutputs(r, f.quiet, &j);
  j["config"] = ConfigToJson(cfg);
  j.update(extra);
  if (f.json) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  g_exit = ok ? kOk : kFailed;
}

WriteResult WriteAndReport(Package pkg, const BackendConfig& cfg, const std::vector<std::string>& inputs,
                           const OutputFlags& f, nlohmann::json extra) {
  WriteResult r = WritePackage(std::move(pkg), cfg, f.out, MakeWriteOptions(f, inputs));
  ReportWritten(r, cfg, f, std::move(extra));
  return r;
}

}  // namespace ptepack::cli
