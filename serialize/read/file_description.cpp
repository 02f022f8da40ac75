// The description `inspect` renders and ptepack::Describe copies from, read
// from the checked files with flatc's accessors (the only place that does).
#include "serialize/read/file_description.h"

#include "serialize/read/program_info_read.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

std::string Str(const flatbuffers::String* s) { return s ? s->str() : ""; }

std::vector<SegmentInfo> Segments(const std::vector<SegmentSpan>& spans) {
  std::vector<SegmentInfo> out;
  for (const auto& s : spans) out.push_back(SegmentInfo{s.offset, s.file_offset, s.size});
  return out;
}

std::optional<std::string> IdentifierOf(const Bytes& file) {
  if (file.size < 8) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(file.data) + 4, 4);
}

// A non-tensor value; nullopt for tensors, lists of tensors and unknown tags.
std::optional<ScalarValueInfo> Scalar(const efb::EValue& v) {
  ScalarValueInfo s;
  s.kind = ValueKindOf(v.val_type());
  switch (s.kind) {
    case ValueKind::kNull:
      break;
    case ValueKind::kInt:
      s.int_val = v.val_as_Int()->int_val();
      break;
    case ValueKind::kBool:
      s.bool_val = v.val_as_Bool()->bool_val();
      break;
    case ValueKind::kDouble:
      s.double_val = v.val_as_Double()->double_val();
      break;
    case ValueKind::kString:
      s.string_val = Str(v.val_as_String()->string_val());
      break;
    case ValueKind::kIntList:
      s.ints = VecOf<int64_t>(v.val_as_IntList()->items());
      break;
    case ValueKind::kDoubleList:
      s.doubles = VecOf<double>(v.val_as_DoubleList()->items());
      break;
    case ValueKind::kBoolList:
      s.bools = VecOf<uint8_t>(v.val_as_BoolList()->items());
      break;
    default:
      return std::nullopt;
  }
  return s;
}

// What a metadata method (no inputs, no instructions, constant outputs)
// returns; nullopt for any other method.
std::optional<std::vector<ScalarValueInfo>> ConstantReturns(const efb::ExecutionPlan& plan) {
  if (!plan.values() || !plan.outputs() || plan.outputs()->size() == 0) return std::nullopt;
  if (plan.inputs() && plan.inputs()->size() > 0) return std::nullopt;
  if (plan.chains()) {
    for (const auto* ch : *plan.chains()) {
      if (ch->instructions() && ch->instructions()->size() > 0) return std::nullopt;
    }
  }
  std::vector<ScalarValueInfo> out;
  for (int32_t i : *plan.outputs()) {
    if (i < 0 || static_cast<size_t>(i) >= plan.values()->size()) return std::nullopt;
    const auto* v = plan.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!v->val() && v->val_type() != efb::KernelTypes::Null) return std::nullopt;
    std::optional<ScalarValueInfo> x = Scalar(*v);
    if (!x) return std::nullopt;
    out.push_back(std::move(*x));
  }
  return out;
}

// The first instruction that has a stack trace: its index and up to three
// innermost frames.
std::optional<StackTraceSampleInfo> StackTraceSample(const efb::ExecutionPlan& plan) {
  if (!plan.chains()) return std::nullopt;
  for (uint32_t c = 0; c < plan.chains()->size(); ++c) {
    const auto* st = plan.chains()->Get(c)->stacktrace();
    if (!st) continue;
    for (uint32_t i = 0; i < st->size(); ++i) {
      const auto* frames = st->Get(i)->items();
      if (!frames || frames->size() == 0) continue;
      StackTraceSampleInfo s{c, i, {}};
      for (uint32_t k = frames->size() > 3 ? frames->size() - 3 : 0; k < frames->size(); ++k) {
        const auto* f = frames->Get(k);
        s.frames.push_back({Str(f->filename()), f->lineno(), Str(f->name()), Str(f->context())});
      }
      return s;
    }
  }
  return std::nullopt;
}

DelegateDescription Delegate(const efb::BackendDelegate& dl, const DelegateInfo& info, const PteFile& pte) {
  DelegateDescription d{info, dl.processed() != nullptr, std::nullopt, std::nullopt, {}};
  if (d.has_processed) {
    const DelegatePayload p = PayloadOf(info, pte);
    d.size = p.size;
    d.file_offset = p.file_offset;
  }
  if (dl.compile_specs()) {
    for (const auto* cs : *dl.compile_specs()) d.compile_specs.push_back({Str(cs->key()), VecOf<uint8_t>(cs->value())});
  }
  return d;
}

MethodDescription Method(const efb::ExecutionPlan& plan, const PteFile& pte) {
  MethodDescription m;
  m.info = MethodInfoOf(plan, pte);
  m.has_name = plan.name() != nullptr;
  for (const ValueInfo& v : m.info.values) {
    if (v.kind == ValueKind::kUnknown) {
      m.unknown_kind_names[v.index] = efb::EnumNameKernelTypes(plan.values()->Get(v.index)->val_type());
    }
    if (!v.tensor || !v.tensor->planned || v.tensor->location == TensorLocation::kExternal ||
        v.tensor->external_initial_state) {
      continue;
    }
    const auto* eti = plan.values()->Get(v.index)->val_as_Tensor()->extra_tensor_info();
    if (eti && eti->fully_qualified_name()) m.mutable_buffer_names.push_back(eti->fully_qualified_name()->str());
  }
  if (plan.chains()) {
    m.num_chains = plan.chains()->size();
    for (const auto* ch : *plan.chains()) m.stacktraces = m.stacktraces || ch->stacktrace();
  }
  m.non_const_buffer_sizes = VecOf<int64_t>(plan.non_const_buffer_sizes());
  if (plan.delegates()) {
    for (uint32_t i = 0; i < plan.delegates()->size(); ++i) {
      m.delegates.push_back(Delegate(*plan.delegates()->Get(i), m.info.delegates[i], pte));
    }
  }
  m.returns = ConstantReturns(plan);
  m.stacktrace_sample = StackTraceSample(plan);
  return m;
}

