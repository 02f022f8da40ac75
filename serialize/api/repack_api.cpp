// `repack` and `split` as library functions (ptepack/repack.h).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "config/backend_config.h"
#include "ptepack/repack.h"
#include "serialize/api/read_api.h"
#include "serialize/api/repack_json.h"
#include "serialize/io/file_io.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {
namespace {

// Whether the input still has stack traces / mutable buffer names (which a
// config cannot bring back).
void NoteWhatInputHas(const PteFile& pte, RepackResult* r) {
  const auto* plans = pte.program() ? pte.program()->execution_plan() : nullptr;
  if (!plans) return;
  for (const auto* plan : *plans) {
    if (plan->chains()) {
      for (const auto* ch : *plan->chains()) {
        r->input_has_stacktrace = r->input_has_stacktrace || (ch->stacktrace() && ch->stacktrace()->size());
      }
    }
    if (!plan->values()) continue;
    for (const auto* v : *plan->values()) {
      if (v->val_type() != executorch_flatbuffer::KernelTypes::Tensor || !v->val()) continue;
      const auto* eti = v->val_as_Tensor()->extra_tensor_info();
      r->input_has_mutable_buffer_names =
          r->input_has_mutable_buffer_names || (eti && eti->fully_qualified_name() &&
                                                eti->location() != executorch_flatbuffer::TensorDataLocation::EXTERNAL);
    }
  }
}

std::string SegmentRegion(const std::vector<SegmentSpan>& segs, uint64_t off) {
  for (size_t i = 0; i < segs.size(); ++i) {
    if (off >= segs[i].file_offset && off < segs[i].file_offset + segs[i].size) return "segment " + std::to_string(i);
  }
  return "padding";
}

// What the input .pte holds at `off`.
std::string PteRegion(const PteFile& in, uint64_t off) {
  if (off >= in.file().size) return "end of file";
  if (in.header() && off >= 8 && off < 8 + in.header()->length) return "extended header";
  if (off < in.program_size()) return "flatbuffer";
  return SegmentRegion(in.segments(), off);
}

// What the input .ptd holds at `off`.
std::string PtdRegion(const PtdFile& in, uint64_t off) {
  const auto& h = in.header();
  if (off >= in.file().size) return "end of file";
  if (off >= 8 && off < 8 + h.length) return "FH01 header";
  if (off < 8 || (off >= h.flatbuffer_offset && off < h.flatbuffer_offset + h.flatbuffer_size)) return "flatbuffer";
  return SegmentRegion(in.segments(), off);
}

// Before writing: would the output differ from the input anywhere -- the
// .pte and each .ptd, padding included? Compares the layouts with the
// inputs without writing (data that views the input itself is not read).
bool LayoutDiffers(const ValidInput& input, const PackageLayout& l, IdentityCheck& id) {
  id.checked = true;
  const Bytes& in = input.pte->file();
  if (auto off = FirstDifference(l.pte, in)) {
    id.differences.push_back({input.paths[0], *off, PteRegion(*input.pte, *off), in.size, l.pte.total_size()});
  }
  for (size_t i = 0; i < l.ptds.size() && i < input.ptds.size(); ++i) {
    const PtdLayout& pl = l.ptds[i];
    const Bytes& pin = input.ptds[i]->file();
    if (auto off = FirstDifference(pl, pin)) {
      id.differences.push_back({input.paths[i + 1], *off, PtdRegion(*input.ptds[i], *off), pin.size, pl.total_size()});
    }
  }
  if (l.ptds.size() != input.ptds.size()) {
    id.differences.push_back({input.paths[0], 0, "number of .ptd files", input.ptds.size(), l.ptds.size()});
  }
  id.identical = id.differences.empty();
  return !id.identical;
}

RepackResult Rewrite(const std::string& in, const std::string& out, const std::vector<std::string>& ptds,
                     const std::function<void(BackendConfig&)>& edit, bool upgrade_ptd, const WriteOptions& wo_in,
                     bool expect_identical = false) {
  ValidInput input = LoadValidInput(in, ptds);
  PackageParts pkg = PackageFromPte(*input.pte, input.ptrs);
  InferredConfig inf = InferConfig(*input.pte, pkg, input.ptrs);
  inf.ApplyBlobAlignments(pkg);
  RepackResult r;
  r.input_reproducible = inf.exact;
  r.config = inf.config;
  if (edit) edit(r.config);
  r.config.Validate();
  if (upgrade_ptd) {
    for (auto& ef : pkg.external) UpgradeLegacy(ef);
  }
  NoteWhatInputHas(*input.pte, &r);
  const bool unchanged = !upgrade_ptd && r.config.ToJsonString() == inf.config.ToJsonString();
  if (expect_identical && !unchanged) {
    throw Error("usage",
                "expecting the input byte for byte, but the config was changed (layout flags, --config or "
                "--upgrade-ptd): the inferred config is " +
                    inf.config.ToJsonString(-1));
  }
  // Whether the output is the input byte for byte is decided from the
  // layout, before anything is written: data that views the input at its own
  // offset is not read, so a 1 GiB repack does not read both files back (it
  // did: 0.11 s of memcmp and 0.09 s of unmapping the pages it touched). The
  // writer writes exactly this layout (and reads the result back), so this is
  // the comparison of the files. --expect-identical: a difference (exit 3)
  // leaves nothing behind.
  WriteOptions wo = wo_in;
  wo.inputs.insert(wo.inputs.end(), input.paths.begin(), input.paths.end());
  if (expect_identical || (unchanged && !wo_in.dry_run)) {
    // One layout serves the comparison and the write (it was laid out twice).
    PackageLayout l = LayoutPackage(std::move(pkg), r.config);
    if (LayoutDiffers(input, l, r.identity) && expect_identical) return r;
    input = {};  // see below
    r.written = WritePackageLayout(std::move(l), out, wo);
    return r;
  }
  // The input's checks and findings are done: from here its bytes are held
  // only by what views them (the lazily decoded program, segment data), and
  // the writer frees those before it reads the outputs back, so the input's
  // pages are not resident beside the read-back's.
  input = {};
  // The package is the write's alone from here: its tables change in place.
  r.written = WritePackageFiles(std::move(pkg), r.config, out, wo);
  return r;
}

}  // namespace

