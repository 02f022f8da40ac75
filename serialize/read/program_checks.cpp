#include "serialize/read/program_checks.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

namespace ptepack {

namespace efb = executorch_flatbuffer;

namespace {

std::string Idx(const std::string& what, uint64_t i) { return what + "[" + std::to_string(i) + "]"; }

// A name in a message ("forward: values[3] (tensor)"), written out only when
// a finding is reported (writing one for every value, tensor, instruction and
// argument that passes was most of the checks' time): the name before it (or
// a string), then a part, then an index. It refers to them, so it lives no
// longer than they do.
class Loc {
 public:
  static constexpr uint64_t kNoIndex = UINT64_MAX;
  Loc(const std::string& text) : text_(&text) {}  // NOLINT(google-explicit-constructor): a name written out
  Loc(const char* part, uint64_t index) : part_(part), index_(index) {}
  Loc(const Loc& before, const char* part, uint64_t index = kNoIndex) : before_(&before), part_(part), index_(index) {}
  std::string str() const {
    std::string s = before_ ? before_->str() : text_ ? *text_ : std::string();
    s += part_;
    if (index_ != kNoIndex) s += "[" + std::to_string(index_) + "]";
    return s;
  }

 private:
  const Loc* before_ = nullptr;
  const std::string* text_ = nullptr;
  const char* part_ = "";
  uint64_t index_ = kNoIndex;
};

// ---- Checks for what ExecuTorch's runtime refuses (or crashes on) while it
// loads a program (Program::load with InternalConsistency, then
// Program::load_method). Each one reports one kind of problem at the file
// offset of the table it is about.

// ExecutionPlan fields the runtime dereferences without a null check, or
// refuses when absent (MethodMeta, Method::init).
void CheckPlanFields(const Where& w, const efb::ExecutionPlan& plan, const std::string& pn) {
  auto need = [&](const void* field, const char* name) {
    if (field == nullptr) {
      w.r.Error("missing-field", pn + " has no " + name + " (ExecuTorch refuses to load the method)", w.at(&plan),
                std::string("a ") + name + " vector", "absent");
    }
  };
  need(plan.values(), "values");
  need(plan.non_const_buffer_sizes(), "non_const_buffer_sizes");
  need(plan.inputs(), "inputs");
  need(plan.outputs(), "outputs");
  need(plan.delegates(), "delegates");
  if (plan.chains() == nullptr || plan.chains()->size() == 0) {
    w.r.Error("no-chains", pn + " has no chains (ExecuTorch refuses to load a method without one)", w.at(&plan),
              "at least 1 chain", plan.chains() ? "0 chains" : "absent");
  }
}

// A value slot must hold a value: type NONE (0) or a type tag without its
// table is "Null value at index" to the runtime (Null is tag 1).
bool CheckValueSlot(const Where& w, const efb::EValue& ev, const Loc& vn) {
  if (ev.val_type() == efb::KernelTypes::NONE) {
    w.r.Error("null-value", vn.str() + " has no value (union type NONE)", w.at(&ev),
              "a KernelTypes tag 1.." + std::to_string(static_cast<int>(efb::KernelTypes::MAX)), "0");
    return false;
  }
  return true;
}

// Tensor fields the runtime's tensor parser requires (tensor_parser_portable,
// program_validation). Returns false when the tensor's size cannot be known.
bool CheckTensorShape(const Where& w, const efb::Tensor& t, const Loc& tn) {
  int st = static_cast<int>(t.scalar_type());
  if (ElementSize(static_cast<ScalarType>(st)) == 0) {
    w.r.Error("bad-enum", tn.str() + " has an unknown scalar type", w.at(&t), "a known ScalarType", std::to_string(st));
    return false;
  }
  if (t.sizes() == nullptr) {
    w.r.Error("missing-field", tn.str() + " has no sizes", w.at(&t), "a sizes vector", "absent");
    return false;
  }
  const size_t rank = t.sizes()->size();
  bool ok = true;
  if (rank > kRuntimeMaxRank) {
    w.r.Error("rank-too-large", tn.str() + " has more dimensions than the runtime supports", w.at(t.sizes()),
              "<= " + std::to_string(kRuntimeMaxRank), std::to_string(rank));
    ok = false;
  }
  if (t.dim_order() == nullptr) {
    w.r.Error("missing-field", tn.str() + " has no dim_order", w.at(&t), "a dim_order vector", "absent");
    ok = false;
  } else if (t.dim_order()->size() != rank) {
    w.r.Error("dim-order-mismatch", tn.str() + " dim_order length differs from its rank", w.at(t.dim_order()),
              std::to_string(rank) + " entries", std::to_string(t.dim_order()->size()));
    ok = false;
  } else if (ok) {
    uint32_t seen = 0;
    for (size_t i = 0; i < rank; ++i) {
      uint8_t d = t.dim_order()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (d >= rank || (seen & (1u << d)) != 0) {
        w.r.Error("bad-dim-order", tn.str() + " dim_order is not a permutation of its dimensions", w.at(t.dim_order()),
                  "a permutation of 0.." + std::to_string(rank - 1), Idx("dim_order", i) + " = " + std::to_string(d));
        ok = false;
        break;
      }
      seen |= 1u << d;
    }
  }
  if (t.storage_offset() != 0) {
    w.r.Error("unsupported", tn.str() + " has a storage offset (the runtime supports none)", w.at(&t), "0",
              std::to_string(t.storage_offset()));
  }
  if (t.shape_dynamism() == efb::TensorShapeDynamism::DYNAMIC_UNBOUND) {
    w.r.Error("unsupported", tn.str() + " has an unbounded dynamic shape (the runtime supports none)", w.at(&t),
              "STATIC or DYNAMIC_BOUND", "DYNAMIC_UNBOUND");
  }
  if (!TensorNbytes(t)) {
    w.r.Error("bad-shape", tn.str() + " has a negative or overflowing shape", w.at(t.sizes()));
    return false;
  }
  return ok;
}

// Inputs and outputs the runtime can describe (MethodMeta's input_tag /
// output_tag know Null, Int, Double, Bool, String and Tensor only).
void CheckIoTags(const Where& w, const efb::ExecutionPlan& plan, const std::string& pn) {
  if (!plan.values()) return;
  const auto* vals = plan.values();
  auto check = [&](const flatbuffers::Vector<int32_t>* l, const char* what) {
    if (!l) return;
    for (size_t k = 0; k < l->size(); ++k) {
      int32_t i = l->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (i < 0 || static_cast<size_t>(i) >= vals->size()) continue;  // index-out-of-range elsewhere
      auto ty = vals->Get(static_cast<flatbuffers::uoffset_t>(i))->val_type();
      if (ty == efb::KernelTypes::Null || ty == efb::KernelTypes::Int || ty == efb::KernelTypes::Double ||
          ty == efb::KernelTypes::Bool || ty == efb::KernelTypes::String || ty == efb::KernelTypes::Tensor) {
        continue;
      }
      w.r.Error("bad-io-type", pn + ": " + Idx(what, k) + " refers to a value the runtime cannot pass in or out",
                w.at(l), "Null, Int, Double, Bool, String or Tensor", std::string(efb::EnumNameKernelTypes(ty)));
    }
  };
  check(plan.inputs(), "inputs");
  check(plan.outputs(), "outputs");
}

// List values: the list must be there, and its items refer to values the
// runtime can use while it parses values in order (TensorList and
// OptionalTensorList items must already be parsed tensors).
void CheckListValue(const Where& w, const efb::ExecutionPlan& plan, size_t vi, const efb::EValue& ev, const Loc& vn) {
  const auto* vals = plan.values();
  const size_t nvals = vals->size();
  auto missing = [&](const void* items) {
    if (items) return false;
    w.r.Error("missing-list", vn.str() + " has no items", w.at(&ev), "an items vector", "absent");
    return true;
  };
  switch (ev.val_type()) {
    case efb::KernelTypes::IntList: {
      const auto* items = ev.val_as_IntList()->items();
      if (missing(items)) return;
      for (size_t k = 0; k < items->size(); ++k) {
        int64_t i = items->Get(static_cast<flatbuffers::uoffset_t>(k));
        if (i < 0 || static_cast<uint64_t>(i) >= nvals) {
          w.r.Error("index-out-of-range", Loc(vn, ".items", k).str() + " is not a value index", w.at(items),
                    "0.." + std::to_string(nvals - 1), std::to_string(i));
          return;
        }
      }
      return;
    }
    case efb::KernelTypes::DoubleList:
      missing(ev.val_as_DoubleList()->items());
      return;
    case efb::KernelTypes::BoolList:
      missing(ev.val_as_BoolList()->items());
      return;
    case efb::KernelTypes::TensorList:
    case efb::KernelTypes::OptionalTensorList: {
      const bool optional = ev.val_type() == efb::KernelTypes::OptionalTensorList;
      const auto* items = optional ? ev.val_as_OptionalTensorList()->items() : ev.val_as_TensorList()->items();
      if (missing(items)) return;
      for (size_t k = 0; k < items->size(); ++k) {
        int32_t i = items->Get(static_cast<flatbuffers::uoffset_t>(k));
        if (optional && i == -1) continue;
        if (i < 0 || static_cast<size_t>(i) >= nvals) continue;  // index-out-of-range elsewhere
        auto ty = vals->Get(static_cast<flatbuffers::uoffset_t>(i))->val_type();
        bool ok_type = ty == efb::KernelTypes::Tensor || (optional && ty == efb::KernelTypes::Null);
        if (!ok_type) {
          w.r.Error("bad-list-item", Loc(vn, ".items", k).str() + " does not refer to a tensor", w.at(items),
                    optional ? "a Tensor or Null value" : "a Tensor value", std::string(efb::EnumNameKernelTypes(ty)));
          return;
        }
        if (static_cast<size_t>(i) >= vi) {
          w.r.Error("forward-reference",
                    Loc(vn, ".items", k).str() + " refers to a value the runtime has not parsed yet", w.at(items),
                    "< " + std::to_string(vi), std::to_string(i));
          return;
        }
      }
      return;
    }
    case efb::KernelTypes::String:
      if (ev.val_as_String()->string_val() == nullptr) {
        w.r.Error("missing-string", vn.str() + " (String) has no string_val", w.at(&ev), "a string", "absent");
      }
      return;
    default:
      return;
  }
}

// Delegate fields the runtime reads without a null check.
void CheckDelegateFields(const Where& w, const efb::Program& p, const efb::BackendDelegate& dl, const std::string& dn,
                         uint64_t segment_base_offset) {
  if (const auto* cs = dl.compile_specs()) {
    for (size_t c = 0; c < cs->size(); ++c) {
      const auto* spec = cs->Get(static_cast<flatbuffers::uoffset_t>(c));
      if (spec->key() == nullptr || spec->value() == nullptr) {
        w.r.Error("missing-field", dn + Idx(".compile_specs", c) + " has no " + (spec->key() ? "value" : "key"),
                  w.at(spec), "key and value", "absent");
      }
    }
  }
  const auto* pr = dl.processed();
  if (!pr) return;
  if (pr->location() == efb::DataLocation::INLINE) {
    const auto* bdd = p.backend_delegate_data();
    if (bdd && pr->index() < bdd->size() && bdd->Get(pr->index())->data() == nullptr) {
      w.r.Error("missing-field", dn + " refers to backend_delegate_data without data", w.at(bdd->Get(pr->index())),
                "a data vector", "absent");
    }
  } else if (pr->location() == efb::DataLocation::SEGMENT && segment_base_offset == 0) {
    // Program::LoadSegment refuses any segment when there is no segment base.
    w.r.Error("segments-without-header", dn + " data is in a segment but the file has no segment base offset", w.at(pr),
              "an eh00 header with segment_base_offset > 0", "0");
  }
}

// Instruction fields the runtime requires while it builds the chains.
void CheckInstructionFields(const Where& w, const efb::ExecutionPlan& plan, const efb::Instruction& ins,
                            const Loc& in) {
  if (ins.instr_args() == nullptr) return;  // reported with the instruction type
  switch (ins.instr_args_type()) {
    case efb::InstructionArguments::KernelCall: {
      const auto* k = ins.instr_args_as_KernelCall();
      if (!k->args()) {
        w.r.Error("missing-field", in.str() + " (KernelCall) has no args", w.at(k), "an args vector", "absent");
      }
      const auto* ops = plan.operators();
      if (ops && k->op_index() >= 0 && static_cast<size_t>(k->op_index()) < ops->size()) {
        const auto* op = ops->Get(static_cast<flatbuffers::uoffset_t>(k->op_index()));
        if (op->name()) {
          size_t len = op->name()->size() + (op->overload() && op->overload()->size() ? op->overload()->size() + 1 : 0);
          if (len >= kRuntimeOperatorNameLimit) {
            w.r.Error("operator-name-too-long",
                      in.str() + " calls an operator whose name.overload the runtime cannot hold", w.at(op),
                      "< " + std::to_string(kRuntimeOperatorNameLimit) + " characters", std::to_string(len));
          }
        }
      }
      break;
    }
    case efb::InstructionArguments::DelegateCall: {
      const auto* k = ins.instr_args_as_DelegateCall();
      if (!k->args()) {
        w.r.Error("missing-field", in.str() + " (DelegateCall) has no args", w.at(k), "an args vector", "absent");
      }
      break;
    }
    default:
      break;
  }
}

// ---- The whole program, one table at a time.

class ProgramChecker {
 public:
  ProgramChecker(const Where& w, const ProgramFrame& f, const ReadOptions& opts)
      : w_(w), r_(w.r), p_(f.program), header_(f.header), base_(f.segment_base_offset), opts_(opts) {}

