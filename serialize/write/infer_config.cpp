#include "serialize/write/infer_config.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "layout/alignment.h"
#include "ptepack/error.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/infer_evidence.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {

using namespace prog;

namespace {

constexpr uint64_t kMaxAlign = 1ull << 20;

// The powers of two in [lo, hi] (empty when lo > hi).
struct Range {
  uint64_t lo = 1, hi = kMaxAlign;
  bool empty() const { return lo > hi; }
  bool has(uint64_t a) const { return a >= lo && a <= hi; }
  bool fixed() const { return lo == hi; }
  bool any() const { return lo == 1 && hi == kMaxAlign; }
  void Meet(const Range& r) {
    lo = std::max(lo, r.lo);
    hi = std::min(hi, r.hi);
  }
};

// The powers of two for which `fits` holds (each piece of evidence below
// fits a contiguous run of them).
Range Fitting(const std::function<bool(uint64_t)>& fits) {
  Range r{2, 1};
  for (uint64_t a = 1; a <= kMaxAlign; a <<= 1) {
    if (!fits(a)) {
      if (!r.empty()) break;
      continue;
    }
    if (r.empty()) r.lo = a;
    r.hi = a;
  }
  return r;
}

// ExecuTorch's default where it fits, otherwise the fitting value nearest it.
uint64_t Choose(const Range& r, uint64_t dflt) {
  if (r.empty() || r.has(dflt)) return dflt;
  return r.hi < dflt ? r.hi : r.lo;
}

// Segment alignments: the default where it fits, otherwise the largest that
// fits (every segment start agrees with any smaller one by construction; a
// non-default segment alignment is a deliberate page size).
uint64_t ChooseSegmentAlignment(const Range& r) {
  if (r.empty() || r.has(128)) return 128;
  return r.hi;
}

uint64_t AlignDown(uint64_t x, uint64_t a) { return x & ~(a - 1); }

std::string RangeText(const Range& r) {
  if (r.any()) return "any";
  return r.fixed() ? std::to_string(r.lo) : std::to_string(r.lo) + ".." + std::to_string(r.hi);
}

// Records `field` as ambiguous when its range holds more than one value.
void NoteRange(InferredConfig& out, const char* field, const Range& r, uint64_t chosen, const std::string& why) {
  if (r.empty() || r.fixed()) return;
  out.ambiguous.push_back({field, r.lo, r.hi, std::to_string(chosen), why + " (fits " + RangeText(r) + ")", {}});
}

// Segment alignment: the first segment starts at AlignUp(start, a) and each
// segment at AlignUp(end of the one before, a); segments flagged in `own`
// (named blobs) may carry a larger alignment of their own.
Range SegmentAlignmentRange(uint64_t start, uint64_t base, const std::vector<SegmentSpan>& segs,
                            const std::vector<bool>& own) {
  return Fitting([&](uint64_t a) {
    if (AlignUp(start, a) != base) return false;
    uint64_t prev = 0;
    for (size_t i = 0; i < segs.size(); ++i) {
      bool ok = AlignUp(prev, a) == segs[i].offset;
      if (!ok && i < own.size() && own[i]) {
        for (uint64_t x = a * 2; x <= kMaxAlign && !ok; x <<= 1) ok = AlignUp(prev, x) == segs[i].offset;
      }
      if (!ok) return false;
      prev = segs[i].offset + segs[i].size;
    }
    return true;
  });
}

// Constant tensor alignment from the constant segment: each tensor but the
// last takes AlignUp(its size, a) bytes (the last one is not padded).
Range ConstantSegmentRange(const PteFile& pte, const PackageParts& pkg) {
  const auto* cs = pte.program()->constant_segment();
  if (!cs || !cs->offsets() || cs->offsets()->size() <= 2) return {};
  const auto& cb = Program{*pkg.program}.constant_buffer().elems();
  const auto* offs = cs->offsets();
  if (cb.size() < offs->size()) return {};
  return Fitting([&](uint64_t a) {
    for (flatbuffers::uoffset_t i = 0; i + 1 < offs->size(); ++i) {
      uint64_t next = offs->Get(i + 1);
      uint64_t len = Buffer{*cb.at(i).table()}.get_storage().size;
      if (next < offs->Get(i) || AlignUp(len, a) != next - offs->Get(i)) return false;
    }
    return true;
  });
}

// force_align of a byte vector inside the flatbuffer: the builder pads the
// data start down to a multiple of max(a, 4) (the u32 length comes first)
// with as few bytes as it can, right below the object written before it.
Range InlineVectorRange(const FbObjects& objs, const std::string& field, bool* shown) {
  Range r;
  for (const auto& v : objs.vectors) {
    if (objs.FieldOf(v) != field || v.count == 0) continue;
    *shown = true;
    const uint64_t len = v.data_end() - v.data_start();
    const uint64_t above = objs.NextStart(v.data_end());
    r.Meet(Fitting([&](uint64_t a) {
      return above >= len && AlignDown(above - len, std::max<uint64_t>(a, 4)) == v.data_start();
    }));
  }
  return r;
}

// The extended header is padded to the largest force_align in effect,
// max(constant_tensor_alignment, delegate_alignment): 32 bytes for up to
// 32, then exactly that alignment. The flatbuffer resumes right after the
// padding (plus the builder's final padding, less than that alignment).
Range HeaderAlignmentRange(const PteFile& pte, const FbObjects& objs) {
  if (!pte.header()) return {};
  const uint64_t resume = objs.NextStart(8 + pte.header()->length) - 8;
  if (resume < 64) return {1, 32};
  uint64_t m = 64;
  while (m * 2 <= resume && m < kMaxAlign) m <<= 1;
  return {m, m};
}

// The builder's largest alignment in use (minalign): the flatbuffer (without
// the inserted header) is a multiple of it, and its final padding, between
// the file identifier and the first object, is shorter than it.
Range FinishAlignmentRange(const PteFile& pte, const FbObjects& objs) {
  uint64_t header = 0, resume = objs.NextStart(8) - 8;
  if (pte.header()) {
    resume = objs.NextStart(8 + pte.header()->length) - 8;
    header = 32;
    while (header * 2 <= resume && header < kMaxAlign) header <<= 1;
  }
  const uint64_t finish_pad = resume - header, size = pte.program_size() - header;
  return Fitting([&](uint64_t a) { return finish_pad < a && size % a == 0; });
}

using Plans = std::vector<const executorch_flatbuffer::ExecutionPlan*>;

// What the delegates show about extract_delegate_segments.
struct DelegateEvidence {
  bool any_delegate = false;
  bool any_segment = false;      // some payload is in a segment: extraction was on
  bool any_inline_data = false;  // some non-empty payload is inline: it was off
};

DelegateEvidence DelegatesOf(const executorch_flatbuffer::Program& program, const Plans& plans) {
  DelegateEvidence e;
  const auto* bdd = program.backend_delegate_data();
  for (const auto* plan : plans) {
    if (!plan->delegates()) continue;
    for (const auto* d : *plan->delegates()) {
      e.any_delegate = true;
      if (!d->processed()) continue;
      if (d->processed()->location() == executorch_flatbuffer::DataLocation::SEGMENT) e.any_segment = true;
      if (d->processed()->location() != executorch_flatbuffer::DataLocation::INLINE) continue;
      uint32_t i = d->processed()->index();
      if (bdd && i < bdd->size() && bdd->Get(i)->data() && bdd->Get(i)->data()->size() > 0) e.any_inline_data = true;
    }
  }
  return e;
}

// extract_delegate_segments: on if a payload is in a segment, off if a
// non-empty payload is inline. Otherwise the file cannot tell (extraction
// keeps empty payloads inline): ExecuTorch's default, on.
void InferExtraction(const DelegateEvidence& del, InferredConfig& out) {
  out.config.extract_delegate_segments = del.any_segment || !del.any_inline_data;
  if (del.any_segment || del.any_inline_data) return;
  out.ambiguous.push_back(
      {"extract_delegate_segments",
       0,
       0,
       "true",
       del.any_delegate ? "every delegate payload is empty (kept inline either way)" : "no delegates",
       {"true", "false"}});
}

// emit_stacktrace and emit_mutable_buffer_names, from what the program carries.
void ReadEmitFlags(const Plans& plans, BackendConfig& c) {
  bool stack = false, names = false;
  for (const auto* plan : plans) {
    if (plan->chains()) {
      for (const auto* ch : *plan->chains()) stack = stack || ch->stacktrace();
    }
    if (!plan->values()) continue;
    for (const auto* v : *plan->values()) {
      if (v->val_type() != executorch_flatbuffer::KernelTypes::Tensor) continue;
      const auto* eti = v->val_as_Tensor()->extra_tensor_info();
      if (eti && eti->location() != executorch_flatbuffer::TensorDataLocation::EXTERNAL &&
          eti->fully_qualified_name()) {
        names = true;
      }
    }
  }
  c.emit_stacktrace = stack;
  c.emit_mutable_buffer_names = names;
  c.external_constants = false;  // already-external data stays in pkg.external
  c.external_mutable_weights = false;
}

// Force-aligned vectors in the flatbuffer (inline constants, inline delegate
// data) set the builder's minalign when they align more than its scalars
// (8): the finish padding bounds the largest of them.
void MeetFinishAlignment(const Range& fin, bool inline_constants, bool inline_delegates, Range& cta, Range& da) {
  if (fin.empty()) return;
  if (inline_constants) cta.Meet({1, fin.hi});
  if (inline_delegates) da.Meet({1, fin.hi});
  if (fin.lo <= 8 || (!inline_constants && !inline_delegates)) return;
  const bool to_delegate = inline_delegates && (!inline_constants || Choose(cta, 16) < fin.lo);
  (to_delegate ? da : cta).Meet({fin.lo, kMaxAlign});
}

std::optional<uint64_t> Explicit(uint64_t a) { return a == 16 ? std::nullopt : std::optional<uint64_t>(a); }

// constant_tensor_alignment and delegate_alignment from the constant
// segment, the padding of inline constants and inline delegate data, and the
// header padding (which shows only the larger of the two).
void InferTensorAndDelegateAlignment(const PteFile& pte, const PackageParts& pkg, const FbObjects& objs,
                                     bool any_delegate, InferredConfig& out) {
  bool inline_constants = false, da_shown = false;
  Range cta = ConstantSegmentRange(pte, pkg);
  cta.Meet(InlineVectorRange(objs, "Buffer.storage", &inline_constants));
  const bool cta_shown = inline_constants || !cta.any();
  Range da = InlineVectorRange(objs, "BackendDelegateInlineData.data", &da_shown);
  const Range m = HeaderAlignmentRange(pte, objs);
  cta.Meet({1, m.hi});
  da.Meet({1, m.hi});
  MeetFinishAlignment(FinishAlignmentRange(pte, objs), inline_constants, da_shown, cta, da);
  uint64_t c = Choose(cta, 16), d = Choose(da, 16);
  if (m.fixed() && m.lo > 32 && std::max(c, d) != m.lo) {
    // The header shows the larger alignment; which setting it belongs to
    // only the constants or inline delegate data could tell.
    const bool to_delegate = da.has(m.lo) && (!cta.has(m.lo) || (any_delegate && !cta_shown));
    (to_delegate ? d : c) = m.lo;
    if (da.has(m.lo) && cta.has(m.lo)) {
      out.ambiguous.push_back({to_delegate ? "delegate_alignment" : "constant_tensor_alignment",
                               1,
                               m.lo,
                               std::to_string(m.lo),
                               "the header padding shows max(constant_tensor_alignment, delegate_alignment) = " +
                                   std::to_string(m.lo) + "; nothing shows which (" +
                                   (to_delegate ? "delegates and no constants: given to delegate_alignment)"
                                                : "given to constant_tensor_alignment)"),
                               {}});
    }
    (to_delegate ? da : cta) = {m.lo, m.lo};
  } else if (m.fixed() && m.lo > 32) {
    (c == m.lo ? cta : da) = {m.lo, m.lo};
  }
  if (cta.empty() || da.empty()) out.note = "the alignment evidence is inconsistent; ";
  out.config.constant_tensor_alignment = Explicit(c);
  out.config.delegate_alignment = Explicit(d);
  NoteRange(out, "constant_tensor_alignment", cta, c,
            cta_shown ? "constant offsets and padding" : "no constant offsets or inline constants show it");
  NoteRange(out, "delegate_alignment", da, d,
            da_shown ? "inline delegate data padding" : "no inline delegate data in the program");
}

// +1 if `t`'s equal-sized fields sit in descending id order from its end
// (flatc: larger ids pushed first), -1 in ascending order (the Python object
// API pushes fields in id order), 0 if fewer than two fields show it.
int FieldOrderSign(const reflection::Object& obj, const flatbuffers::Table* t) {
  std::map<size_t, uint16_t> last;  // field size -> position of the last field of that size
  for (const auto* f : fb::ProgramSchema().FieldsById(obj)) {
    if (!f || f->deprecated()) continue;
    uint16_t pos = t->GetOptionalFieldOffset(f->offset());
    if (pos == 0) continue;
    auto bt = f->type()->base_type();
    size_t size = flatbuffers::IsScalar(bt) ? fb::ScalarSize(bt) : 4;
    auto it = last.find(size);
    if (it != last.end()) return pos > it->second ? 1 : -1;
    last[size] = pos;
  }
  return 0;
}

// The producer: field order separates the Python object API from flatc;
// an empty vector aligned above 4 separates flatc before FlatBuffers 24
// (pads it) from later flatc (does not).
void InferProducer(const PteFile& pte, const FbObjects& objs, InferredConfig& out) {
  const auto& s = fb::ProgramSchema();
  int sign = FieldOrderSign(s.Root(), reinterpret_cast<const flatbuffers::Table*>(pte.program()));
  const auto* plans = pte.program()->execution_plan();
  for (flatbuffers::uoffset_t i = 0; sign == 0 && plans && i < plans->size(); ++i) {
    sign = FieldOrderSign(*s.FindObject("executorch_flatbuffer.ExecutionPlan"),
                          reinterpret_cast<const flatbuffers::Table*>(plans->Get(i)));
  }
  if (sign < 0) {
    out.config.flatbuffer_order = FlatbufferOrder::kPythonObjectApi;
    return;
  }
  bool legacy = false, current = false;
  for (const auto& v : objs.vectors) {
    uint64_t a = std::max<uint64_t>(4, v.elem_size);
    if (objs.FieldOf(v) == "Buffer.storage") a = std::max(a, out.config.tensor_alignment());
    if (objs.FieldOf(v) == "BackendDelegateInlineData.data") a = std::max(a, out.config.delegate_data_alignment());
    if (v.count != 0 || a <= 4) continue;
    if (objs.NextStart(v.data_start()) - v.data_start() >= 4) legacy = true;
    if (v.data_start() % a != 0) current = true;
  }
  out.config.flatbuffer_order = legacy && !current ? FlatbufferOrder::kFlatcLegacy : FlatbufferOrder::kFlatc;
  if (legacy == current) {
    out.ambiguous.push_back({"flatbuffer_order",
                             0,
                             0,
                             FlatbufferOrderName(out.config.flatbuffer_order),
                             sign == 0 ? "no table shows its field order"
                                       : "flatc and flatc-legacy write these bytes "
                                         "the same (no padded empty vector)",
                             {"flatc", "flatc-legacy"}});
  }
}

// segment_alignment from the header's segment base offset and the segment
// offsets (named blobs may be aligned more).
void InferSegmentAlignment(const PteFile& pte, InferredConfig& out) {
  if (pte.segment_base_offset() == 0) {
    out.ambiguous.push_back({"segment_alignment", 1, kMaxAlign, "128", "no segment data", {}});
    return;
  }
  std::vector<bool> own(pte.segments().size(), false);
  if (const auto* named = pte.program()->named_data()) {
    for (const auto* nd : *named) {
      if (nd->segment_index() < own.size()) own[nd->segment_index()] = true;
    }
  }
  Range r = SegmentAlignmentRange(pte.program_size(), pte.segment_base_offset(), pte.segments(), own);
  out.config.segment_alignment = ChooseSegmentAlignment(r);
  if (r.empty()) out.note += "no segment alignment places every segment; ";
  NoteRange(out, "segment_alignment", r, out.config.segment_alignment, "segment offsets");
}

// The alignment (above the segment alignment; 1 if none) that puts segment
// `si` where it is, after the segment before it.
uint64_t OwnAlignment(const std::vector<SegmentSpan>& segs, uint32_t si, uint64_t segment_alignment) {
  uint64_t prev_end = si == 0 ? 0 : segs[si - 1].offset + segs[si - 1].size;
  for (uint64_t a = segment_alignment; a <= kMaxAlign; a <<= 1) {
    if (AlignUp(prev_end, a) == segs[si].offset) return a == segment_alignment ? 1 : a;
  }
  return 1;
}

// Named data blobs of the .pte: the alignment their segment offsets need.
void NamedBlobAlignments(const PteFile& pte, const PackageParts& pkg, InferredConfig& out) {
  const auto* named = pte.program()->named_data();
  out.blobs.named.assign(pkg.named_data.size(), 0);
  for (size_t i = 0; named && i < pkg.named_data.size() && i < named->size(); ++i) {
    uint32_t si = named->Get(static_cast<flatbuffers::uoffset_t>(i))->segment_index();
    if (si < pte.segments().size()) out.blobs.named[i] = OwnAlignment(pte.segments(), si, out.config.segment_alignment);
  }
}

// .ptd segment alignment (pkg.external[i] was read from ptds[i]), and the
// alignment each of their blobs needs.
void InferPtdAlignments(const std::vector<const PtdFile*>& ptds, const PackageParts& pkg, InferredConfig& out) {
  out.blobs.external.assign(pkg.external.size(), {});
  Range all;
  for (const PtdFile* ptd : ptds) {
    uint64_t fb_end = ptd->header().flatbuffer_offset + ptd->header().flatbuffer_size;
    if (ptd->legacy()) {
      fb_end = ptd->header().flatbuffer_offset +
               AlignUp(ptd->header().flatbuffer_size, std::max<uint32_t>(1, ptd->legacy_tensor_alignment()));
    }
    std::vector<bool> own(ptd->segments().size(), true);
    all.Meet(SegmentAlignmentRange(fb_end, ptd->header().segment_base_offset, ptd->segments(), own));
  }
  out.config.ptd_segment_alignment = ChooseSegmentAlignment(all);
  if (!ptds.empty())
    NoteRange(out, "ptd_segment_alignment", all, out.config.ptd_segment_alignment, ".ptd segment offsets");
  for (size_t f = 0; f < ptds.size() && f < pkg.external.size(); ++f) {
    const auto& entries = ptds[f]->entries();
    auto& aligns = out.blobs.external[f];
    aligns.assign(pkg.external[f].entries.size(), 0);
    for (size_t i = 0; i < aligns.size() && i < entries.size(); ++i) {
      if (entries[i].legacy_tensor || entries[i].segment_index >= ptds[f]->segments().size()) continue;
      aligns[i] = OwnAlignment(ptds[f]->segments(), entries[i].segment_index, out.config.ptd_segment_alignment);
    }
  }
}

// The verification pass: the package laid out with the inferred config must
// rewrite the flatbuffer byte for byte.
void Verify(const PteFile& pte, const PackageParts& pkg, InferredConfig& out) {
  PackageParts trial = pkg;
  out.ApplyBlobAlignments(trial);
  try {
    PteLayout l = LayoutPteHead(trial, out.config);
    Bytes original = pte.file().Sub(0, pte.program_size());
    out.exact = l.head.size() == original.size && std::memcmp(l.head.data(), original.data, original.size) == 0;
  } catch (const Error& e) {
    out.note += std::string("laying out with it fails: ") + e.what() + "; ";
  }
  out.note +=
      out.exact ? std::string("flatbuffer matches the ") + FlatbufferOrderName(out.config.flatbuffer_order) + " layout"
                : "the inferred config does not reproduce the flatbuffer bytes; output will be equivalent, "
                  "not identical";
}

}  // namespace

