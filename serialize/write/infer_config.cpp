#include "serialize/write/infer_config.h"

#include <algorithm>
#include <map>

#include "layout/alignment.h"
#include "ptepack/error.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {

using namespace prog;

namespace {

// The segment alignment that reproduces `base` and every segment offset
// exactly when segments are re-placed (segments flagged in `own_alignment`
// may carry a larger alignment of their own, like named blobs). Prefers
// ExecuTorch's default 128.
uint64_t InferSegmentAlignment(uint64_t start, uint64_t base, const std::vector<SegmentSpan>& segs,
                               const std::vector<bool>& own_alignment) {
  auto exact = [&](uint64_t a) {
    if (AlignUp(start, a) != base) return false;
    uint64_t prev = 0;
    for (size_t i = 0; i < segs.size(); ++i) {
      uint64_t want = AlignUp(prev, a);
      if (segs[i].offset != want) {
        bool ok = false;
        if (i < own_alignment.size() && own_alignment[i]) {
          for (uint64_t x = a * 2; x <= (1ull << 20) && !ok; x <<= 1) ok = AlignUp(prev, x) == segs[i].offset;
        }
        if (!ok) return false;
      }
      prev = segs[i].offset + segs[i].size;
    }
    return true;
  };
  if (exact(128)) return 128;
  for (uint64_t a = 1ull << 16; a >= 1; a >>= 1) {
    if (exact(a)) return a;
  }
  return 128;
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

bool ConstantOffsetsKnown(const executorch_flatbuffer::Program& program, const BackendConfig& c) {
  return !c.inline_constants && program.constant_segment() && program.constant_segment()->offsets() &&
         program.constant_segment()->offsets()->size() > 1;
}

// Constant tensor alignment from the gaps between constants (unset: the default 16).
std::optional<uint64_t> ConstantTensorAlignment(const executorch_flatbuffer::Program& program, const Package& pkg) {
  const auto& cb = Program{*pkg.program}.constant_buffer().elems;
  const auto* offs = program.constant_segment()->offsets();
  std::optional<uint64_t> found;
  for (uint64_t a = 1; a <= 4096; a <<= 1) {
    bool ok = true;
    for (size_t i = 0; i + 1 < offs->size() && ok; ++i) {
      uint64_t len = Buffer{*cb.at(i).table}.get_storage().size;
      ok = AlignUp(len, a) ==
           offs->Get(static_cast<flatbuffers::uoffset_t>(i + 1)) - offs->Get(static_cast<flatbuffers::uoffset_t>(i));
    }
    if (ok && (a == 16 || !found)) found = a;
  }
  if (found == 16u) found.reset();
  return found;
}

// The alignment (above the segment alignment; 1 if none) that puts segment
// `si` where it is, after the segment before it.
std::optional<uint64_t> OwnAlignment(const std::vector<SegmentSpan>& segs, uint32_t si, uint64_t segment_alignment) {
  uint64_t prev_end = si == 0 ? 0 : segs[si - 1].offset + segs[si - 1].size;
  for (uint64_t a = segment_alignment; a <= (1ull << 20); a <<= 1) {
    if (AlignUp(prev_end, a) == segs[si].offset) return a == segment_alignment ? 1 : a;
  }
  return std::nullopt;
}

// Named data blobs of the .pte: the alignment their segment offsets need.
void SetNamedBlobAlignments(const PteFile& pte, uint64_t segment_alignment, Package& pkg) {
  const auto* named = pte.program()->named_data();
  if (pkg.named_data.empty() || !named) return;
  for (size_t i = 0; i < pkg.named_data.size() && i < named->size(); ++i) {
    uint32_t si = named->Get(static_cast<flatbuffers::uoffset_t>(i))->segment_index();
    if (auto a = OwnAlignment(pte.segments(), si, segment_alignment)) pkg.named_data[i].alignment = *a;
  }
}

// .ptd segment alignment, and the alignment each of their blobs needs.
void ReadPtdAlignments(const std::vector<const PtdFile*>& ptds, BackendConfig& c, Package& pkg) {
  for (const PtdFile* ptd : ptds) {
    uint64_t fb_end = ptd->header().flatbuffer_offset + ptd->header().flatbuffer_size;
    if (ptd->legacy()) {
      fb_end = ptd->header().flatbuffer_offset +
               AlignUp(ptd->header().flatbuffer_size, std::max<uint32_t>(1, ptd->legacy_tensor_alignment()));
    }
    std::vector<bool> own(ptd->segments().size(), true);
    c.ptd_segment_alignment = InferSegmentAlignment(fb_end, ptd->header().segment_base_offset, ptd->segments(), own);
    for (auto& ef : pkg.external) {
      const auto& entries = ptd->entries();
      for (size_t i = 0; i < ef.entries.size() && i < entries.size(); ++i) {
        if (entries[i].legacy_tensor || entries[i].segment_index >= ptd->segments().size()) continue;
        if (auto a = OwnAlignment(ptd->segments(), entries[i].segment_index, c.ptd_segment_alignment)) {
          ef.entries[i].alignment = *a;
        }
      }
    }
  }
}

// Inline delegate data starts at a multiple of the delegate alignment in
// force (the header inserted before the flatbuffer is padded to the largest
// force_align, so file offsets keep it): the lowest set bit of those
// offsets bounds the delegate alignment from above.
std::optional<uint64_t> DelegateAlignmentBound(const PteFile& pte) {
  std::optional<uint64_t> bound;
  const auto* bdd = pte.program()->backend_delegate_data();
  if (!bdd) return bound;
  for (const auto* d : *bdd) {
    if (!d || !d->data() || d->data()->size() == 0) continue;
    uint64_t off = static_cast<uint64_t>(d->data()->data() - pte.file().data);
    uint64_t low = off == 0 ? 4096 : std::min<uint64_t>(off & (~off + 1), 4096);
    bound = bound ? std::min(*bound, low) : low;
  }
  return bound;
}

using AlignmentPair = std::pair<std::optional<uint64_t>, std::optional<uint64_t>>;  // tensor, delegate

// The (tensor, delegate) alignments worth a trial layout, likeliest first.
std::vector<AlignmentPair> CandidateAlignments(const BackendConfig& c, bool ta_known, bool any_delegate,
                                               std::optional<uint64_t> da_bound) {
  std::vector<std::optional<uint64_t>> tas{c.constant_tensor_alignment};
  if (c.inline_constants) {
    for (uint64_t a : {32, 8, 64, 4, 1, 128}) tas.push_back(a);
  }
  // (A vector's data follows its 4-byte length, so alignments 1, 2 and 4
  // write the same bytes: 4 stands for them.)
  std::vector<std::optional<uint64_t>> das{std::nullopt};
  if (da_bound) {
    for (uint64_t a = *da_bound; a >= 4; a >>= 1) {
      if (a != 16) das.push_back(a);
    }
  }
  // The header padding shows the largest force_align in effect, which the
  // data alone may not reveal. Without constants to show the tensor
  // alignment, a program with delegates owes it to the delegate alignment
  // (ExecuTorch writes both the same way when there are no constants).
  for (uint64_t a = 32; a <= 4096; a <<= 1) {
    if (ta_known || (any_delegate && !da_bound && !c.inline_constants)) {
      if (!da_bound) das.push_back(a);
    } else {
      tas.push_back(a);
    }
  }
  std::vector<AlignmentPair> aligns;
  for (const auto& ta : tas) {
    for (const auto& da : das) aligns.push_back({ta, da});
  }
  return aligns;
}

// Which producer's byte layout matches? Tries each with each candidate.
bool MatchProducer(const PteFile& pte, const Package& pkg, const std::vector<AlignmentPair>& aligns,
                   const std::vector<bool>& extract_choices, InferredConfig& out) {
  Bytes original = pte.file().Sub(0, pte.program_size());
  for (const auto& [ta, da] : aligns) {
    for (FlatbufferOrder order : {FlatbufferOrder::kFlatc, FlatbufferOrder::kPythonObjectApi,
                                  FlatbufferOrder::kPythonObjectApi2026, FlatbufferOrder::kFlatcLegacy}) {
      for (bool extract : extract_choices) {
        BackendConfig trial = out.config;
        trial.extract_delegate_segments = extract;
        trial.flatbuffer_order = order;
        trial.constant_tensor_alignment = ta;
        trial.delegate_alignment = da;
        try {
          PteLayout l = LayoutPte(pkg, trial);
          if (l.head.size() == original.size && std::memcmp(l.head.data(), original.data, original.size) == 0) {
            out.config = trial;
            out.exact = true;
            out.note = std::string("flatbuffer matches the ") + FlatbufferOrderName(order) + " layout";
            return true;
          }
        } catch (const Error&) {
        }
      }
    }
  }
  return false;
}

}  // namespace

// Reads each setting from the file's evidence (header, delegates, names,
// segment offsets), then finds the producer and alignments whose layout
// reproduces the flatbuffer bytes.
InferredConfig InferConfig(const PteFile& pte, Package& pkg, const std::vector<const PtdFile*>& ptds) {
  InferredConfig out;
  BackendConfig& c = out.config;
  const auto& program = *pte.program();
  c.legacy_extended_header = pte.header() && !pte.header()->has_segment_data_size;
  // A program without execution plans is valid (the reader only warns).
  Plans plans;
  if (program.execution_plan()) plans.assign(program.execution_plan()->begin(), program.execution_plan()->end());
  const DelegateEvidence del = DelegatesOf(program, plans);
  // Extraction leaves empty payloads inline, so delegates that are all inline
  // and empty do not show whether it was on: both are tried, ExecuTorch's
  // default (on) first.
  c.extract_delegate_segments = del.any_segment || !del.any_delegate;
  std::vector<bool> extract_choices{c.extract_delegate_segments};
  if (del.any_delegate && !del.any_segment && !del.any_inline_data) extract_choices = {true, false};
  c.inline_constants = program.constant_buffer() && program.constant_buffer()->size() > 0;
  ReadEmitFlags(plans, c);
  if (pte.segment_base_offset() != 0) {
    std::vector<bool> own(pte.segments().size(), false);
    if (program.named_data()) {
      for (const auto* nd : *program.named_data()) {
        if (nd->segment_index() < own.size()) own[nd->segment_index()] = true;
      }
    }
    c.segment_alignment = InferSegmentAlignment(pte.program_size(), pte.segment_base_offset(), pte.segments(), own);
  }
  const bool ta_known = ConstantOffsetsKnown(program, c);
  if (ta_known) c.constant_tensor_alignment = ConstantTensorAlignment(program, pkg);
  SetNamedBlobAlignments(pte, c.segment_alignment, pkg);
  ReadPtdAlignments(ptds, c, pkg);
  const auto aligns = CandidateAlignments(c, ta_known, del.any_delegate, DelegateAlignmentBound(pte));
  if (!MatchProducer(pte, pkg, aligns, extract_choices, out)) {
    out.note = "no known producer reproduces the flatbuffer bytes; output will be equivalent, not identical";
  }
  return out;
}

}  // namespace ptepack