  std::vector<SegmentSpan> Run() {
    CheckSegments();
    CheckConstantSegment();
    CheckMutableDataSegments();
    CheckNamedData();
    CheckExecutionPlans();
    return std::move(segments_);
  }

 private:
  // What one method's checks share.
  struct Plan {
    const efb::ExecutionPlan& plan;
    std::string name;
    std::string prefix;  // name + ": ", what a finding in the method starts with
    size_t nvals = 0, nops = 0, ndel = 0;
    const flatbuffers::Vector<int64_t>* ncbs = nullptr;
  };

  uint64_t at(const void* p) const { return w_.at(p); }

  // A string of the file: present when `required`, UTF-8, and without a NUL
  // when the runtime reads it as a C string (`name`: every name and key; a
  // String EValue's bytes are read with their size).
  void CheckString(const flatbuffers::String* s, const Loc& what, bool required, bool name = true);
  bool SegmentUsable(uint64_t idx, const Loc& what, const void* where);
  void CheckSegments();
  void CheckSegment(size_t i, uint64_t* prev_end);
  void CheckConstantSegment();
  void CheckMutableDataSegments();
  void CheckNamedData();
  void CheckExecutionPlans();
  void CheckPlan(size_t pi, std::set<std::string>* method_names);
  // `what` names the index with its method ("forward: inputs[0]").
  void CheckValueIndex(const Plan& pl, int64_t v, const Loc& what, const void* where, bool allow_neg1 = false);
  void CheckValueList(const Plan& pl, const flatbuffers::Vector<int32_t>* l, const Loc& what, const void* where,
                      bool allow_neg1 = false);
  void CheckBufferSizes(const Plan& pl);
  void CheckOperators(const Plan& pl);
  void CheckDelegates(const Plan& pl);
  void CheckValues(const Plan& pl);
  void CheckTensor(const Plan& pl, const efb::EValue& ev, const Loc& vn);
  void CheckPlannedTensor(const Plan& pl, const efb::Tensor& t, const Loc& tn, uint64_t nbytes);
  void CheckMutableState(const efb::Tensor& t, const Loc& tn, uint64_t nbytes);
  void CheckConstantData(const efb::Tensor& t, const Loc& tn, uint64_t nbytes);
  void CheckChains(const Plan& pl);
  void CheckInstruction(const Plan& pl, const efb::Instruction& ins, const Loc& in, size_t ninstr);

