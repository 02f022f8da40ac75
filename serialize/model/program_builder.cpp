#include "serialize/model/program_builder.h"

#include <map>

#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/dedup.h"

namespace ptepack {

using namespace prog;

namespace {

template <typename T>
fb::Value Vec(reflection::BaseType t, const std::vector<T>& v) {
  return fb::ScalarVectorOf(t, v);
}

fb::Value Str(const std::string& s) { return fb::StringValue(s); }
fb::Value U(reflection::BaseType t, uint64_t v) { return fb::UIntValue(t, v); }
fb::Value I32(int32_t v) { return fb::UIntValue(reflection::Int, static_cast<uint32_t>(v)); }

fb::Value Objs(std::vector<fb::Value> v) { return fb::OffsetVector(std::move(v), reflection::Obj); }

uint8_t KernelTypeTag(const char* kind) {
  static const char* kNames[] = {"NONE",   "Null",    "Int",        "Bool",     "Double",     "Tensor",
                                 "String", "IntList", "DoubleList", "BoolList", "TensorList", "OptionalTensorList"};
  for (uint8_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    if (std::string(kNames[i]) == kind) return i;
  }
  throw Error("internal", std::string("unknown value kind ") + kind);
}

uint8_t InstructionTag(const char* kind) {
  static const char* kNames[] = {"NONE", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall"};
  for (uint8_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    if (std::string(kNames[i]) == kind) return i;
  }
  throw Error("internal", std::string("unknown instruction kind ") + kind);
}

}  // namespace

struct ProgramBuilder::Method::State {
  std::vector<fb::Value> values_, operators_, delegates_, instructions_, frames_;
  bool any_frames_ = false;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<int64_t> buffer_sizes_{0};
  std::optional<std::pair<std::string, std::string>> meta_;
};

struct ProgramBuilder::State {
  std::vector<std::unique_ptr<Method>> methods_;
  std::vector<Bytes> constants_;  // [0] placeholder
  DedupIndex constants_dedup_;
  std::vector<Bytes> mutable_;  // [0] placeholder
  std::vector<Bytes> delegate_data_;
  std::vector<NamedBlob> named_;
  std::map<std::pair<size_t, uint32_t>, std::string> constant_names_;
};

ProgramBuilder::Method::Method(ProgramBuilder* owner, std::string name)
    : owner_(owner), name_(std::move(name)), s_(std::make_unique<State>()) {}
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

uint32_t ProgramBuilder::AddDelegateData(Bytes data) {
  s_->delegate_data_.push_back(std::move(data));
  return static_cast<uint32_t>(s_->delegate_data_.size() - 1);
}

std::shared_ptr<fb::Table> ProgramBuilder::Method::TensorTable(const TensorSpec& spec) {
  if (ScalarTypeSize(static_cast<int>(spec.scalar_type)) == 0) {
    throw Error("bad-program", "unknown scalar type " + std::to_string(static_cast<int>(spec.scalar_type)));
  }
  auto t = New("Tensor");
  F(*t, "scalar_type") = U(reflection::Byte, static_cast<uint8_t>(spec.scalar_type));
  F(*t, "sizes") = Vec(reflection::Int, spec.sizes);
  std::vector<uint8_t> dims = spec.dim_order;
  if (dims.empty()) {
    for (size_t i = 0; i < spec.sizes.size(); ++i) dims.push_back(static_cast<uint8_t>(i));
  }
  if (dims.size() != spec.sizes.size()) throw Error("bad-program", "dim_order and sizes differ in rank");
  F(*t, "dim_order") = Vec(reflection::UByte, dims);
  F(*t, "requires_grad") = U(reflection::Bool, spec.requires_grad);
  F(*t, "shape_dynamism") = U(reflection::Byte, static_cast<uint8_t>(spec.shape_dynamism));
  if (spec.planned) {
    auto a = New("AllocationDetails");
    F(*a, "memory_id") = U(reflection::UInt, spec.planned->memory_id);
    F(*a, "memory_offset_low") = U(reflection::UInt, spec.planned->offset & 0xffffffffu);
    F(*a, "memory_offset_high") = U(reflection::UInt, spec.planned->offset >> 32);
    F(*t, "allocation_info") = fb::TableValue(a);
  }
  return t;
}

uint32_t ProgramBuilder::Method::AddValue(const char* kind, std::shared_ptr<fb::Table> val) {
  auto ev = New("EValue");
  F(*ev, "val_type") = U(reflection::UType, KernelTypeTag(kind));
  F(*ev, "val") = fb::TableValue(std::move(val));
  s_->values_.push_back(fb::TableValue(ev));
  return static_cast<uint32_t>(s_->values_.size() - 1);
}

uint32_t ProgramBuilder::Method::Tensor(const TensorSpec& spec) { return AddValue("Tensor", TensorTable(spec)); }

uint32_t ProgramBuilder::Method::ConstantTensor(const TensorSpec& spec, Bytes data, const std::string& name) {
  if (spec.planned) throw Error("bad-program", "a constant tensor is not memory planned");
  auto t = TensorTable(spec);
  uint64_t nbytes = TensorNbytes(*t);
  if (nbytes != data.size) {
    throw Error("bad-program", "constant \"" + name + "\" has " + std::to_string(data.size) +
                                   " bytes but its shape needs " + std::to_string(nbytes));
  }
  F(*t, "data_buffer_idx") = U(reflection::UInt, owner_->AddConstant(std::move(data)));
  uint32_t vi = AddValue("Tensor", t);
  if (!name.empty()) {
    size_t mi = 0;
    while (owner_->s_->methods_[mi].get() != this) ++mi;
    owner_->s_->constant_names_[{mi, vi}] = name;
  }
  return vi;
}

uint32_t ProgramBuilder::Method::MutableBuffer(const TensorSpec& spec, const std::string& name,
                                               std::optional<Bytes> initial) {
  if (!spec.planned) throw Error("bad-program", "mutable buffer \"" + name + "\" must be memory planned");
  auto t = TensorTable(spec);
  if (initial) {
    if (initial->size != TensorNbytes(*t))
      throw Error("bad-program", "mutable buffer \"" + name + "\" data size mismatch");
    F(*t, "data_buffer_idx") = U(reflection::UInt, owner_->AddMutable(std::move(*initial)));
  }
  auto eti = New("ExtraTensorInfo");
  F(*eti, "fully_qualified_name") = Str(name);
  F(*eti, "location") = U(reflection::Byte, 0);
  F(*t, "extra_tensor_info") = fb::TableValue(eti);
  return AddValue("Tensor", t);
}

uint32_t ProgramBuilder::Method::Null() { return AddValue("Null", New("Null")); }

uint32_t ProgramBuilder::Method::Int(int64_t v) {
  auto t = New("Int");
  F(*t, "int_val") = U(reflection::Long, static_cast<uint64_t>(v));
  return AddValue("Int", t);
}

uint32_t ProgramBuilder::Method::Bool(bool v) {
  auto t = New("Bool");
  F(*t, "bool_val") = U(reflection::Bool, v);
  return AddValue("Bool", t);
}

uint32_t ProgramBuilder::Method::Double(double v) {
  auto t = New("Double");
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  F(*t, "double_val") = fb::ScalarValue(reflection::Double, bits);
  return AddValue("Double", t);
}

uint32_t ProgramBuilder::Method::String(const std::string& v) {
  auto t = New("String");
  F(*t, "string_val") = Str(v);
  return AddValue("String", t);
}

uint32_t ProgramBuilder::Method::IntList(const std::vector<int64_t>& v) {
  auto t = New("IntList");
  F(*t, "items") = Vec(reflection::Long, v);
  return AddValue("IntList", t);
}

uint32_t ProgramBuilder::Method::DoubleList(const std::vector<double>& v) {
  auto t = New("DoubleList");
  F(*t, "items") = Vec(reflection::Double, v);
  return AddValue("DoubleList", t);
}

uint32_t ProgramBuilder::Method::BoolList(const std::vector<bool>& v) {
  auto t = New("BoolList");
  std::vector<uint8_t> b(v.begin(), v.end());
  F(*t, "items") = Vec(reflection::Bool, b);
  return AddValue("BoolList", t);
}

uint32_t ProgramBuilder::Method::TensorList(const std::vector<int32_t>& values) {
  auto t = New("TensorList");
  F(*t, "items") = Vec(reflection::Int, values);
  return AddValue("TensorList", t);
}

uint32_t ProgramBuilder::Method::OptionalTensorList(const std::vector<int32_t>& values) {
  auto t = New("OptionalTensorList");
  F(*t, "items") = Vec(reflection::Int, values);
  return AddValue("OptionalTensorList", t);
}

uint32_t ProgramBuilder::Method::Operator(const std::string& name, const std::string& overload) {
  auto t = New("Operator");
  F(*t, "name") = Str(name);
  F(*t, "overload") = Str(overload);
  s_->operators_.push_back(fb::TableValue(t));
  return static_cast<uint32_t>(s_->operators_.size() - 1);
}

uint32_t ProgramBuilder::Method::Delegate(const std::string& backend_id, Bytes payload,
                                          const std::vector<std::pair<std::string, Bytes>>& compile_specs) {
  auto d = New("BackendDelegate");
  F(*d, "id") = Str(backend_id);
  auto ref = New("BackendDelegateDataReference");
  F(*ref, "location") = U(reflection::Byte, 0);
  F(*ref, "index") = U(reflection::UInt, owner_->AddDelegateData(std::move(payload)));
  F(*d, "processed") = fb::TableValue(ref);
  std::vector<fb::Value> specs;
  for (const auto& [k, v] : compile_specs) {
    auto cs = New("CompileSpec");
    F(*cs, "key") = Str(k);
    F(*cs, "value") = fb::ScalarVector(reflection::UByte, v);
    specs.push_back(fb::TableValue(cs));
  }
  F(*d, "compile_specs") = Objs(std::move(specs));
  s_->delegates_.push_back(fb::TableValue(d));
  return static_cast<uint32_t>(s_->delegates_.size() - 1);
}

void ProgramBuilder::Method::AddInstruction(const char* kind, std::shared_ptr<fb::Table> args,
                                            const std::vector<FrameSpec>& stack) {
  auto ins = New("Instruction");
  F(*ins, "instr_args_type") = U(reflection::UType, InstructionTag(kind));
  F(*ins, "instr_args") = fb::TableValue(std::move(args));
  s_->instructions_.push_back(fb::TableValue(ins));
  std::vector<fb::Value> frames;
  for (const auto& f : stack) {
    auto fr = New("Frame");
    F(*fr, "filename") = Str(f.filename);
    F(*fr, "lineno") = I32(f.lineno);
    F(*fr, "name") = Str(f.name);
    F(*fr, "context") = Str(f.context);
    frames.push_back(fb::TableValue(fr));
  }
  s_->any_frames_ = s_->any_frames_ || !stack.empty();
  auto fl = New("FrameList");
  F(*fl, "items") = Objs(std::move(frames));
  s_->frames_.push_back(fb::TableValue(fl));
}

void ProgramBuilder::Method::KernelCall(uint32_t op, const std::vector<int32_t>& args,
                                        const std::vector<FrameSpec>& stack) {
  auto k = New("KernelCall");
  F(*k, "op_index") = I32(static_cast<int32_t>(op));
  F(*k, "args") = Vec(reflection::Int, args);
  AddInstruction("KernelCall", k, stack);
}

void ProgramBuilder::Method::DelegateCall(uint32_t delegate, const std::vector<int32_t>& args,
                                          const std::vector<FrameSpec>& stack) {
  auto k = New("DelegateCall");
  F(*k, "delegate_index") = I32(static_cast<int32_t>(delegate));
  F(*k, "args") = Vec(reflection::Int, args);
  AddInstruction("DelegateCall", k, stack);
}

void ProgramBuilder::Method::Move(int32_t from, int32_t to, const std::vector<FrameSpec>& stack) {
  auto k = New("MoveCall");
  F(*k, "move_from") = I32(from);
  F(*k, "move_to") = I32(to);
  AddInstruction("MoveCall", k, stack);
}

void ProgramBuilder::Method::JumpFalse(int32_t cond, int32_t dest, const std::vector<FrameSpec>& stack) {
  auto k = New("JumpFalseCall");
  F(*k, "cond_value_index") = I32(cond);
  F(*k, "destination_instruction") = I32(dest);
  AddInstruction("JumpFalseCall", k, stack);
}

void ProgramBuilder::Method::Free(int32_t value, const std::vector<FrameSpec>& stack) {
  auto k = New("FreeCall");
  F(*k, "value_index") = I32(value);
  AddInstruction("FreeCall", k, stack);
}

Package ProgramBuilder::Build() const {
  Package pkg;
  pkg.program = New("Program");
  fb::Table& p = *pkg.program;
  std::vector<fb::Value> plans;
  for (size_t mi = 0; mi < s_->methods_.size(); ++mi) {
    const Method& m = *s_->methods_[mi];
    auto plan = New("ExecutionPlan");
    F(*plan, "name") = Str(m.name_);
    if (m.s_->meta_) {
      auto cm = New("ContainerMetadata");
      F(*cm, "encoded_inp_str") = Str(m.s_->meta_->first);
      F(*cm, "encoded_out_str") = Str(m.s_->meta_->second);
      F(*plan, "container_meta_type") = fb::TableValue(cm);
    }
    // Values are cloned so that Build() can be called more than once.
    std::vector<fb::Value> values;
    for (size_t vi = 0; vi < m.s_->values_.size(); ++vi) {
      fb::Value v = fb::TableValue(fb::Clone(*m.s_->values_[vi].table));
      auto it = s_->constant_names_.find({mi, static_cast<uint32_t>(vi)});
      if (it != s_->constant_names_.end()) {
        // Recorded for external placement; the writer decides whether it is kept.
        auto& tensor = *F(*v.table, "val").table;
        auto eti = New("ExtraTensorInfo");
        F(*eti, "fully_qualified_name") = Str(it->second);
        F(tensor, "extra_tensor_info") = fb::TableValue(eti);
      }
      values.push_back(std::move(v));
    }
    F(*plan, "values") = Objs(std::move(values));
    F(*plan, "inputs") = Vec(reflection::Int, m.s_->inputs_);
    F(*plan, "outputs") = Vec(reflection::Int, m.s_->outputs_);
    auto chain = New("Chain");
    F(*chain, "inputs") = Vec(reflection::Int, m.s_->inputs_);
    F(*chain, "outputs") = Vec(reflection::Int, m.s_->outputs_);
    F(*chain, "instructions") = Objs(m.s_->instructions_);
    if (m.s_->any_frames_) F(*chain, "stacktrace") = Objs(m.s_->frames_);
    F(*plan, "chains") = Objs({fb::TableValue(chain)});
    F(*plan, "operators") = Objs(m.s_->operators_);
    F(*plan, "delegates") = Objs(m.s_->delegates_);
    F(*plan, "non_const_buffer_sizes") = Vec(reflection::Long, m.s_->buffer_sizes_);
    plans.push_back(fb::TableValue(plan));
  }
  F(p, "execution_plan") = Objs(std::move(plans));
  std::vector<fb::Value> bufs;
  for (const auto& c : s_->constants_) {
    auto b = New("Buffer");
    F(*b, "storage") = fb::ScalarVector(reflection::UByte, c);
    bufs.push_back(fb::TableValue(b));
  }
  F(p, "constant_buffer") = Objs(std::move(bufs));
  std::vector<fb::Value> dd;
  for (const auto& d : s_->delegate_data_) {
    auto b = New("BackendDelegateInlineData");
    F(*b, "data") = fb::ScalarVector(reflection::UByte, d);
    dd.push_back(fb::TableValue(b));
  }
  F(p, "backend_delegate_data") = Objs(std::move(dd));
  F(p, "segments") = Objs({});
  auto so = New("SubsegmentOffsets");
  F(*so, "offsets") = fb::ScalarVector(reflection::ULong, Bytes{});
  F(p, "constant_segment") = fb::TableValue(so);
  if (s_->mutable_.size() > 1) pkg.mutable_data = s_->mutable_;
  pkg.named_data = s_->named_;
  return pkg;
}

}  // namespace ptepack
