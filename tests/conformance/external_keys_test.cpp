// Regression (writer): tensors that share one stored constant but differ in shape got a single
// external key, whose .ptd TensorLayout fits only one of them. ExecuTorch's runtime checks each
// external tensor against its key's layout, so a method whose first use was the other shape
// failed to load (InvalidExternalData); two such tensors sent to different .ptd files made the
// same key appear twice, which MergedDataMap refuses. Found by the conformance grid on
// keyword_spotting.pte (external_constants=true).
#include <gtest/gtest.h>

#include <cstring>

#include "conformance/oracle_runner.h"
#include "conformance/programs.h"
#include "ptepack/error.h"
#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

// Methods "a" and "b" each hold one constant with the same six floats, as [2,3] and as [3,2]
// (stored once in the program); names given as `name_a` / `name_b` ("" = unnamed).
Package SharedBytesProgram(const std::string& name_a, const std::string& name_b) {
  const std::vector<uint8_t> w = Floats({1, 2, 3, 4, 5, 6});
  ProgramBuilder b;
  const std::pair<const char*, std::vector<int32_t>> methods[] = {{"a", {2, 3}}, {"b", {3, 2}}};
  for (const auto& [name, shape] : methods) {
    auto& m = b.AddMethod(name);
    const uint32_t x = m.Tensor({ScalarType::kFloat, shape, PlannedLocation{1, 0}});
    const uint32_t c = m.ConstantTensor({ScalarType::kFloat, shape}, Bytes::Own(w), name[0] == 'a' ? name_a : name_b);
    const uint32_t y = m.Tensor({ScalarType::kFloat, shape, PlannedLocation{1, 32}});
    m.KernelCall(m.Operator("aten::mul", "out"), {int(x), int(c), int(y), int(y)});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes({0, 64});
  }
  return b.Build();
}

void ExpectLoadsWithBothShapes(const WriteResult& wr) {
  std::vector<std::string> ptds;
  for (const auto& p : wr.ptds) ptds.push_back(p.path);
  OracleResult r = RunRuntimeOracle(OracleBuild::kOss, wr.pte.path, ptds);
  ASSERT_TRUE(r.loaded()) << r.Describe();
  ASSERT_EQ(r.out["methods"].size(), 2u);
  const std::string bytes = Xxh64Hex(Floats({1, 2, 3, 4, 5, 6}));
  for (const auto& m : r.out["methods"]) {
    ASSERT_EQ(m["constants"].size(), 1u) << m.dump();
    EXPECT_EQ(m["constants"][0]["status"]["name"], "Error::Ok") << m.dump();
    EXPECT_EQ(m["constants"][0]["xxh64"], bytes);
  }
}

TEST(WriterExternalKeys, SharedBytesOfTwoShapesGetAKeyEach) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  BackendConfig config;
  config.external_constants = true;
  const std::string dir = ScratchDir("external_keys_shapes");
  WriteResult wr = WritePackage(SharedBytesProgram("", ""), config, dir + "/p.pte");
  ExpectLoadsWithBothShapes(wr);
}

TEST(WriterExternalKeys, SharedBytesInTwoFilesGetAKeyEach) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  BackendConfig config;
  config.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
    return t.method == "a" ? "fa" : "fb";
  };
  const std::string dir = ScratchDir("external_keys_files");
  WriteResult wr = WritePackage(SharedBytesProgram("", ""), config, dir + "/p.pte");
  ASSERT_EQ(wr.ptds.size(), 2u);
  ExpectLoadsWithBothShapes(wr);
}

// Placement frees a constant's Buffer table once every tensor of it has moved (split28): here
// one of its two tensors moves and the other keeps the data in the program, which the runtime
// must still find there, with the .ptd holding the moved one's copy.
TEST(WriterExternalKeys, SharedBytesMovedForOneMethodStayForTheOther) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  BackendConfig config;
  config.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
    return t.method == "a" ? std::optional<std::string>("fa") : std::nullopt;
  };
  const std::string dir = ScratchDir("external_keys_one_moved");
  WriteResult wr = WritePackage(SharedBytesProgram("", ""), config, dir + "/p.pte");
  ASSERT_EQ(wr.ptds.size(), 1u);
  ExpectLoadsWithBothShapes(wr);
}

TEST(WriterExternalKeys, OneNameForTwoShapesIsRefused) {
  BackendConfig config;
  config.external_constants = true;
  const std::string dir = ScratchDir("external_keys_named");
  try {
    WritePackage(SharedBytesProgram("w", "w"), config, dir + "/p.pte");
    FAIL() << "one key for a [2,3] and a [3,2] tensor was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"w\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptepack::testing