  const Where& w_;
  Report& r_;
  const efb::Program& p_;
  const std::optional<ExtendedHeader>& header_;
  const uint64_t base_;  // segment_base_offset
  const ReadOptions& opts_;
  std::vector<SegmentSpan> segments_;
  // Constants: in the constant segment (offsets) or, before ExecuTorch 0.7, in constant_buffer.
  size_t n_const_offsets_ = 0, n_const_buffers_ = 0;
  bool cseg_usable_ = false;
  uint64_t cseg_size_ = 0, cseg_file_off_ = 0;
};

void ProgramChecker::CheckString(const flatbuffers::String* s, const Loc& what, bool required, bool name) {
  if (s == nullptr) {
    if (required) r_.Error("missing-string", what.str() + " is missing");
    return;
  }
  if (!IsValidUtf8(s->c_str(), s->size())) {
    r_.Error("non-utf8", what.str() + " is not valid UTF-8", at(s), "UTF-8 text", "invalid bytes");
  }
  // Names reach the runtime as C strings (c_str()): an embedded NUL makes it
  // look up another operator, method, backend or key than the file names.
  const void* nul = name ? std::memchr(s->c_str(), 0, s->size()) : nullptr;
  if (nul == nullptr) return;
  r_.Error("nul-in-name", what.str() + " contains a NUL byte (the runtime reads it as a shorter name)", at(s),
           "no NUL before the end", "NUL at " + std::to_string(static_cast<const char*>(nul) - s->c_str()));
}

// A segment index that exists; true if the segment's bytes lie in the file.
bool ProgramChecker::SegmentUsable(uint64_t idx, const Loc& what, const void* where) {
  if (idx >= segments_.size()) {
    r_.Error("index-out-of-range", what.str() + " refers to a segment that does not exist", at(where),
             "< " + std::to_string(segments_.size()), std::to_string(idx));
    return false;
  }
  return segments_[idx].in_file;
}

void ProgramChecker::CheckSegments() {
  const auto* segs = p_.segments();
  size_t nseg = segs ? segs->size() : 0;
  bool any_data = false;
  for (size_t i = 0; i < nseg; ++i)
    any_data = any_data || segs->Get(static_cast<flatbuffers::uoffset_t>(i))->size() > 0;
  if (any_data && base_ == 0) {
    // ExecuTorch omits the header when all segments are empty; that is fine.
    r_.Error("segments-without-header", "program lists segments but has no extended header giving their base offset", 8,
             "an eh00 header", header_ ? "segment_base_offset 0" : "no header");
  }
  uint64_t prev_end = 0;
  for (size_t i = 0; i < nseg; ++i) CheckSegment(i, &prev_end);
}

void ProgramChecker::CheckSegment(size_t i, uint64_t* prev_end) {
  const auto* s = p_.segments()->Get(static_cast<flatbuffers::uoffset_t>(i));
  const uint64_t fsize = w_.file_size;
  SegmentSpan span;
  span.offset = s->offset();
  span.size = s->size();
  const std::string name = Idx("segments", i);
  bool overflow = span.offset > UINT64_MAX - span.size || base_ > UINT64_MAX - span.offset - span.size;
  if (overflow) {
    r_.Error("segment-overflow", name + " offset + size overflows 64 bits", at(s), "a sum below 2^64",
             "offset " + std::to_string(span.offset) + " + size " + std::to_string(span.size));
    segments_.push_back(span);
    return;
  }
  span.file_offset = base_ + span.offset;
  uint64_t end = span.file_offset + span.size;
  if (end > fsize) {
    r_.Error("segment-out-of-range", name + " runs past the end of the file", span.file_offset,
             "end <= " + std::to_string(fsize), "end " + std::to_string(end));
  } else if (base_ != 0 || span.size == 0) {
    span.in_file = true;
  }
  if (header_ && header_->has_segment_data_size && header_->segment_data_size > 0 &&
      span.offset + span.size > header_->segment_data_size) {
    r_.Error("segment-out-of-range", name + " ends past the header's segment data size", span.file_offset,
             "end <= " + std::to_string(header_->segment_data_size), "end " + std::to_string(span.offset + span.size));
  }
  if (i > 0 && span.offset < *prev_end) {
    r_.Error("segment-overlap", name + " overlaps or precedes the previous segment", span.file_offset,
             "offset >= " + std::to_string(*prev_end), std::to_string(span.offset));
  }
  *prev_end = std::max(*prev_end, span.offset + span.size);
  if (opts_.segment_alignment > 1 && span.file_offset % opts_.segment_alignment != 0) {
    r_.Error("segment-misaligned", name + " is not aligned", span.file_offset,
             "multiple of " + std::to_string(opts_.segment_alignment),
             "alignment " + std::to_string(AlignmentOf(span.file_offset)));
  }
  segments_.push_back(span);
}

void ProgramChecker::CheckConstantSegment() {
  const auto* cseg = p_.constant_segment();
  const auto* cbuf = p_.constant_buffer();
  n_const_offsets_ = cseg && cseg->offsets() ? cseg->offsets()->size() : 0;
  n_const_buffers_ = cbuf ? cbuf->size() : 0;
  if (n_const_offsets_ > 0 && n_const_buffers_ > 0) {
    r_.Error("constants-in-both", "both constant_buffer and constant_segment hold constants", at(cseg),
             "only one of them",
             std::to_string(n_const_buffers_) + " buffers and " + std::to_string(n_const_offsets_) + " offsets");
  }
  const std::string segment_index = "constant_segment.segment_index";
  if (n_const_offsets_ == 0 || !SegmentUsable(cseg->segment_index(), segment_index, cseg)) return;
  cseg_usable_ = true;
  cseg_size_ = segments_[cseg->segment_index()].size;
  cseg_file_off_ = segments_[cseg->segment_index()].file_offset;
  uint64_t prev = 0;
  for (size_t i = 0; i < n_const_offsets_; ++i) {
    uint64_t o = cseg->offsets()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (o > cseg_size_) {
      r_.Error("constant-offset-out-of-range", Idx("constant_segment.offsets", i) + " is past the segment end",
               cseg_file_off_, "<= " + std::to_string(cseg_size_), std::to_string(o));
    } else if (o < prev) {
      r_.Error("constant-offset-order", Idx("constant_segment.offsets", i) + " goes backwards", cseg_file_off_ + o,
               ">= " + std::to_string(prev), std::to_string(o));
    }
    prev = std::max(prev, o);
  }
}

void ProgramChecker::CheckMutableDataSegments() {
  const auto* mds = p_.mutable_data_segments();
  if (!mds) return;
  for (size_t i = 0; i < mds->size(); ++i) {
    const auto* m = mds->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!SegmentUsable(m->segment_index(), Idx("mutable_data_segments", i) + ".segment_index", m) || !m->offsets()) {
      continue;
    }
    uint64_t ssize = segments_[m->segment_index()].size;
    for (size_t k = 0; k < m->offsets()->size(); ++k) {
      uint64_t o = m->offsets()->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (o > ssize) {
        r_.Error("constant-offset-out-of-range",
                 Idx(Idx("mutable_data_segments", i) + ".offsets", k) + " is past the segment end",
                 segments_[m->segment_index()].file_offset, "<= " + std::to_string(ssize), std::to_string(o));
      }
    }
  }
}

void ProgramChecker::CheckNamedData() {
  const auto* nd = p_.named_data();
  if (!nd) return;
  if (p_.segments() == nullptr) {
    // PteDataMap::create refuses named_data without a segments list.
    r_.Error("missing-field", "program has named_data but no segments list (ExecuTorch refuses to load it)", at(&p_),
             "a segments vector", "absent");
  }
  std::unordered_set<std::string> keys;
  for (size_t i = 0; i < nd->size(); ++i) {
    const auto* e = nd->Get(static_cast<flatbuffers::uoffset_t>(i));
    const Loc entry("named_data", i);
    CheckString(e->key(), Loc(entry, ".key"), true);
    if (e->key() && !keys.insert(e->key()->str()).second) {
      r_.Error("duplicate-key", "named data key \"" + e->key()->str() + "\" appears more than once", at(e),
               "unique keys", "duplicate");
    }
    SegmentUsable(e->segment_index(), Loc(entry, ".segment_index"), e);
  }
}

void ProgramChecker::CheckExecutionPlans() {
  if (n_const_offsets_ <= 1 && n_const_buffers_ > 0) {
    r_.Warn("deprecated-constant-buffer",
            "constants are in Program.constant_buffer (before ExecuTorch 0.7); runtimes built without "
            "ET_ENABLE_DEPRECATED_CONSTANT_BUFFER (upstream's CMake default) refuse this file",
            at(p_.constant_buffer()), "a constant_segment",
            std::to_string(n_const_buffers_) + " constant_buffer entries");
  }
  const auto* plans = p_.execution_plan();
  if (plans == nullptr) {
    // validate_program: "Program has null execution_plan".
    r_.Error("missing-field", "program has no execution_plan list (ExecuTorch refuses to load it)", at(&p_),
             "an execution_plan vector", "absent");
    return;
  }
  if (plans->size() == 0) {
    r_.Warn("no-methods", "program has no execution plans (methods)");
    return;
  }
  std::set<std::string> method_names;
  for (size_t pi = 0; pi < plans->size(); ++pi) CheckPlan(pi, &method_names);
}

void ProgramChecker::CheckPlan(size_t pi, std::set<std::string>* method_names) {
  const auto* plan = p_.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(pi));
  Plan pl{*plan, plan->name() ? plan->name()->str() : Idx("execution_plan", pi), ""};
  pl.prefix = pl.name + ": ";
  const Loc in_plan(pl.prefix);
  CheckString(plan->name(), Idx("execution_plan", pi) + ".name", true);
  if (plan->name() && !method_names->insert(pl.name).second) {
    r_.Error("duplicate-method", "method name \"" + pl.name + "\" is used twice", at(plan), "unique names",
             "duplicate");
  }
  CheckPlanFields(w_, *plan, pl.name);
  CheckIoTags(w_, *plan, pl.name);
  pl.nvals = plan->values() ? plan->values()->size() : 0;
  pl.nops = plan->operators() ? plan->operators()->size() : 0;
  pl.ndel = plan->delegates() ? plan->delegates()->size() : 0;
  pl.ncbs = plan->non_const_buffer_sizes();
  CheckValueList(pl, plan->inputs(), Loc(in_plan, "inputs"), plan);
  CheckValueList(pl, plan->outputs(), Loc(in_plan, "outputs"), plan);
  CheckBufferSizes(pl);
  CheckOperators(pl);
  CheckDelegates(pl);
  CheckValues(pl);
  CheckChains(pl);
}