void Program(const efb::Program& p, const PteFile& pte, FileDescription& d) {
  d.has_program = true;
  d.version = p.version();
  if (p.execution_plan()) {
    for (const auto* plan : *p.execution_plan()) d.methods.push_back(Method(*plan, pte));
  }
  if (const auto* cseg = p.constant_segment()) {
    d.constant_segment = cseg->segment_index();
    d.constant_offsets = VecOf<uint64_t>(cseg->offsets());
  }
  d.constant_buffers = p.constant_buffer() ? p.constant_buffer()->size() : 0;
  if (p.mutable_data_segments()) {
    for (const auto* m : *p.mutable_data_segments()) d.mutable_data_segments.push_back(m->segment_index());
  }
  if (p.named_data()) {
    for (const auto* nd : *p.named_data()) {
      NamedDataDescription n{Str(nd->key()), nd->key() != nullptr, nd->segment_index(), std::nullopt};
      if (n.segment < d.segments.size()) n.size = d.segments[n.segment].size;
      d.named_data.push_back(std::move(n));
    }
  }
}

}  // namespace

FileDescription DescribeFile(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  FileDescription d;
  d.file = pte.name();
  d.size = pte.file_size();
  d.valid = pte.ok();
  d.findings = pte.report().findings();
  d.file_identifier = IdentifierOf(pte.file());
  d.extended_header = pte.header();
  d.program_size = pte.program_size();
  d.header_size = pte.header_size();
  d.flatbuffer_size = pte.flatbuffer_size();
  d.segment_base_offset = pte.segment_base_offset();
  d.segments = Segments(pte.segments());
  if (pte.program()) Program(*pte.program(), pte, d);
  for (const PtdFile* ptd : ptds) d.ptds.push_back(DescribePtdFile(*ptd));
  return d;
}

PtdDescription DescribePtdHead(const PtdFile& ptd) {
  PtdDescription d;
  d.file = ptd.name();
  d.size = ptd.file_size();
  d.valid = ptd.ok();
  d.findings = ptd.report().findings();
  d.file_identifier = IdentifierOf(ptd.file()).value_or("");
  d.header = ptd.header();
  d.legacy = ptd.legacy();
  d.segments = Segments(ptd.segments());
  return d;
}

size_t PtdEntryCount(const PtdFile& ptd) { return ptd.entries().size(); }

PtdEntryDescription DescribePtdEntry(const PtdFile& ptd, size_t i) {
  const PtdEntry& e = ptd.entries()[i];
  PtdEntryDescription d;
  d.key = e.key.str();
  d.segment = e.segment_index;
  d.offset = e.offset;
  d.size = e.size;
  d.has_layout = e.has_layout;
  d.scalar_type = e.scalar_type;
  d.sizes = e.sizes.vec();
  d.dim_order = std::vector<uint8_t>(e.dim_order.begin(), e.dim_order.end());
  return d;
}

PtdDescription DescribePtdFile(const PtdFile& ptd) {
  PtdDescription d = DescribePtdHead(ptd);
  for (size_t i = 0; i < ptd.entries().size(); ++i) d.entries.push_back(DescribePtdEntry(ptd, i));
  return d;
}

ProgramInfo PublicView(const FileDescription& d) {
  ProgramInfo info;
  info.file = d.file;
  info.format = "pte";
  info.file_identifier = d.file_identifier.value_or("");
  info.size = d.size;
  info.segment_base_offset = d.segment_base_offset;
  info.segments = d.segments;
  for (const auto& m : d.methods) info.methods.push_back(m.info);
  for (const auto& n : d.named_data) {
    NamedDataInfo i;
    i.key = n.key;
    i.segment = n.segment;
    i.size = n.size.value_or(0);
    info.named_data.push_back(std::move(i));
  }
  return info;
}

ProgramInfo PublicView(const PtdDescription& d) {
  ProgramInfo info;
  info.file = d.file;
  info.format = "ptd";
  info.file_identifier = d.file_identifier;
  info.size = d.size;
  info.segment_base_offset = d.header.segment_base_offset;
  info.segments = d.segments;
  for (const auto& e : d.entries) {
    NamedDataInfo n;
    n.key = e.key;
    n.segment = e.segment;
    n.offset = e.offset;
    n.size = e.size;
    if (e.has_layout) {
      n.dtype = static_cast<ScalarType>(e.scalar_type);
      n.shape = e.sizes;
    }
    info.named_data.push_back(std::move(n));
  }
  return info;
}

const char* ShapeDynamismName(ShapeDynamism d) {
  return efb::EnumNameTensorShapeDynamism(static_cast<efb::TensorShapeDynamism>(d));
}

}  // namespace ptepack
