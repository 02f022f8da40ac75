// The typed description's pieces read from a verified program (moved here
// from serialize/api/describe_api.cpp so that `inspect` renders from them too).
#include "serialize/read/program_info_read.h"

#include "serialize/read/file_description.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

// The runtime's rule (tensor_parser_exec_aten.cpp, getTensorDataPtr): an
// external tensor without a plan is read from the .ptd; a planned one is a
// slot (its initial state loaded from the .ptd or the mutable segment); a
// constant has a data buffer and no plan; anything else is supplied at run time.
TensorInfo Tensor(const efb::Tensor& t) {
  TensorInfo info;
  info.dtype = static_cast<ScalarType>(t.scalar_type());
  info.shape = VecOf<int32_t>(t.sizes());
  info.dim_order = VecOf<uint8_t>(t.dim_order());
  info.nbytes = TensorNbytes(t);
  info.shape_dynamism = static_cast<ShapeDynamism>(t.shape_dynamism());
  info.data_buffer = t.data_buffer_idx();
  const auto* eti = t.extra_tensor_info();
  if (eti && eti->fully_qualified_name()) info.key = eti->fully_qualified_name()->str();
  const bool external = eti && eti->location() == efb::TensorDataLocation::EXTERNAL;
  if (const auto* a = t.allocation_info()) {
    info.location = TensorLocation::kPlanned;
    info.planned =
        PlannedLocation{a->memory_id(), uint64_t{a->memory_offset_low()} | (uint64_t{a->memory_offset_high()} << 32)};
    info.external_initial_state = external;
  } else if (external) {
    info.location = TensorLocation::kExternal;
  } else if (t.data_buffer_idx() > 0) {
    info.location = TensorLocation::kConstant;
  }
  return info;
}

ValueInfo Value(const efb::EValue& v, uint32_t index) {
  ValueInfo info;
  info.index = index;
  info.kind = ValueKindOf(v.val_type());
  if (info.kind == ValueKind::kTensor) {
    if (const auto* t = v.val_as_Tensor()) info.tensor = Tensor(*t);
  }
  return info;
}

DelegateInfo Delegate(const efb::BackendDelegate& d, const PteFile& pte) {
  DelegateInfo info;
  info.backend_id = d.id() ? d.id()->str() : "";
  info.compile_specs = d.compile_specs() ? d.compile_specs()->size() : 0;
  const auto* pr = d.processed();
  if (!pr) return info;
  info.in_segment = pr->location() == efb::DataLocation::SEGMENT;
  info.index = pr->index();
  info.size = PayloadOf(info, pte).size.value_or(0);
  return info;
}

// Buffers 1.. of non_const_buffer_sizes with the tensors planned in each.
std::vector<PlannedBufferInfo> MemoryPlan(const efb::ExecutionPlan& plan, const std::vector<ValueInfo>& values) {
  std::vector<PlannedBufferInfo> buffers;
  const auto* sizes = plan.non_const_buffer_sizes();
  for (uint32_t id = 1; sizes && id < sizes->size(); ++id) {
    buffers.push_back(PlannedBufferInfo{id, static_cast<uint64_t>(sizes->Get(id)), {}});
  }
  for (const auto& v : values) {
    if (!v.tensor || !v.tensor->planned) continue;
    const uint32_t id = v.tensor->planned->memory_id;
    if (id >= 1 && id - 1 < buffers.size()) buffers[id - 1].tensors.push_back(v.index);
  }
  return buffers;
}

}  // namespace

DelegatePayload PayloadOf(const DelegateInfo& info, const PteFile& pte) {
  DelegatePayload p;
  const auto* bdd = pte.program()->backend_delegate_data();
  if (info.in_segment && info.index < pte.segments().size()) {
    p.size = pte.segments()[info.index].size;
    p.file_offset = pte.segments()[info.index].file_offset;
  } else if (!info.in_segment && bdd && info.index < bdd->size()) {
    const auto* data = bdd->Get(info.index)->data();
    p.size = data ? data->size() : 0;
    if (data) p.file_offset = static_cast<uint64_t>(data->data() - pte.file().data);
  }
  return p;
}

ValueKind ValueKindOf(efb::KernelTypes t) {
  switch (t) {
    case efb::KernelTypes::Null:
      return ValueKind::kNull;
    case efb::KernelTypes::Int:
      return ValueKind::kInt;
    case efb::KernelTypes::Bool:
      return ValueKind::kBool;
    case efb::KernelTypes::Double:
      return ValueKind::kDouble;
    case efb::KernelTypes::String:
      return ValueKind::kString;
    case efb::KernelTypes::IntList:
      return ValueKind::kIntList;
    case efb::KernelTypes::DoubleList:
      return ValueKind::kDoubleList;
    case efb::KernelTypes::BoolList:
      return ValueKind::kBoolList;
    case efb::KernelTypes::TensorList:
      return ValueKind::kTensorList;
    case efb::KernelTypes::OptionalTensorList:
      return ValueKind::kOptionalTensorList;
    case efb::KernelTypes::Tensor:
      return ValueKind::kTensor;
    default:
      return ValueKind::kUnknown;
  }
}

MethodInfo MethodInfoOf(const efb::ExecutionPlan& plan, const PteFile& pte) {
  MethodInfo m;
  m.name = plan.name() ? plan.name()->str() : "";
  if (plan.values()) {
    for (uint32_t i = 0; i < plan.values()->size(); ++i) m.values.push_back(Value(*plan.values()->Get(i), i));
  }
  m.inputs = VecOf<int32_t>(plan.inputs());
  m.outputs = VecOf<int32_t>(plan.outputs());
  if (plan.operators()) {
    for (const auto* op : *plan.operators()) m.operators.push_back(OperatorName(*op));
  }
  if (plan.delegates()) {
    for (const auto* d : *plan.delegates()) m.delegates.push_back(Delegate(*d, pte));
  }
  if (plan.chains()) {
    for (const auto* ch : *plan.chains()) m.num_instructions += ch->instructions() ? ch->instructions()->size() : 0;
  }
  m.memory_plan = MemoryPlan(plan, m.values);
  return m;
}

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNull:
      return "Null";
    case ValueKind::kInt:
      return "Int";
    case ValueKind::kBool:
      return "Bool";
    case ValueKind::kDouble:
      return "Double";
    case ValueKind::kTensor:
      return "Tensor";
    case ValueKind::kString:
      return "String";
    case ValueKind::kIntList:
      return "IntList";
    case ValueKind::kDoubleList:
      return "DoubleList";
    case ValueKind::kBoolList:
      return "BoolList";
    case ValueKind::kTensorList:
      return "TensorList";
    case ValueKind::kOptionalTensorList:
      return "OptionalTensorList";
    case ValueKind::kUnknown:
      break;
  }
  return "";
}

}  // namespace ptepack