void ProgramChecker::CheckValueIndex(const Plan& pl, int64_t v, const Loc& what, const void* where, bool allow_neg1) {
  if ((allow_neg1 && v == -1) || (v >= 0 && static_cast<uint64_t>(v) < pl.nvals)) return;
  r_.Error("index-out-of-range", what.str() + " is not a value index", at(where),
           "0.." + std::to_string(pl.nvals == 0 ? 0 : pl.nvals - 1), std::to_string(v));
}

void ProgramChecker::CheckValueList(const Plan& pl, const flatbuffers::Vector<int32_t>* l, const Loc& what,
                                    const void* where, bool allow_neg1) {
  if (!l) return;
  for (size_t k = 0; k < l->size(); ++k)
    CheckValueIndex(pl, l->Get(static_cast<flatbuffers::uoffset_t>(k)), Loc(what, "", k), where, allow_neg1);
}

void ProgramChecker::CheckBufferSizes(const Plan& pl) {
  if (!pl.ncbs) return;
  for (size_t k = 0; k < pl.ncbs->size(); ++k) {
    if (pl.ncbs->Get(static_cast<flatbuffers::uoffset_t>(k)) < 0) {
      r_.Error("negative-size", pl.name + ": " + Idx("non_const_buffer_sizes", k) + " is negative", at(pl.ncbs), ">= 0",
               std::to_string(pl.ncbs->Get(static_cast<flatbuffers::uoffset_t>(k))));
    }
  }
}

