// ptepack::ProgramBuilder (ptepack/program_builder.h): builds a Package from
// methods, values and instructions, as ExecuTorch's emitter does.
#include <cstring>
#include <map>

#include "ptepack/error.h"
#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/dedup.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

using namespace prog;
using executorch_flatbuffer::DataLocation;
using executorch_flatbuffer::InstructionArguments;
using executorch_flatbuffer::KernelTypes;
using executorch_flatbuffer::TensorDataLocation;

namespace {

fb::Value Objs(std::vector<fb::Value> v) { return fb::OffsetVector(std::move(v), reflection::Obj); }

// A new table of view V's type in the builder's arena (a value or an
// instruction is several tables: one allocation each was a third of
// building and freeing a program).
template <typename V>
std::shared_ptr<fb::Table> New(fb::TableArena& arena) {
  return arena.NewTable(&V::Def(), V::kSlots);
}

// An index handed out by the builder: the schema's int32.
int32_t Checked(size_t index, const char* what) {
  if (index > static_cast<size_t>(INT32_MAX)) {
    throw Error("limit-exceeded", std::string("more than 2^31 - 1 ") + what + " in one method (indices are int32)");
  }
  return static_cast<int32_t>(index);
}

std::shared_ptr<fb::Table> TensorTable(fb::TableArena& arena, const TensorSpec& spec);

}  // namespace

struct ProgramBuilder::Method::State {
  explicit State(fb::TableArena& arena) : arena_(arena) {}
  fb::TableArena& arena_;  // the builder's
  std::vector<fb::Value> values_, operators_, delegates_, instructions_, frames_;
  bool any_frames_ = false;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<int64_t> buffer_sizes_{0};
  std::optional<std::pair<std::string, std::string>> meta_;

  int32_t AddValue(KernelTypes kind, std::shared_ptr<fb::Table> val);
  void AddInstruction(InstructionArguments kind, std::shared_ptr<fb::Table> args, const std::vector<FrameSpec>& stack);
};

struct ProgramBuilder::State {
  // The tables of values and instructions (declared first: freed last).
  fb::TableArena arena_;
  std::vector<std::unique_ptr<Method>> methods_;
  std::vector<Bytes> constants_;  // [0] placeholder
  DedupIndex constants_dedup_;
  std::vector<Bytes> mutable_;  // [0] placeholder
  std::vector<Bytes> delegate_data_;
  DedupIndex delegate_dedup_;
  std::vector<NamedBlob> named_;
  std::map<std::pair<size_t, int32_t>, std::string> constant_names_;
};

ProgramBuilder::Method::Method(ProgramBuilder* owner, std::string name)
    : owner_(owner), name_(std::move(name)), s_(std::make_unique<State>(owner->s_->arena_)) {}
ProgramBuilder::Method::~Method() = default;

void ProgramBuilder::Method::Inputs(const std::vector<int32_t>& v) { s_->inputs_ = v; }
void ProgramBuilder::Method::Outputs(const std::vector<int32_t>& v) { s_->outputs_ = v; }
void ProgramBuilder::Method::PlannedBufferSizes(const std::vector<int64_t>& v) { s_->buffer_sizes_ = v; }
void ProgramBuilder::Method::ContainerMeta(const std::string& inputs, const std::string& outputs) {
  s_->meta_ = {inputs, outputs};
}

ProgramBuilder::~ProgramBuilder() = default;

uint64_t ProgramBuilder::dedup_bytes_saved() const { return s_->constants_dedup_.bytes_saved(); }

ProgramBuilder::ProgramBuilder() : s_(std::make_unique<State>()) {
  s_->constants_.push_back(Bytes{});
  s_->mutable_.push_back(Bytes{});
}

ProgramBuilder::Method& ProgramBuilder::AddMethod(const std::string& name) {
  for (const auto& m : s_->methods_) {
    if (m->name_ == name) throw Error("bad-program", "method \"" + name + "\" added twice");
  }
  s_->methods_.push_back(std::unique_ptr<Method>(new Method(this, name)));
  return *s_->methods_.back();
}

void ProgramBuilder::AddNamedData(const std::string& key, Bytes data, uint64_t alignment) {
  for (const auto& n : s_->named_) {
    if (n.key == key) throw Error("duplicate-key", "named data key \"" + key + "\" added twice");
  }
  s_->named_.push_back(NamedBlob{key, std::move(data), alignment, nullptr, false});
}

