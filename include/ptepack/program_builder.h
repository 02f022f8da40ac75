// A C++ API to describe a program and get a Package the writer lays out.
//
//   ProgramBuilder b;
//   auto& m = b.AddMethod("forward");
//   auto x = m.Tensor({ScalarType::kFloat, {2, 2}, PlannedLocation{1, 0}});  // planned input
//   auto w = m.ConstantTensor({ScalarType::kFloat, {2, 2}}, Bytes::Own(weights), "linear.weight");
//   auto y = m.Tensor({ScalarType::kFloat, {2, 2}, PlannedLocation{1, 16}});
//   auto op = m.Operator("aten::mm", "out");
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
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptepack/bytes.h"
#include "ptepack/export.h"
#include "ptepack/package.h"
#include "ptepack/scalar_type.h"

namespace ptepack {

// How a tensor's shape may change between calls (TensorShapeDynamism).
enum class ShapeDynamism : uint8_t { kStatic = 0, kDynamicBound = 1, kDynamicUnbound = 2 };

struct PlannedLocation {
  uint32_t memory_id = 1;
  uint64_t offset = 0;
};

struct TensorSpec {
  TensorSpec() = default;
  TensorSpec(ScalarType type, std::vector<int32_t> shape, std::optional<PlannedLocation> plan = std::nullopt)
      : scalar_type(type), sizes(std::move(shape)), planned(plan) {}

  ScalarType scalar_type = ScalarType::kFloat;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;  // empty: 0..rank-1
  std::optional<PlannedLocation> planned;
  ShapeDynamism shape_dynamism = ShapeDynamism::kStatic;
  bool requires_grad = false;
};

struct FrameSpec {
  std::string filename;
  int32_t lineno = 0;
  std::string name;
  std::string context;
};

class PTEPACK_API ProgramBuilder {
 public:
  class PTEPACK_API Method {
   public:
    // Every index the builder returns or takes -- values, operators,
    // delegates, instruction arguments -- is an int32_t, the schema's type
    // for them (OptionalTensorList uses -1 for "none"), so `auto x =
    // m.Tensor(...)` goes into `m.Inputs({x})` without a conversion. A method
    // of more than INT32_MAX values throws Error("limit-exceeded").
    // Values. Each returns the value index.
    int32_t Tensor(const TensorSpec& spec);
    int32_t ConstantTensor(const TensorSpec& spec, Bytes data, const std::string& name = "");
    // A planned tensor whose state persists between calls; `initial` data
    // goes to the mutable data segment. `name` is its fully qualified name.
    int32_t MutableBuffer(const TensorSpec& spec, const std::string& name, std::optional<Bytes> initial = {});
    int32_t Null();
    int32_t Int(int64_t v);
    int32_t Bool(bool v);
    int32_t Double(double v);
    int32_t String(const std::string& v);
    int32_t IntList(const std::vector<int64_t>& values);  // indices of Int values, as ExecuTorch boxes them
    int32_t DoubleList(const std::vector<double>& v);
    int32_t BoolList(const std::vector<bool>& v);
    int32_t TensorList(const std::vector<int32_t>& values);
    int32_t OptionalTensorList(const std::vector<int32_t>& values);  // -1: none

    int32_t Operator(const std::string& name, const std::string& overload = "");
    // A delegate with its processed payload (inline until the writer moves it).
    int32_t Delegate(const std::string& backend_id, Bytes payload,
                     const std::vector<std::pair<std::string, Bytes>>& compile_specs = {});

    // Instructions of the (single) chain.
    void KernelCall(int32_t op, const std::vector<int32_t>& args, const std::vector<FrameSpec>& stack = {});
    void DelegateCall(int32_t delegate, const std::vector<int32_t>& args, const std::vector<FrameSpec>& stack = {});
    void Move(int32_t from, int32_t to, const std::vector<FrameSpec>& stack = {});
    void JumpFalse(int32_t cond_value, int32_t destination, const std::vector<FrameSpec>& stack = {});
    void Free(int32_t value, const std::vector<FrameSpec>& stack = {});

    void Inputs(const std::vector<int32_t>& v);
    void Outputs(const std::vector<int32_t>& v);
    // Sizes of the memory-planned arenas; entry 0 is reserved (0).
    void PlannedBufferSizes(const std::vector<int64_t>& v);
    void ContainerMeta(const std::string& inputs, const std::string& outputs);

    ~Method();
    Method(const Method&) = delete;
    Method& operator=(const Method&) = delete;

   private:
    friend class ProgramBuilder;
    struct State;
    Method(ProgramBuilder* owner, std::string name);

    ProgramBuilder* owner_;
    std::string name_;
    std::unique_ptr<State> s_;
  };

  ProgramBuilder();
  ~ProgramBuilder();
  ProgramBuilder(const ProgramBuilder&) = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  Method& AddMethod(const std::string& name);
  void AddNamedData(const std::string& key, Bytes data, uint64_t alignment = 1);
  // The package to hand to WritePackage. Can be called again after more is
  // added.
  Package Build() const;
  // Bytes the constant dedup avoided storing twice.
  uint64_t dedup_bytes_saved() const;

 private:
  struct State;
  uint32_t AddConstant(Bytes data);
  uint32_t AddMutable(Bytes data);
  uint32_t AddDelegateData(Bytes data);

  std::unique_ptr<State> s_;
};

}  // namespace ptepack