void InferredConfig::ApplyBlobAlignments(PackageParts& pkg) const {
  for (size_t i = 0; i < blobs.named.size() && i < pkg.named_data.size(); ++i) {
    if (blobs.named[i]) pkg.named_data[i].alignment = blobs.named[i];
  }
  for (size_t f = 0; f < blobs.external.size() && f < pkg.external.size(); ++f) {
    for (size_t i = 0; i < blobs.external[f].size() && i < pkg.external[f].entries.size(); ++i) {
      if (blobs.external[f][i]) pkg.external[f].entries[i].alignment = blobs.external[f][i];
    }
  }
}

const Ambiguity* InferredConfig::Find(const std::string& field) const {
  for (const auto& a : ambiguous) {
    if (a.field == field) return &a;
  }
  return nullptr;
}

// Reads each setting from the file's evidence, then checks once that the
// result reproduces the flatbuffer.
InferredConfig InferConfig(const PteFile& pte, const PackageParts& pkg, const std::vector<const PtdFile*>& ptds) {
  InferredConfig out;
  BackendConfig& c = out.config;
  const auto& program = *pte.program();
  c.legacy_extended_header = pte.header() && !pte.header()->has_segment_data_size;
  // A program without execution plans is valid (the reader only warns).
  Plans plans;
  if (program.execution_plan()) plans.assign(program.execution_plan()->begin(), program.execution_plan()->end());
  const DelegateEvidence del = DelegatesOf(program, plans);
  InferExtraction(del, out);
  c.inline_constants = program.constant_buffer() && program.constant_buffer()->size() > 0;
  ReadEmitFlags(plans, c);
  InferSegmentAlignment(pte, out);
  {
    // Freed before the verification layout: a walk of 300,000 tensors holds
    // 85 MB of object starts and vector records.
    const FbObjects objs = WalkFlatbuffer(fb::ProgramSchema(), pte.file().data, pte.program_size());
    InferTensorAndDelegateAlignment(pte, pkg, objs, del.any_delegate, out);
    InferProducer(pte, objs, out);
  }
  NamedBlobAlignments(pte, pkg, out);
  InferPtdAlignments(ptds, pkg, out);
  Verify(pte, pkg, out);
  // The Python flatbuffers package changed its vtable sharing in 25.12.19
  // (a vtable is shared only when the object size matches too): the two
  // python rules differ only where tables with the same field offsets have
  // different sizes, which re-encoding with the newer rule shows.
  if (!out.exact && c.flatbuffer_order == FlatbufferOrder::kPythonObjectApi) {
    InferredConfig newer = out;
    newer.config.flatbuffer_order = FlatbufferOrder::kPythonObjectApi2026;
    newer.note.clear();
    Verify(pte, pkg, newer);
    if (newer.exact) out = std::move(newer);
  }
  return out;
}