void ProgramChecker::CheckOperators(const Plan& pl) {
  if (!pl.plan.operators()) return;
  for (size_t k = 0; k < pl.nops; ++k) {
    const auto* op = pl.plan.operators()->Get(static_cast<flatbuffers::uoffset_t>(k));
    CheckString(op->name(), pl.name + ": " + Idx("operators", k) + ".name", true);
    CheckString(op->overload(), pl.name + ": " + Idx("operators", k) + ".overload", false);
  }
}

void ProgramChecker::CheckDelegates(const Plan& pl) {
  if (!pl.plan.delegates()) return;
  const size_t n_inline = p_.backend_delegate_data() ? p_.backend_delegate_data()->size() : 0;
  for (size_t k = 0; k < pl.ndel; ++k) {
    const auto* dl = pl.plan.delegates()->Get(static_cast<flatbuffers::uoffset_t>(k));
    const std::string dn = pl.name + ": " + Idx("delegates", k);
    CheckString(dl->id(), dn + ".id", true);
    const auto* pr = dl->processed();
    if (!pr) {
      r_.Error("missing-field", dn + " has no processed data reference", at(dl));
    } else if (pr->location() == efb::DataLocation::INLINE) {
      if (pr->index() >= n_inline) {
        r_.Error("index-out-of-range", dn + ".processed.index is not a backend_delegate_data index", at(pr),
                 "< " + std::to_string(n_inline), std::to_string(pr->index()));
      }
    } else if (pr->location() == efb::DataLocation::SEGMENT) {
      SegmentUsable(pr->index(), dn + ".processed.index", pr);
    } else {
      r_.Error("bad-enum", dn + ".processed.location is not INLINE or SEGMENT", at(pr), "0 or 1",
               std::to_string(static_cast<int>(pr->location())));
    }
    CheckDelegateFields(w_, p_, *dl, dn, base_);
    if (dl->compile_specs()) {
      for (size_t c = 0; c < dl->compile_specs()->size(); ++c) {
        CheckString(dl->compile_specs()->Get(static_cast<flatbuffers::uoffset_t>(c))->key(),
                    dn + Idx(".compile_specs", c) + ".key", false);
      }
    }
  }
}

