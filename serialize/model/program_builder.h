// A C++ API to describe a program and get a Package the writer lays out.
//
//   ProgramBuilder b;
//   auto& m = b.AddMethod("forward");
//   uint32_t x = m.Tensor({kFloat, {2, 2}, PlannedLocation{1, 0}});      // planned input
//   uint32_t w = m.ConstantTensor({kFloat, {2, 2}}, weight_bytes, "linear.weight");
//   uint32_t y = m.Tensor({kFloat, {2, 2}, PlannedLocation{1, 16}});
//   uint32_t op = m.Operator("aten::mm", "out");
//   m.KernelCall(op, {x, w, y, y}, {{"model.py", 12, "forward", "x @ w"}});
//   m.Inputs({x}); m.Outputs({y}); m.PlannedBufferSizes({0, 32});
//   Package pkg = b.Build();
//   WritePackage(pkg, config, "model.pte");
//
// Mirrors what ExecuTorch's emitter produces: constant buffer 0 is the
// reserved empty placeholder, identical constants are stored once (XXH3 to
// find candidates, bytes compared to confirm), mutable buffers carry their
// names and initial state, and stack traces are recorded per instruction.
// Whether names, stack traces and external data end up in the file is the
// writer's BackendConfig's decision, as in ExecuTorch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "serialize/model/dedup.h"
#include "serialize/model/package.h"

namespace ptepack {

enum ScalarType : int {
  kByte = 0,
  kChar = 1,
  kShort = 2,
  kInt = 3,
  kLong = 4,
  kHalf = 5,
  kFloat = 6,
  kDouble = 7,
  kBool = 11,
  kBFloat16 = 15,
};

struct PlannedLocation {
  uint32_t memory_id = 1;
  uint64_t offset = 0;
};

struct TensorSpec {
  TensorSpec() = default;
  TensorSpec(int type, std::vector<int32_t> shape, std::optional<PlannedLocation> plan = std::nullopt)
      : scalar_type(type), sizes(std::move(shape)), planned(plan) {}

  int scalar_type = kFloat;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;  // empty: 0..rank-1
  std::optional<PlannedLocation> planned;
  int shape_dynamism = 0;  // 0 STATIC, 1 DYNAMIC_BOUND, 2 DYNAMIC_UNBOUND
  bool requires_grad = false;
};

struct FrameSpec {
  std::string filename;
  int32_t lineno = 0;
  std::string name;
  std::string context;
};

class ProgramBuilder {
 public:
  class Method {
   public:
    // Values. Each returns the value index.
    uint32_t Tensor(const TensorSpec& spec);
    uint32_t ConstantTensor(const TensorSpec& spec, Bytes data, const std::string& name = "");
    // A planned tensor whose state persists between calls; `initial` data
    // goes to the mutable data segment. `name` is its fully qualified name.
    uint32_t MutableBuffer(const TensorSpec& spec, const std::string& name, std::optional<Bytes> initial = {});
    uint32_t Null();
    uint32_t Int(int64_t v);
    uint32_t Bool(bool v);
    uint32_t Double(double v);
    uint32_t String(const std::string& v);
    uint32_t IntList(const std::vector<int64_t>& values);  // indices of Int values, as ExecuTorch boxes them
    uint32_t DoubleList(const std::vector<double>& v);
    uint32_t BoolList(const std::vector<bool>& v);
    uint32_t TensorList(const std::vector<int32_t>& values);
    uint32_t OptionalTensorList(const std::vector<int32_t>& values);  // -1: none

    uint32_t Operator(const std::string& name, const std::string& overload = "");
    // A delegate with its processed payload (inline until the writer moves it).
    uint32_t Delegate(const std::string& backend_id, Bytes payload,
                      const std::vector<std::pair<std::string, Bytes>>& compile_specs = {});

    // Instructions of the (single) chain.
    void KernelCall(uint32_t op, const std::vector<int32_t>& args, const std::vector<FrameSpec>& stack = {});
    void DelegateCall(uint32_t delegate, const std::vector<int32_t>& args, const std::vector<FrameSpec>& stack = {});
    void Move(int32_t from, int32_t to, const std::vector<FrameSpec>& stack = {});
    void JumpFalse(int32_t cond_value, int32_t destination, const std::vector<FrameSpec>& stack = {});
    void Free(int32_t value, const std::vector<FrameSpec>& stack = {});

    void Inputs(const std::vector<int32_t>& v) { inputs_ = v; }
    void Outputs(const std::vector<int32_t>& v) { outputs_ = v; }
    // Sizes of the memory-planned arenas; entry 0 is reserved (0).
    void PlannedBufferSizes(const std::vector<int64_t>& v) { buffer_sizes_ = v; }
    void ContainerMeta(const std::string& inputs, const std::string& outputs) { meta_ = {inputs, outputs}; }

   private:
    friend class ProgramBuilder;
    Method(ProgramBuilder* owner, std::string name) : owner_(owner), name_(std::move(name)) {}
    uint32_t AddValue(executorch_flatbuffer::KernelTypes kind, std::shared_ptr<fb::Table> val);
    void AddInstruction(executorch_flatbuffer::InstructionArguments kind, std::shared_ptr<fb::Table> args,
                        const std::vector<FrameSpec>& stack);
    std::shared_ptr<fb::Table> TensorTable(const TensorSpec& spec);

    ProgramBuilder* owner_;
    std::string name_;
    std::vector<fb::Value> values_, operators_, delegates_, instructions_, frames_;
    bool any_frames_ = false;
    std::vector<int32_t> inputs_, outputs_;
    std::vector<int64_t> buffer_sizes_{0};
    std::optional<std::pair<std::string, std::string>> meta_;
  };

  ProgramBuilder();
  Method& AddMethod(const std::string& name);
  void AddNamedData(const std::string& key, Bytes data, uint64_t alignment = 1);
  // The package to hand to LayoutPte / WritePackage.
  Package Build() const;
  // Bytes the constant dedup avoided storing twice.
  uint64_t dedup_bytes_saved() const { return constants_dedup_.bytes_saved(); }

 private:
  fb::Value BuildPlan(size_t method_index) const;
  uint32_t AddConstant(Bytes data);
  uint32_t AddMutable(Bytes data);
  uint32_t AddDelegateData(Bytes data);

  std::vector<std::unique_ptr<Method>> methods_;
  std::vector<Bytes> constants_;  // [0] placeholder
  DedupIndex constants_dedup_;
  std::vector<Bytes> mutable_;  // [0] placeholder
  std::vector<Bytes> delegate_data_;
  std::vector<NamedBlob> named_;
  std::map<std::pair<size_t, uint32_t>, std::string> constant_names_;
};

}  // namespace ptepack