bool SettingFit::Overlaps(const SettingFit& o) const {
  if (hi != 0 || o.hi != 0) return std::max(lo, o.lo) <= std::min(hi, o.hi);
  for (const auto& v : values) {
    if (std::find(o.values.begin(), o.values.end(), v) != o.values.end()) return true;
  }
  return false;
}

std::string SettingFit::Text() const {
  if (hi != 0) return lo == hi ? std::to_string(lo) : lo == 1 && hi == kMaxAlign ? "any" : RangeText({lo, hi});
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  return s;
}

std::map<std::string, SettingFit> SettingFits(const InferredConfig& inf) {
  const BackendConfig& c = inf.config;
  std::map<std::string, SettingFit> fits;
  auto one = [](uint64_t v) { return SettingFit{v, v, {}}; };
  fits["segment_alignment"] = one(c.segment_alignment);
  fits["constant_tensor_alignment"] = one(c.tensor_alignment());
  fits["delegate_alignment"] = one(c.delegate_data_alignment());
  fits["ptd_segment_alignment"] = one(c.ptd_segment_alignment);
  fits["extract_delegate_segments"] = SettingFit{0, 0, {c.extract_delegate_segments ? "true" : "false"}};
  fits["flatbuffer_order"] = SettingFit{0, 0, {FlatbufferOrderName(c.flatbuffer_order)}};
  for (const Ambiguity& a : inf.ambiguous) {
    auto it = fits.find(a.field);
    if (it == fits.end()) continue;
    it->second = a.hi != 0 ? SettingFit{a.lo, a.hi, {}} : SettingFit{0, 0, a.values};
  }
  return fits;
}

}  // namespace ptepack