void ProgramChecker::CheckValues(const Plan& pl) {
  if (!pl.plan.values()) return;
  const Loc in_plan(pl.prefix);
  for (size_t vi = 0; vi < pl.nvals; ++vi) {
    const auto* ev = pl.plan.values()->Get(static_cast<flatbuffers::uoffset_t>(vi));
    const Loc vn(in_plan, "values", vi);
    // The verifier accepts unknown union type tags, and a tag without its value.
    if (ev->val_type() > efb::KernelTypes::MAX) {
      r_.Error("bad-enum", vn.str() + " has an unknown value type", at(ev), "a known KernelTypes",
               std::to_string(static_cast<int>(ev->val_type())));
      continue;
    }
    if (!CheckValueSlot(w_, *ev, vn)) continue;
    if (ev->val() == nullptr && ev->val_type() != efb::KernelTypes::Null) {
      r_.Error("missing-field", vn.str() + " has a type tag but no value", at(ev), "a value", "none");
      continue;
    }
    if (ev->val() == nullptr) continue;
    CheckListValue(w_, pl.plan, vi, *ev, vn);
    switch (ev->val_type()) {
      case efb::KernelTypes::TensorList:
        CheckValueList(pl, ev->val_as_TensorList()->items(), Loc(vn, ".items"), ev);
        break;
      case efb::KernelTypes::OptionalTensorList:
        CheckValueList(pl, ev->val_as_OptionalTensorList()->items(), Loc(vn, ".items"), ev, true);
        break;
      case efb::KernelTypes::String:
        CheckString(ev->val_as_String()->string_val(), Loc(vn, ".string_val"), false, /*name=*/false);
        break;
      case efb::KernelTypes::Tensor:
        CheckTensor(pl, *ev, vn);
        break;
      default:
        break;
    }
  }
}

void ProgramChecker::CheckTensor(const Plan& pl, const efb::EValue& ev, const Loc& vn) {
  const auto* t = ev.val_as_Tensor();
  const Loc tn(vn, " (tensor)");
  if (!CheckTensorShape(w_, *t, tn)) return;
  const uint64_t nbytes = *TensorNbytes(*t);
  const auto* eti = t->extra_tensor_info();
  const bool external = eti && eti->location() == efb::TensorDataLocation::EXTERNAL;
  if (eti) {
    CheckString(eti->fully_qualified_name(), Loc(tn, ".extra_tensor_info.fully_qualified_name"), external);
    if (external && eti->fully_qualified_name() && eti->fully_qualified_name()->size() == 0) {
      r_.Error("missing-string", tn.str() + " is external but its key is empty", at(eti));
    }
  }
  if (t->allocation_info()) CheckPlannedTensor(pl, *t, tn, nbytes);
  if (t->data_buffer_idx() == 0 || external) return;
  if (t->allocation_info()) {
    CheckMutableState(*t, tn, nbytes);
  } else {
    CheckConstantData(*t, tn, nbytes);
  }
}

