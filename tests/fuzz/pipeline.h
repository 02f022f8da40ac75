// What the fuzz targets (and the regression replay in hostile_test.cpp) do
// with one input. Header-only so both can use it without extra targets.
//
// Any input may be rejected by the reader. An input it accepts must survive
// everything the CLI does with a valid file (describe, restore to package
// form, infer the config, lay out and render), and the rendered file must be
// accepted again (for .ptd files: with the same keys and bytes); a program
// that can be rewritten must also extract, and what extract writes must
// pack back to the very bytes of the rewrite. Each
// function returns "" when that holds, otherwise what went wrong; crashes,
// leaks and undefined behaviour are left to the sanitizers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "ptepack/error.h"
#include "serialize/api/extract.h"
#include "serialize/api/replan.h"
#include "serialize/format/program_json.h"
#include "serialize/insight/byte_map.h"
#include "serialize/insight/plan_map.h"
#include "serialize/insight/size.h"
#include "serialize/model/program_parts.h"
#include "serialize/model/spec.h"
#include "serialize/read/describe.h"
#include "serialize/read/plan_lifetimes.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"

namespace ptepack::fuzz {

inline std::string FindingsText(const Report& r) {
  std::string s;
  for (const auto& f : r.findings()) s += "\n  " + f.ToString();
  return s;
}

// A ptepack::Error thrown for a file the reader accepted is fine when it is
// a clean refusal ("unsupported", "bad-program", ...). An internal range or
// layout error means the reader let through something later code could not
// handle.
inline std::string CheckError(const Error& e, const char* stage) {
  if (e.finding().code.rfind("internal", 0) == 0) return std::string(stage) + " on an accepted file: " + e.what();
  return "";
}

// `size` and `map` work on any file whose flatbuffer verified, valid or not:
// every byte is attributed to exactly one part and the bands cover the file.
inline std::string CheckSizeBreakdown(const FileSize& f) {
  uint64_t sum = 0, cursor = 0;
  for (const auto& p : f.parts) sum += p.bytes;
  if (sum != f.file_size)
    return "size: parts add up to " + std::to_string(sum) + ", not " + std::to_string(f.file_size);
  for (const auto& b : f.bands) {
    if (b.offset != cursor || b.size == 0) return "size: band " + b.label + " does not follow the previous one";
    cursor = b.offset + b.size;
  }
  if (cursor != f.file_size) return "size: bands end at " + std::to_string(cursor);
  (void)ByteMapSvg(f, {});
  return "";
}

// Where two renderings first differ, for messages.
inline std::string FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) + ", first difference at offset " +
         std::to_string(i);
}

// Whether `packed` is `repacked` with NaN doubles written as the one NaN JSON
// has: the same size, and every 8-byte word that differs (a flatbuffer at
// offset 0 keeps its doubles 8-aligned) a NaN in `repacked` and
// JsonNanBits() in `packed`. At least one word differs.
inline bool SameButJsonNaNs(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& repacked) {
  if (packed.size() != repacked.size() || packed == repacked) return false;
  for (size_t at = 0; at < packed.size(); at += 8) {
    const size_t n = std::min<size_t>(8, packed.size() - at);
    if (std::memcmp(packed.data() + at, repacked.data() + at, n) == 0) continue;
    if (n != 8) return false;
    uint64_t p, r;
    std::memcpy(&p, packed.data() + at, 8);
    std::memcpy(&r, repacked.data() + at, 8);
    double d;
    std::memcpy(&d, &r, 8);
    if (p != JsonNanBits() || !std::isnan(d)) return false;
  }
  return true;
}

