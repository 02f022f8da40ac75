// Emits a small ExecuTorch program with ptepack's C++ API and reads it back.
//
//   emit_model OUT_DIR      writes OUT_DIR/model.pte and OUT_DIR/weights.ptd
//
// The program: y = add(x, bias) by a kernel, then a delegate call; a large
// weight goes to an external .ptd, a named mutable buffer keeps state, and
// every instruction carries a stack trace.
#include <ptepack/ptepack.h>

#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

ptepack::Bytes Floats(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return ptepack::Bytes::Own(std::move(bytes));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: emit_model OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  using ptepack::PlannedLocation;
  using ptepack::ScalarType;
  try {
    ptepack::ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const auto x = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}});
    const auto bias = m.ConstantTensor({ScalarType::kFloat, {4}}, Floats({1, 2, 3, 4}), "linear.bias");
    const auto weight =
        m.ConstantTensor({ScalarType::kFloat, {64, 64}}, Floats(std::vector<float>(64 * 64, 0.5f)), "linear.weight");
    const auto state =
        m.MutableBuffer({ScalarType::kFloat, {4}, PlannedLocation{1, 32}}, "cache.state", Floats({0, 0, 0, 0}));
    const auto y = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 16}});
    const auto alpha = m.Int(1);
    const auto add = m.Operator("aten::add", "out");
    m.KernelCall(add, {x, bias, alpha, y, y}, {{"model.py", 7, "forward", "y = x + self.bias"}});
    const std::vector<uint8_t> blob = {'d', 'e', 'm', 'o'};
    const auto lowered = m.Delegate("DemoBackend", ptepack::Bytes::Copy(blob.data(), blob.size()));
    m.DelegateCall(lowered, {y, weight, state, y}, {{"model.py", 8, "forward", "y = self.lowered(y)"}});
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes({0, 48});

    ptepack::BackendConfig config;  // ExecuTorch's defaults, then:
    config.emit_mutable_buffer_names = true;
    config.emit_stacktrace = true;
    // Tensors over 1 KiB go to weights.ptd, the rest stay in the program.
    config.external_constants_fn = [](const ptepack::ConstantTensorInfo& t) -> std::optional<std::string> {
      if (t.nbytes > 1024) return std::string("weights");
      return std::nullopt;
    };
    const ptepack::WriteResult written = ptepack::WritePackage(b.Build(), config, dir + "/model.pte");
    std::cout << "wrote " << written.pte.path << " (" << written.pte.size << " bytes, " << written.num_segments
              << " segments)\n";
    for (const auto& ptd : written.ptds) std::cout << "wrote " << ptd.path << " (" << ptd.size << " bytes)\n";

    // Read it back: the checks ExecuTorch's runtime makes, with the .ptd.
    ptepack::VerifyOptions options;
    options.ptd = {dir + "/weights.ptd"};
    const ptepack::VerifyResult r = ptepack::Verify(dir + "/model.pte", options);
    for (const auto& f : r.findings) std::cout << f.ToString() << "\n";
    std::cout << "verify: " << (r.valid ? "OK" : "INVALID") << "\n";
    const std::string description = ptepack::InspectJson(dir + "/model.pte", options);
    std::cout << "inspect: " << description.size() << " bytes of JSON, ptepack " << ptepack::Version() << "\n";
    return r.valid ? 0 : 1;
  } catch (const ptepack::Error& e) {
    std::cerr << "error: " << e.finding().ToString() << "\n";
    return 1;
  }
}