void ProgramChecker::CheckPlannedTensor(const Plan& pl, const efb::Tensor& t, const Loc& tn, uint64_t nbytes) {
  const auto* ai = t.allocation_info();
  uint64_t mid = ai->memory_id();
  size_t nb = pl.ncbs ? pl.ncbs->size() : 0;
  if (mid == 0 || mid >= nb) {  // the runtime uses memory_id - 1; id 0 is reserved
    r_.Error("index-out-of-range", tn.str() + ".allocation_info.memory_id is not a planned buffer", at(ai),
             "1.." + std::to_string(nb == 0 ? 0 : nb - 1), std::to_string(mid));
    return;
  }
  uint64_t off = (static_cast<uint64_t>(ai->memory_offset_high()) << 32) | ai->memory_offset_low();
  int64_t bsz = pl.ncbs->Get(static_cast<flatbuffers::uoffset_t>(mid));
  if (bsz >= 0 && (off > static_cast<uint64_t>(bsz) || nbytes > static_cast<uint64_t>(bsz) - off)) {
    r_.Error("planned-tensor-out-of-range", tn.str() + " does not fit in its planned buffer", at(ai),
             "offset + nbytes <= " + std::to_string(bsz), std::to_string(off) + " + " + std::to_string(nbytes));
  }
}

// A mutable tensor with an initial state: the runtime loads it from
// mutable_data_segments[0] at offsets[data_buffer_idx].
void ProgramChecker::CheckMutableState(const efb::Tensor& t, const Loc& tn, uint64_t nbytes) {
  const auto* mds = p_.mutable_data_segments();
  const uint32_t dbi = t.data_buffer_idx();
  size_t no = mds && mds->size() > 0 && mds->Get(0)->offsets() ? mds->Get(0)->offsets()->size() : 0;
  if (dbi >= no) {
    r_.Error("index-out-of-range", tn.str() + ".data_buffer_idx is out of range for the mutable data segment", at(&t),
             "< " + std::to_string(no), std::to_string(dbi));
    return;
  }
  if (mds->Get(0)->segment_index() >= segments_.size()) return;
  // load_mutable_subsegment_into: offset + nbytes within the segment.
  const SegmentSpan& ms = segments_[mds->Get(0)->segment_index()];
  uint64_t o = mds->Get(0)->offsets()->Get(dbi);
  if (o > ms.size || nbytes > ms.size - o) {
    r_.Error("tensor-out-of-range", tn.str() + " initial state runs past the end of its mutable segment",
             ms.file_offset + std::min(o, ms.size), "offset + nbytes <= " + std::to_string(ms.size),
             std::to_string(o) + " + " + std::to_string(nbytes));
  }
  if (base_ == 0) {
    r_.Error("segments-without-header",
             tn.str() + " initial state is in a segment but the file has no segment base offset", at(&t),
             "an eh00 header with segment_base_offset > 0", "0");
  }
}

void ProgramChecker::CheckConstantData(const efb::Tensor& t, const Loc& tn, uint64_t nbytes) {
  const uint32_t dbi = t.data_buffer_idx();
  const size_t n_const = n_const_offsets_ > 0 ? n_const_offsets_ : n_const_buffers_;
  if (dbi >= n_const) {
    r_.Error("index-out-of-range", tn.str() + ".data_buffer_idx is not a constant buffer index", at(&t),
             "< " + std::to_string(n_const), std::to_string(dbi));
    return;
  }
  const size_t es = ElementSize(static_cast<ScalarType>(t.scalar_type()));
  if (n_const_offsets_ > 0 && cseg_usable_) {
    uint64_t o = p_.constant_segment()->offsets()->Get(dbi);
    if (cseg_size_ == 0) {
      // The runtime maps an empty segment to no data and then looks
      // for the constant in the (absent) constant_buffer.
      r_.Error("tensor-out-of-range", tn.str() + " refers to constant data but the constant segment is empty",
               cseg_file_off_, "a non-empty constant segment", "0 bytes");
    } else if (o > cseg_size_ || nbytes > cseg_size_ - o) {
      r_.Error("tensor-out-of-range", tn.str() + " data runs past the end of the constant segment",
               cseg_file_off_ + std::min(o, cseg_size_), "offset + nbytes <= " + std::to_string(cseg_size_),
               std::to_string(o) + " + " + std::to_string(nbytes));
    }
    uint64_t fo = cseg_file_off_ + o;
    if (fo % es != 0) {
      // ExecuTorch loads such files (constant_tensor_alignment < element
      // size is allowed), but strict-alignment CPUs fault on them.
      r_.Warn("tensor-misaligned", tn.str() + " data is not aligned for its element type", fo,
              "multiple of " + std::to_string(es), "alignment " + std::to_string(AlignmentOf(fo)));
    }
    if (opts_.tensor_alignment > 1 && o % opts_.tensor_alignment != 0) {
      r_.Error("tensor-misaligned", tn.str() + " data is not at the requested tensor alignment", fo,
               "multiple of " + std::to_string(opts_.tensor_alignment), "alignment " + std::to_string(AlignmentOf(o)));
    }
  } else if (n_const_buffers_ > 0) {
    // No usable constant segment: the runtime reads constant_buffer, even
    // when constant_segment has offsets (Program::get_constant_buffer_data
    // branches on the loaded segment), and checks the index against its own
    // size; dbi was checked above against the offsets only.
    if (dbi >= n_const_buffers_) {
      r_.Error("index-out-of-range", tn.str() + ".data_buffer_idx is not a constant_buffer index", at(&t),
               "< " + std::to_string(n_const_buffers_), std::to_string(dbi));
      return;
    }
    const auto* buf = p_.constant_buffer()->Get(dbi);
    const auto* st_vec = buf->storage();
    uint64_t have = st_vec ? st_vec->size() : 0;
    if (nbytes > have) {
      r_.Error("tensor-out-of-range", tn.str() + " needs more bytes than its constant_buffer entry holds", at(buf),
               ">= " + std::to_string(nbytes), std::to_string(have));
    }
    if (st_vec && have > 0 && at(st_vec->data()) % es != 0) {
      r_.Warn("tensor-misaligned", tn.str() + " inline data is not aligned for its element type", at(st_vec->data()),
              "multiple of " + std::to_string(es), "alignment " + std::to_string(AlignmentOf(at(st_vec->data()))));
    }
  }
}