// extract -> pack: the files `extract` writes for an accepted program (in
// memory here), packed again with its config.json, give exactly the bytes a
// repack with the inferred config gives (`repacked`) -- the input itself
// wherever the inferred config reproduces it -- except NaN doubles where
// extract says JSON cannot keep them. Returns "" when that holds.
inline std::string CheckExtractPack(const uint8_t* data, size_t size, const std::vector<uint8_t>& repacked) {
  ValidInput in;
  in.pte = PteFile::FromBytes(Bytes::View(data, size), "fuzz.pte");
  in.paths = {"fuzz.pte"};
  Extraction x;
  try {
    x = ExtractProgram(in);
  } catch (const Error& e) {
    return std::string("extract failed on a program repack rewrites: ") + e.what();
  }
  std::map<std::string, Bytes> files;
  for (const auto& f : x.files) files[f.name] = f.data;
  auto text = [&](const std::string& name) {
    const Bytes& b = files[name];
    return std::string(reinterpret_cast<const char*>(b.data), b.size);
  };
  std::vector<uint8_t> packed;
  try {
    PackageParts pkg =
        PackageFromSpecJson(text("spec.json"), "", "spec.json", [&](const std::string& name) -> std::optional<Bytes> {
          auto it = files.find(name);
          if (it == files.end()) return std::nullopt;
          return it->second;
        });
    packed = RenderPte(LayoutPte(pkg, BackendConfig::FromJsonString(text("config.json"))));
  } catch (const Error& e) {
    return std::string("pack of what extract wrote failed: ") + e.what();
  }
  if (packed == repacked) return "";
  if (!x.json_loses.empty() && SameButJsonNaNs(packed, repacked)) return "";
  return "extract -> pack differs from repack: " + FirstDiff(packed, repacked) +
         (x.json_loses.empty() ? "" : " (extract said: " + x.json_loses + ")");
}

// The lifetime model and what the planner reads, on a program the reader
// accepted: live runs ascending, disjoint and inside their method; nothing
// live in a method that was not derived; blocks, their storages and offsets
// in step; no lower bound above the blocks' aligned sizes added up.
inline std::string CheckPlanViews(const executorch_flatbuffer::Program& p) {
  const ProgramLifetimes lt = DeriveLifetimes(p);
  for (const MethodLifetimes& m : lt.methods) {
    for (const PlanStorage& s : m.storages) {
      if (!m.derived() && !s.live.empty()) return "lifetimes: " + m.name + " was not derived but has live runs";
      for (size_t k = 0; k < s.live.size(); ++k) {
        const LiveRun& r = s.live[k];
        if (r.first > r.last || r.last >= m.instruction_count) return "lifetimes: a run outside " + m.name;
        if (k > 0 && r.first <= s.live[k - 1].last + 1) return "lifetimes: runs of " + m.name + " overlap or touch";
      }
    }
  }
  for (const MethodPlanView& v : PlanViews(p, lt)) {
    for (const PlanBufferView& b : v.buffers) {
      if (b.offsets.size() != b.blocks.size() || b.block_storage.size() != b.blocks.size()) {
        return "plan views: blocks and offsets differ in number";
      }
      uint64_t sum = 0;
      for (const PlanBlock& blk : b.blocks) {
        if (blk.first > blk.last) return "plan views: a block ends before it starts";
        const uint64_t aligned =
            blk.size + (b.alignment - 1) < blk.size ? UINT64_MAX : (blk.size + b.alignment - 1) & ~(b.alignment - 1);
        sum = sum + aligned < sum ? UINT64_MAX : sum + aligned;
      }
      if (b.lower_bound > sum) return "plan views: the lower bound exceeds every block's bytes added up";
    }
  }
  return "";
}

// `ptepack plan -o` (each algorithm's placement, even where not smaller) and
// `map --memory` on a program the reader accepted: every re-planned program
// the reader accepts again, with no plan finding at all; a method whose
// lifetimes are not derived is refused (plan-not-checked), nothing else.
inline std::string CheckReplan(const PteFile& pte) {
  (void)MemoryMapSvg(pte);
  for (PlanAlgorithm a : {PlanAlgorithm::kExecutorchGreedy, PlanAlgorithm::kBest}) {
    PlanReportOptions o;
    o.algorithms = {a};
    o.chosen = a;
    o.keep_input_unless_smaller = false;
    o.planner.improve_budget = 20000;  // a fuzz input's time goes to the checks, not the search
    o.planner.exact_budget = 2000;
    std::vector<uint8_t> out;
    try {
      PackageParts pkg = PackageFromPte(pte);
      InferredConfig inf = InferConfig(pte, pkg);
      inf.ApplyBlobAlignments(pkg);
      ReplanPackage(pte, pkg, o);
      out = RenderPte(LayoutPte(pkg, inf.config));
    } catch (const Error& e) {
      if (e.finding().code == "plan-not-checked") continue;
      return CheckError(e, (std::string("plan ") + PlanAlgorithmName(a)).c_str());
    }
    auto again = PteFile::FromBytes(Bytes::View(out.data(), out.size()), "replanned.pte");
    if (!again->ok()) return std::string("re-planned program does not verify:") + FindingsText(again->report());
    for (const Finding& f : again->report().findings()) {
      if (f.code.rfind("plan-", 0) == 0 && f.code != "plan-not-checked") return "re-planned: " + f.ToString();
    }
  }
  return "";
}