uint32_t ProgramBuilder::AddConstant(Bytes data) {
  auto existing = s_->constants_dedup_.FindOrAdd(data, s_->constants_.size());
  if (existing) return static_cast<uint32_t>(*existing);
  s_->constants_.push_back(std::move(data));
  return static_cast<uint32_t>(s_->constants_.size() - 1);
}

uint32_t ProgramBuilder::AddMutable(Bytes data) {
  s_->mutable_.push_back(std::move(data));
  return static_cast<uint32_t>(s_->mutable_.size() - 1);
}

// ExecuTorch's emitter stores equal processed payloads once
// (backend_delegate_data_cache in exir/emit/_emitter.py, keyed by their
// sha256): delegates with the same bytes share one backend_delegate_data entry.
uint32_t ProgramBuilder::AddDelegateData(Bytes data) {
  auto existing = s_->delegate_dedup_.FindOrAdd(data, s_->delegate_data_.size());
  if (existing) return static_cast<uint32_t>(*existing);
  s_->delegate_data_.push_back(std::move(data));
  return static_cast<uint32_t>(s_->delegate_data_.size() - 1);
}

namespace {

std::shared_ptr<fb::Table> TensorTable(fb::TableArena& arena, const TensorSpec& spec) {
  if (ScalarTypeSize(static_cast<int>(spec.scalar_type)) == 0) {
    throw Error("bad-program", "unknown scalar type " + std::to_string(static_cast<int>(spec.scalar_type)));
  }
  auto t = New<prog::Tensor<>>(arena);
  prog::Tensor tensor{*t};
  tensor.set_scalar_type(static_cast<executorch_flatbuffer::ScalarType>(spec.scalar_type));
  const size_t rank = spec.sizes.size();
  if (!spec.dim_order.empty() && spec.dim_order.size() != rank) {
    throw Error("bad-program", "dim_order and sizes differ in rank");
  }
  // The sizes and the dim order (0, 1, ... when not given) side by side in
  // the arena.
  if (rank == 0) {
    tensor.sizes() = arena.CopyOf(fb::Value::Kind::kScalarVector, reflection::Int, nullptr, 0);
    tensor.dim_order() = arena.CopyOf(fb::Value::Kind::kScalarVector, reflection::UByte, nullptr, 0);
  } else {
    uint8_t* data = arena.AllocBytes(rank * sizeof(int32_t) + rank);
    std::memcpy(data, spec.sizes.data(), rank * sizeof(int32_t));
    for (size_t i = 0; i < rank; ++i) {
      data[rank * sizeof(int32_t) + i] = spec.dim_order.empty() ? static_cast<uint8_t>(i) : spec.dim_order[i];
    }
    const std::shared_ptr<const void>& owner = arena.owner();
    fb::Value& sizes = tensor.sizes();
    sizes.kind = fb::Value::Kind::kScalarVector;
    sizes.type = reflection::Int;
    sizes.set_view(data, rank * sizeof(int32_t), owner);
    fb::Value& dims = tensor.dim_order();
    dims.kind = fb::Value::Kind::kScalarVector;
    dims.type = reflection::UByte;
    dims.set_view(data + rank * sizeof(int32_t), rank, owner);
  }
  tensor.set_requires_grad(spec.requires_grad);
  tensor.set_shape_dynamism(static_cast<executorch_flatbuffer::TensorShapeDynamism>(spec.shape_dynamism));
  if (spec.planned) {
    auto a = New<AllocationDetails<>>(arena);
    AllocationDetails alloc{*a};
    alloc.set_memory_id(spec.planned->memory_id);
    alloc.set_memory_offset_low(static_cast<uint32_t>(spec.planned->offset & 0xffffffffu));
    alloc.set_memory_offset_high(static_cast<uint32_t>(spec.planned->offset >> 32));
    tensor.allocation_info() = fb::TableValue(a);
  }
  return t;
}

}  // namespace

int32_t ProgramBuilder::Method::State::AddValue(KernelTypes kind, std::shared_ptr<fb::Table> val) {
  auto ev = New<EValue<>>(arena_);
  EValue value{*ev};
  value.set_val_type(kind);
  value.val() = fb::TableValue(std::move(val));
  values_.push_back(fb::TableValue(ev));
  return Checked(values_.size() - 1, "values");
}

int32_t ProgramBuilder::Method::Tensor(const TensorSpec& spec) {
  return s_->AddValue(KernelTypes::Tensor, TensorTable(s_->arena_, spec));
}

