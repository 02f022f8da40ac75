#include "conformance/programs.h"

#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"

namespace ptepack::testing {
namespace {

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i++) out[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return out;
}

Bytes Own(const std::vector<uint8_t>& v) { return Bytes::Own(v); }

}  // namespace

std::vector<uint8_t> Floats(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> ClobberDelegatePayload(int outputs) {
  const std::string head = "ptepack-clobber-delegate outputs=" + std::to_string(outputs) + "\n";
  std::vector<uint8_t> v(head.begin(), head.end());
  for (int i = 0; i < 16; i++) v.push_back(static_cast<uint8_t>(i * 37));
  return v;
}

std::string Xxh64Hex(const std::vector<uint8_t>& bytes) {
  char buf[17];
  std::snprintf(
      buf, sizeof buf, "%016" PRIx64,
      static_cast<uint64_t>(XXH64(bytes.empty() ? "" : static_cast<const void*>(bytes.data()), bytes.size(), 0)));
  return buf;
}

BuiltProgram AffineProgram() {
  BuiltProgram p;
  ProgramBuilder b;
  const std::vector<uint8_t> w = Floats({-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
  const std::vector<uint8_t> bias = Floats({1.0f, 2.0f, 3.0f});
  const std::vector<uint8_t> state = Floats({0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f});
  {
    auto& m = b.AddMethod("forward");
    const uint32_t x = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 0}});
    const uint32_t wv = m.ConstantTensor({ScalarType::kFloat, {2, 3}}, Own(w), "affine.weight");
    const uint32_t t = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 32}});
    const uint32_t s =
        m.MutableBuffer({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 64}}, "affine.state", Own(state));
    const uint32_t bv = m.ConstantTensor({ScalarType::kFloat, {3}}, Own(bias));
    const uint32_t u = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 96}});
    const uint32_t z = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 128}});
    const uint32_t one = m.Int(1), two = m.Int(2);
    const uint32_t mul = m.Operator("aten::mul", "out"), add = m.Operator("aten::add", "out");
    const int X = int(x), T = int(t), U = int(u), Z = int(z);
    m.KernelCall(mul, {X, int(wv), T, T}, {{"affine.py", 10, "forward", "x * self.weight"}});
    m.KernelCall(add, {T, int(bv), int(one), U, U}, {{"affine.py", 11, "forward", "+ self.bias"}});
    m.KernelCall(add, {U, int(s), int(two), Z, Z}, {{"affine.py", 12, "forward", "+ 2 * self.state"}});
    m.Inputs({X});
    m.Outputs({Z});
    m.PlannedBufferSizes({0, 160});
    p.constants[{"forward", wv}] = w;
    p.constants[{"forward", bv}] = bias;
    p.initial_state[{"forward", s}] = state;
  }
  {
    auto& m = b.AddMethod("scale");
    const uint32_t x = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 0}});
    const uint32_t wv = m.ConstantTensor({ScalarType::kFloat, {2, 3}}, Own(w), "scale.weight");
    const uint32_t y = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 32}});
    const uint32_t mul = m.Operator("aten::mul", "out");
    m.KernelCall(mul, {int(x), int(wv), int(y), int(y)});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes({0, 64});
    p.constants[{"scale", wv}] = w;
  }
  p.package = b.Build();
  return p;
}

BuiltProgram DelegateProgram() {
  BuiltProgram p;
  ProgramBuilder b;
  const std::vector<uint8_t> blob_a = Pattern(300, 7), blob_b = Pattern(1000, 91);
  const std::vector<uint8_t> fast = {'f', 'a', 's', 't'}, level = {1, 2};
  const std::vector<uint8_t> c = Floats({3.0f, 1.0f, 4.0f, 1.0f, 5.0f});
  b.AddNamedData("shared.blob", Own(Pattern(64, 3)), 64);
  p.named_data_keys = {"shared.blob"};
  {
    auto& m = b.AddMethod("forward");
    const uint32_t x = m.Tensor({ScalarType::kFloat, {5}, PlannedLocation{1, 0}});
    const uint32_t cv = m.ConstantTensor({ScalarType::kFloat, {5}}, Own(c), "table");
    const uint32_t y = m.Tensor({ScalarType::kFloat, {5}, PlannedLocation{1, 32}});
    const uint32_t da = m.Delegate("StubBackendA", Own(blob_a), {{"mode", Own(fast)}, {"level", Own(level)}});
    const uint32_t db = m.Delegate("StubBackendB", Own(blob_b));
    m.DelegateCall(da, {int(x), int(cv), int(y)}, {{"d.py", 3, "forward", "lowered_a(x)"}});
    m.DelegateCall(db, {int(y), int(y)}, {{"d.py", 4, "forward", "lowered_b(y)"}});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes({0, 64});
    p.constants[{"forward", cv}] = c;
    p.delegates.push_back({"StubBackendA", blob_a, {{"mode", fast}, {"level", level}}});
    p.delegates.push_back({"StubBackendB", blob_b, {}});
  }
  {
    auto& m = b.AddMethod("again");
    const uint32_t x = m.Tensor({ScalarType::kFloat, {5}, PlannedLocation{1, 0}});
    const uint32_t da = m.Delegate("StubBackendA", Own(blob_a), {{"mode", Own(fast)}});
    m.DelegateCall(da, {int(x), int(x)});
    m.Inputs({int(x)});
    m.Outputs({int(x)});
    m.PlannedBufferSizes({0, 32});
    p.delegates.push_back({"StubBackendA", blob_a, {{"mode", fast}}});
  }
  p.package = b.Build();
  return p;
}

}  // namespace ptepack::testing