// `accepted` (optional) tells whether the reader accepted the input.
inline std::string CheckPteBytes(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  auto pte = PteFile::FromBytes(Bytes::View(data, size), "fuzz.pte");
  if (accepted) *accepted = pte->ok();
  // `verify --ptd` checks external keys of every program the FlatBuffers
  // verifier accepted, valid or not.
  if (pte->program() != nullptr) pte->CheckExternalKeys({});
  if (!pte->ok()) return "";
  {
    SizeReport sr = AnalyzeSize(*pte, {});
    if (std::string p = CheckSizeBreakdown(sr.pte); !p.empty()) return p;
  }

  if (std::string p = CheckPlanViews(*pte->program()); !p.empty()) return p;

  nlohmann::json d = DescribePte(*pte, {});
  (void)d.dump();
  (void)RenderPteText(d);

  std::vector<uint8_t> out;
  try {
    PackageParts pkg = PackageFromPte(*pte);
    InferredConfig inf = InferConfig(*pte, pkg);
    inf.ApplyBlobAlignments(pkg);
    PteLayout layout = LayoutPte(pkg, inf.config);
    out = RenderPte(layout);
    if (out.size() != layout.total_size()) {
      return "RenderPte wrote " + std::to_string(out.size()) + " bytes, layout says " +
             std::to_string(layout.total_size());
    }
  } catch (const Error& e) {
    return CheckError(e, "restore/layout");
  }
  auto again = PteFile::FromBytes(Bytes::View(out.data(), out.size()), "rendered.pte");
  if (!again->ok()) return "rendered program does not verify:" + FindingsText(again->report());
  if (std::string p = CheckExtractPack(data, size, out); !p.empty()) return p;
  return CheckReplan(*pte);
}

inline std::string CheckPtdBytes(const uint8_t* data, size_t size, bool* accepted = nullptr) {
  auto ptd = PtdFile::FromBytes(Bytes::View(data, size), "fuzz.ptd");
  if (accepted) *accepted = ptd->ok();
  if (!ptd->ok()) return "";
  if (std::string p = CheckSizeBreakdown(AnalyzePtdSize(*ptd)); !p.empty()) return p;

  nlohmann::json d = DescribePtd(*ptd);
  (void)d.dump();
  (void)RenderPtdText(d);

  std::vector<uint8_t> out;
  try {
    ExternalFile ef = ExternalFromPtd(*ptd, "fuzz");
    PtdLayout layout = LayoutPtd(ef, 128);
    out = RenderPtd(layout);
    if (out.size() != layout.total_size()) {
      return "RenderPtd wrote " + std::to_string(out.size()) + " bytes, layout says " +
             std::to_string(layout.total_size());
    }
  } catch (const Error& e) {
    return CheckError(e, "restore/layout");
  }
  auto again = PtdFile::FromBytes(Bytes::View(out.data(), out.size()), "rendered.ptd");
  if (!again->ok()) return "rendered FlatTensor does not verify:" + FindingsText(again->report());
  for (const auto& e : ptd->entries()) {
    auto before = ptd->Find(e.key);
    auto after = again->Find(e.key);
    if (before.has_value() != after.has_value() || (before && !before->Equals(*after))) {
      return "entry \"" + e.key + "\" changed or was lost by the rewrite";
    }
  }
  return "";
}

}  // namespace ptepack::fuzz