int32_t ProgramBuilder::Method::ConstantTensor(const TensorSpec& spec, Bytes data, const std::string& name) {
  if (spec.planned) throw Error("bad-program", "a constant tensor is not memory planned");
  auto t = TensorTable(s_->arena_, spec);
  const std::optional<uint64_t> nbytes = TensorNbytes(*t);
  if (nbytes != data.size) {
    throw Error("bad-program", "constant \"" + name + "\" has " + std::to_string(data.size) +
                                   " bytes but its shape needs " +
                                   (nbytes ? std::to_string(*nbytes) : "more than the runtime can count"));
  }
  prog::Tensor{*t}.set_data_buffer_idx(owner_->AddConstant(std::move(data)));
  int32_t vi = s_->AddValue(KernelTypes::Tensor, t);
  if (!name.empty()) {
    size_t mi = 0;
    while (owner_->s_->methods_[mi].get() != this) ++mi;
    owner_->s_->constant_names_[{mi, vi}] = name;
  }
  return vi;
}

int32_t ProgramBuilder::Method::MutableBuffer(const TensorSpec& spec, const std::string& name,
                                              std::optional<Bytes> initial) {
  if (!spec.planned) throw Error("bad-program", "mutable buffer \"" + name + "\" must be memory planned");
  auto t = TensorTable(s_->arena_, spec);
  prog::Tensor tensor{*t};
  if (initial) {
    if (initial->size != TensorNbytes(*t))
      throw Error("bad-program", "mutable buffer \"" + name + "\" data size mismatch");
    tensor.set_data_buffer_idx(owner_->AddMutable(std::move(*initial)));
  }
  auto e = New<ExtraTensorInfo<>>(s_->arena_);
  ExtraTensorInfo eti{*e};
  eti.set_fully_qualified_name(name);
  eti.set_location(TensorDataLocation::SEGMENT);
  tensor.extra_tensor_info() = fb::TableValue(e);
  return s_->AddValue(KernelTypes::Tensor, t);
}

int32_t ProgramBuilder::Method::Null() { return s_->AddValue(KernelTypes::Null, New<prog::Null<>>(s_->arena_)); }

int32_t ProgramBuilder::Method::Int(int64_t v) {
  auto t = New<prog::Int<>>(s_->arena_);
  prog::Int{*t}.set_int_val(v);
  return s_->AddValue(KernelTypes::Int, t);
}

int32_t ProgramBuilder::Method::Bool(bool v) {
  auto t = New<prog::Bool<>>(s_->arena_);
  prog::Bool{*t}.set_bool_val(v);
  return s_->AddValue(KernelTypes::Bool, t);
}

int32_t ProgramBuilder::Method::Double(double v) {
  auto t = New<prog::Double<>>(s_->arena_);
  prog::Double{*t}.set_double_val(v);
  return s_->AddValue(KernelTypes::Double, t);
}

int32_t ProgramBuilder::Method::String(const std::string& v) {
  auto t = New<prog::String<>>(s_->arena_);
  prog::String{*t}.set_string_val(v);
  return s_->AddValue(KernelTypes::String, t);
}

int32_t ProgramBuilder::Method::IntList(const std::vector<int64_t>& v) {
  auto t = New<prog::IntList<>>(s_->arena_);
  prog::IntList{*t}.set_items(v);
  return s_->AddValue(KernelTypes::IntList, t);
}

int32_t ProgramBuilder::Method::DoubleList(const std::vector<double>& v) {
  auto t = New<prog::DoubleList<>>(s_->arena_);
  prog::DoubleList{*t}.set_items(v);
  return s_->AddValue(KernelTypes::DoubleList, t);
}

int32_t ProgramBuilder::Method::BoolList(const std::vector<bool>& v) {
  auto t = New<prog::BoolList<>>(s_->arena_);
  prog::BoolList{*t}.set_items(std::vector<uint8_t>(v.begin(), v.end()));
  return s_->AddValue(KernelTypes::BoolList, t);
}

int32_t ProgramBuilder::Method::TensorList(const std::vector<int32_t>& values) {
  auto t = New<prog::TensorList<>>(s_->arena_);
  prog::TensorList{*t}.set_items(values);
  return s_->AddValue(KernelTypes::TensorList, t);
}

int32_t ProgramBuilder::Method::OptionalTensorList(const std::vector<int32_t>& values) {
  auto t = New<prog::OptionalTensorList<>>(s_->arena_);
  prog::OptionalTensorList{*t}.set_items(values);
  return s_->AddValue(KernelTypes::OptionalTensorList, t);
}