RepackResult Repack(const std::string& in, const std::string& out, const RepackOptions& options) {
  return Rewrite(in, out, options.ptd, options.edit, options.upgrade_ptd, options.write, options.expect_identical);
}

std::string ByteDifference::ToString() const {
  return file + ": first difference at offset " + std::to_string(offset) + " (" + region + "); sizes " +
         std::to_string(input_size) + " (input), " + std::to_string(output_size) + " (output)";
}

RepackResult Split(const std::string& in, const std::string& out, const SplitOptions& options) {
  auto edit = [&options](BackendConfig& c) {
    if (options.edit) options.edit(c);
    c.external_constants = true;
    c.external_constants_fn = nullptr;
    c.external_tag = options.tag;
    c.external_mutable_weights = options.mutable_weights;
    c.inline_constants = false;
  };
  return Rewrite(in, out, options.ptd, edit, false, options.write);
}

nlohmann::json WrittenFilesJson(const WriteResult& r) {
  nlohmann::json files = nlohmann::json::array();
  files.push_back({{"path", r.pte.path}, {"size", r.pte.size}});
  for (const auto& p : r.ptds) {
    nlohmann::json f = {{"path", p.path}, {"size", p.size}};
    if (p.kept) f["kept"] = true;
    files.push_back(std::move(f));
  }
  return files;
}

nlohmann::json IdentityJson(const IdentityCheck& id) {
  if (!id.checked) return nullptr;
  nlohmann::json d = nlohmann::json::array();
  for (const auto& x : id.differences) {
    d.push_back({{"file", x.file},
                 {"offset", x.offset},
                 {"region", x.region},
                 {"input_size", x.input_size},
                 {"output_size", x.output_size}});
  }
  return {{"identical", id.identical}, {"differences", d}};
}

}  // namespace ptepack