void ProgramChecker::CheckChains(const Plan& pl) {
  if (!pl.plan.chains()) return;
  const Loc in_plan(pl.prefix);
  for (size_t ci = 0; ci < pl.plan.chains()->size(); ++ci) {
    const auto* ch = pl.plan.chains()->Get(static_cast<flatbuffers::uoffset_t>(ci));
    const Loc cn(in_plan, "chains", ci);
    CheckValueList(pl, ch->inputs(), Loc(cn, ".inputs"), ch);
    CheckValueList(pl, ch->outputs(), Loc(cn, ".outputs"), ch);
    if (ch->instructions() == nullptr) {
      r_.Error("missing-field", cn.str() + " has no instructions list (ExecuTorch refuses it)", at(ch),
               "an instructions vector", "absent");
    }
    size_t ninstr = ch->instructions() ? ch->instructions()->size() : 0;
    for (size_t ii = 0; ii < ninstr; ++ii) {
      CheckInstruction(pl, *ch->instructions()->Get(static_cast<flatbuffers::uoffset_t>(ii)),
                       Loc(cn, ".instructions", ii), ninstr);
    }
    if (ch->stacktrace() && ch->stacktrace()->size() != ninstr) {
      r_.Warn("stacktrace-length", cn.str() + " has a stack trace per instruction expected", at(ch->stacktrace()),
              std::to_string(ninstr) + " entries", std::to_string(ch->stacktrace()->size()));
    }
  }
}

void ProgramChecker::CheckInstruction(const Plan& pl, const efb::Instruction& ins, const Loc& in, size_t ninstr) {
  if (ins.instr_args_type() > efb::InstructionArguments::MAX) {
    r_.Error("bad-enum", in.str() + " has an unknown instruction type", at(&ins), "a known InstructionArguments",
             std::to_string(static_cast<int>(ins.instr_args_type())));
    return;
  }
  if (ins.instr_args_type() != efb::InstructionArguments::NONE && ins.instr_args() == nullptr) {
    r_.Error("missing-field", in.str() + " has a type tag but no arguments", at(&ins), "arguments", "none");
    return;
  }
  CheckInstructionFields(w_, pl.plan, ins, in);
  switch (ins.instr_args_type()) {
    case efb::InstructionArguments::KernelCall: {
      const auto* k = ins.instr_args_as_KernelCall();
      if (k->op_index() < 0 || static_cast<size_t>(k->op_index()) >= pl.nops) {
        r_.Error("index-out-of-range", in.str() + " calls an operator that does not exist", at(k),
                 "< " + std::to_string(pl.nops), std::to_string(k->op_index()));
      }
      CheckValueList(pl, k->args(), Loc(in, ".args"), k);
      break;
    }
    case efb::InstructionArguments::DelegateCall: {
      const auto* k = ins.instr_args_as_DelegateCall();
      if (k->delegate_index() < 0 || static_cast<size_t>(k->delegate_index()) >= pl.ndel) {
        r_.Error("index-out-of-range", in.str() + " calls a delegate that does not exist", at(k),
                 "< " + std::to_string(pl.ndel), std::to_string(k->delegate_index()));
      }
      CheckValueList(pl, k->args(), Loc(in, ".args"), k);
      break;
    }
    case efb::InstructionArguments::MoveCall: {
      const auto* k = ins.instr_args_as_MoveCall();
      CheckValueIndex(pl, k->move_from(), Loc(in, ".move_from"), k);
      CheckValueIndex(pl, k->move_to(), Loc(in, ".move_to"), k);
      break;
    }
    case efb::InstructionArguments::JumpFalseCall: {
      const auto* k = ins.instr_args_as_JumpFalseCall();
      CheckValueIndex(pl, k->cond_value_index(), Loc(in, ".cond_value_index"), k);
      if (k->destination_instruction() < 0 || static_cast<size_t>(k->destination_instruction()) >= ninstr) {
        r_.Error("index-out-of-range", in.str() + " jumps outside its chain", at(k), "< " + std::to_string(ninstr),
                 std::to_string(k->destination_instruction()));
      }
      break;
    }
    case efb::InstructionArguments::FreeCall:
      CheckValueIndex(pl, ins.instr_args_as_FreeCall()->value_index(), Loc(in, ".value_index"), &ins);
      break;
    case efb::InstructionArguments::NONE:
      r_.Error("missing-field", in.str() + " has no arguments", at(&ins));
      break;
  }
}

}  // namespace

std::vector<SegmentSpan> CheckProgramTables(const Where& w, const ProgramFrame& frame, const ReadOptions& opts) {
  return ProgramChecker(w, frame, opts).Run();
}

}  // namespace ptepack