int32_t ProgramBuilder::Method::Operator(const std::string& name, const std::string& overload) {
  auto t = New<prog::Operator<>>(s_->arena_);
  prog::Operator op{*t};
  op.set_name(name);
  op.set_overload(overload);
  s_->operators_.push_back(fb::TableValue(t));
  return Checked(s_->operators_.size() - 1, "operators");
}

int32_t ProgramBuilder::Method::Delegate(const std::string& backend_id, Bytes payload,
                                         const std::vector<std::pair<std::string, Bytes>>& compile_specs) {
  auto d = New<BackendDelegate<>>(s_->arena_);
  BackendDelegate delegate{*d};
  delegate.set_id(backend_id);
  auto ref = New<BackendDelegateDataReference<>>(s_->arena_);
  BackendDelegateDataReference processed{*ref};
  processed.set_location(DataLocation::INLINE);
  processed.set_index(owner_->AddDelegateData(std::move(payload)));
  delegate.processed() = fb::TableValue(ref);
  std::vector<fb::Value> specs;
  for (const auto& [k, v] : compile_specs) {
    auto cs = New<CompileSpec<>>(s_->arena_);
    CompileSpec{*cs}.set_key(k);
    CompileSpec{*cs}.set_value(v);
    specs.push_back(fb::TableValue(cs));
  }
  delegate.compile_specs() = Objs(std::move(specs));
  s_->delegates_.push_back(fb::TableValue(d));
  return Checked(s_->delegates_.size() - 1, "delegates");
}

namespace {

fb::Value FrameListOf(fb::TableArena& arena, std::vector<fb::Value> frames) {
  auto fl = New<FrameList<>>(arena);
  FrameList{*fl}.items() = Objs(std::move(frames));
  return fb::TableValue(fl);
}

}  // namespace

void ProgramBuilder::Method::State::AddInstruction(InstructionArguments kind, std::shared_ptr<fb::Table> args,
                                                   const std::vector<FrameSpec>& stack) {
  auto ins = New<Instruction<>>(arena_);
  Instruction instruction{*ins};
  instruction.set_instr_args_type(kind);
  instruction.instr_args() = fb::TableValue(std::move(args));
  instructions_.push_back(fb::TableValue(ins));
  // A chain's stacktrace is written only if some instruction has frames:
  // until then no FrameList is made (two allocations an instruction); the
  // first frames fill in the empty lists of the instructions before them.
  if (stack.empty() && !any_frames_) return;
  if (!any_frames_) {
    any_frames_ = true;
    while (frames_.size() + 1 < instructions_.size()) frames_.push_back(FrameListOf(arena_, {}));
  }
  std::vector<fb::Value> frames;
  for (const auto& f : stack) {
    auto fr = New<Frame<>>(arena_);
    Frame frame{*fr};
    frame.set_filename(f.filename);
    frame.set_lineno(f.lineno);
    frame.set_name(f.name);
    frame.set_context(f.context);
    frames.push_back(fb::TableValue(fr));
  }
  frames_.push_back(FrameListOf(arena_, std::move(frames)));
}

void ProgramBuilder::Method::KernelCall(int32_t op, const std::vector<int32_t>& args,
                                        const std::vector<FrameSpec>& stack) {
  auto k = New<prog::KernelCall<>>(s_->arena_);
  prog::KernelCall call{*k};
  call.set_op_index(op);
  call.args() =
      s_->arena_.CopyOf(fb::Value::Kind::kScalarVector, reflection::Int, args.data(), args.size() * sizeof(int32_t));
  s_->AddInstruction(InstructionArguments::KernelCall, k, stack);
}

void ProgramBuilder::Method::DelegateCall(int32_t delegate, const std::vector<int32_t>& args,
                                          const std::vector<FrameSpec>& stack) {
  auto k = New<prog::DelegateCall<>>(s_->arena_);
  prog::DelegateCall call{*k};
  call.set_delegate_index(delegate);
  call.set_args(args);
  s_->AddInstruction(InstructionArguments::DelegateCall, k, stack);
}

void ProgramBuilder::Method::Move(int32_t from, int32_t to, const std::vector<FrameSpec>& stack) {
  auto k = New<MoveCall<>>(s_->arena_);
  MoveCall call{*k};
  call.set_move_from(from);
  call.set_move_to(to);
  s_->AddInstruction(InstructionArguments::MoveCall, k, stack);
}

