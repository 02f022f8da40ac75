// `repack` and `split` as library functions (ptepack/repack.h).
#include "ptepack/repack.h"

#include <memory>

#include "config/backend_config.h"
#include "serialize/api/read_api.h"
#include "serialize/model/package.h"
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

RepackResult Rewrite(const std::string& in, const std::string& out, const std::vector<std::string>& ptds,
                     const std::function<void(BackendConfig&)>& edit, bool upgrade_ptd, const WriteOptions& wo_in) {
  ValidInput input = LoadValidInput(in, ptds);
  Package pkg = PackageFromPte(*input.pte, input.ptrs);
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
  WriteOptions wo = wo_in;
  wo.inputs.insert(wo.inputs.end(), input.paths.begin(), input.paths.end());
  r.written = WritePackage(pkg, r.config, out, wo);
  return r;
}

}  // namespace

RepackResult Repack(const std::string& in, const std::string& out, const RepackOptions& options) {
  return Rewrite(in, out, options.ptd, options.edit, options.upgrade_ptd, options.write);
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

}  // namespace ptepack