void ProgramBuilder::Method::JumpFalse(int32_t cond, int32_t dest, const std::vector<FrameSpec>& stack) {
  auto k = New<JumpFalseCall<>>(s_->arena_);
  JumpFalseCall call{*k};
  call.set_cond_value_index(cond);
  call.set_destination_instruction(dest);
  s_->AddInstruction(InstructionArguments::JumpFalseCall, k, stack);
}

void ProgramBuilder::Method::Free(int32_t value, const std::vector<FrameSpec>& stack) {
  auto k = New<FreeCall<>>(s_->arena_);
  FreeCall{*k}.set_value_index(value);
  s_->AddInstruction(InstructionArguments::FreeCall, k, stack);
}

Package ProgramBuilder::Build() const {
  auto build_plan = [this](size_t mi) {
    const Method& m = *s_->methods_[mi];
    auto pl = ExecutionPlan<>::New();
    ExecutionPlan plan{*pl};
    plan.set_name(m.name_);
    if (m.s_->meta_) {
      auto cm = ContainerMetadata<>::New();
      ContainerMetadata meta{*cm};
      meta.set_encoded_inp_str(m.s_->meta_->first);
      meta.set_encoded_out_str(m.s_->meta_->second);
      plan.container_meta_type() = fb::TableValue(cm);
    }
    // The package shares the builder's value tables, as it shares its
    // instructions (whoever changes a tree owns the path first: fb::Own), so
    // Build() can be called again. A named constant gets copies of its EValue
    // and Tensor to carry the name.
    std::vector<fb::Value> values = m.s_->values_;
    for (auto it = s_->constant_names_.lower_bound({mi, 0}); it != s_->constant_names_.end() && it->first.first == mi;
         ++it) {
      fb::Value& v = values[it->first.second];
      // Recorded for external placement; the writer decides whether it is kept.
      auto e = ExtraTensorInfo<>::New();
      ExtraTensorInfo{*e}.set_fully_qualified_name(it->second);
      fb::Table& evalue = fb::Own(v.mutable_table());
      prog::Tensor{fb::Own(EValue{evalue}.val().mutable_table())}.extra_tensor_info() = fb::TableValue(e);
    }
    plan.values() = Objs(std::move(values));
    plan.set_inputs(m.s_->inputs_);
    plan.set_outputs(m.s_->outputs_);
    auto ch = Chain<>::New();
    Chain chain{*ch};
    chain.set_inputs(m.s_->inputs_);
    chain.set_outputs(m.s_->outputs_);
    chain.instructions() = Objs(m.s_->instructions_);
    if (m.s_->any_frames_) chain.stacktrace() = Objs(m.s_->frames_);
    plan.chains() = Objs({fb::TableValue(ch)});
    plan.operators() = Objs(m.s_->operators_);
    plan.delegates() = Objs(m.s_->delegates_);
    plan.set_non_const_buffer_sizes(m.s_->buffer_sizes_);
    return fb::TableValue(pl);
  };
  PackageParts pkg;
  pkg.program = Program<>::New();
  Program p{*pkg.program};
  std::vector<fb::Value> plans;
  for (size_t mi = 0; mi < s_->methods_.size(); ++mi) plans.push_back(build_plan(mi));
  p.execution_plan() = Objs(std::move(plans));
  std::vector<fb::Value> bufs;
  for (const auto& c : s_->constants_) {
    auto b = Buffer<>::New();
    Buffer{*b}.set_storage(c);
    bufs.push_back(fb::TableValue(b));
  }
  p.constant_buffer() = Objs(std::move(bufs));
  std::vector<fb::Value> dd;
  for (const auto& d : s_->delegate_data_) {
    auto b = BackendDelegateInlineData<>::New();
    BackendDelegateInlineData{*b}.set_data(d);
    dd.push_back(fb::TableValue(b));
  }
  p.backend_delegate_data() = Objs(std::move(dd));
  p.segments() = Objs({});
  auto so = SubsegmentOffsets<>::New();
  SubsegmentOffsets{*so}.offsets() = fb::ScalarVector(reflection::ULong, Bytes{});
  p.constant_segment() = fb::TableValue(so);
  if (s_->mutable_.size() > 1) pkg.mutable_data = s_->mutable_;
  pkg.named_data = s_->named_;
  return PackageOf(std::move(pkg));
}

}  // namespace ptepack
