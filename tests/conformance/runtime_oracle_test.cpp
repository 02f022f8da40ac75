// The oracle itself: ExecuTorch's runtime loads the real fixtures it should and refuses the ones
// it refuses, in both builds, so its verdicts on our outputs mean something. The table records,
// with the reason, every original the runtime itself rejects: facts about the originals.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "conformance/oracle_runner.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

struct Verdict {
  const char* pte;
  const char* ptd;          // nullptr: none
  const char* program;      // Program::load status, deprecated-constant-buffer build
  const char* method;       // load_method status of every method (nullptr: program refused)
  const char* oss_program;  // Program::load status in the OSS build
  const char* why;          // why the runtime refuses (empty when it loads)
};

const Verdict kVerdicts[] = {
    {"add.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"arduino_add.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"conv2d_quantized.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"keyword_spotting.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"linear.pte", "linear.ptd", "Error::Ok", "Error::InvalidExternalData", "Error::Ok",
     "linear.ptd uses the FlatTensor layout of before June 2025 (a tensors list); today's "
     "FlatTensorDataMap reads its entries as the current layout and finds segment indices out of "
     "bounds, so the external constants do not resolve"},
    {"maxpool2d.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"module_linear_no_constant_segment.pte", nullptr, "Error::Ok", "Error::Ok", "Error::InvalidProgram",
     "constants in Program.constant_buffer (2023 layout): only a runtime built with "
     "ET_ENABLE_DEPRECATED_CONSTANT_BUFFER=1 loads it; upstream's CMake builds with 0"},
    {"softmax.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"stories260k_qnn.pte", nullptr, "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"xor.pte", "xor.ptd", "Error::Ok", "Error::Ok", "Error::Ok", ""},
    {"bundled_program.bpte", nullptr, "Error::InvalidProgram", nullptr, "Error::InvalidProgram",
     "a BundledProgram (identifier BP08), not a Program: Program::load refuses it"},
};

TEST(RuntimeOracle, TableCoversEveryFixture) {
  std::set<std::string> table, files;
  for (const Verdict& v : kVerdicts) table.insert(v.pte);
  if (!HaveFixtures()) SkipWithoutFixtures();
  for (const auto& e : std::filesystem::directory_iterator(FixturesDir())) {
    const std::string ext = e.path().extension().string();
    if (ext == ".pte" || ext == ".bpte") files.insert(e.path().filename().string());
  }
  EXPECT_EQ(table, files);
}

TEST(RuntimeOracle, VerdictsOnTheOriginals) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  for (const Verdict& v : kVerdicts) {
    SCOPED_TRACE(v.pte);
    std::vector<std::string> ptds;
    if (v.ptd != nullptr) ptds.push_back(FixturePath(v.ptd));
    for (OracleBuild b : {OracleBuild::kDeprecatedConstantBuffer, OracleBuild::kOss}) {
      const bool oss = b == OracleBuild::kOss;
      SCOPED_TRACE(oss ? "OSS build" : "deprecated-constant-buffer build");
      OracleResult r = RunRuntimeOracle(b, FixturePath(v.pte), ptds);
      ASSERT_TRUE(r.out.is_object()) << r.Describe();
      const std::string program = oss ? v.oss_program : v.program;
      EXPECT_EQ(r.out["program"]["status"]["name"], program) << r.Describe();
      const bool loads = program == "Error::Ok" && (v.method == nullptr || std::string(v.method) == "Error::Ok");
      EXPECT_EQ(r.loaded(), loads) << v.why << "\n" << r.Describe();
      if (program != "Error::Ok") continue;
      ASSERT_FALSE(r.out["methods"].empty());
      for (const auto& m : r.out["methods"]) {
        EXPECT_EQ(m["load_status"]["name"], v.method) << m["name"] << ": " << v.why;
      }
    }
  }
}

TEST(RuntimeOracle, SeesWhatTheFixturesHold) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  // add.pte: forward(x, y) -> x + y on float[1], one kernel call, nothing constant.
  OracleResult add = RunRuntimeOracle(OracleBuild::kOss, FixturePath("add.pte"));
  ASSERT_TRUE(add.loaded()) << add.Describe();
  const auto& m = add.out["methods"][0];
  EXPECT_EQ(m["name"], "forward");
  ASSERT_EQ(m["meta"]["inputs"].size(), 2u);
  EXPECT_EQ(m["meta"]["inputs"][0]["dtype"], 6);  // Float
  EXPECT_EQ(m["meta"]["inputs"][0]["sizes"], nlohmann::ordered_json::array({1}));
  EXPECT_EQ(m["meta"]["num_instructions"], 1);
  EXPECT_EQ(add.out["registered"]["operators"][0]["name"], "aten::add.out");
  EXPECT_TRUE(m["constants"].empty());

  // stories260k_qnn.pte: QNN delegates whose blobs live in segments; the backend sees them.
  OracleResult qnn = RunRuntimeOracle(OracleBuild::kOss, FixturePath("stories260k_qnn.pte"));
  ASSERT_TRUE(qnn.loaded()) << qnn.Describe();
  size_t inits = 0;
  for (const auto& mm : qnn.out["methods"]) {
    for (const auto& d : mm["delegate_inits"]) {
      EXPECT_EQ(d["backend"], "QnnBackend");
      EXPECT_GT(d["processed_size"].get<size_t>(), 0u);
      inits++;
    }
  }
  EXPECT_EQ(inits, 2u);  // kv_forward and prefill_forward

  // xor.pte + xor.ptd: the external mutable weights land in planned memory from the .ptd.
  OracleResult x = RunRuntimeOracle(OracleBuild::kOss, FixturePath("xor.pte"), {FixturePath("xor.ptd")});
  ASSERT_TRUE(x.loaded()) << x.Describe();
  EXPECT_FALSE(x.out["ptd"][0]["keys"].empty());
  EXPECT_FALSE(x.out["methods"][0]["planned_initial_state"].empty());
}

}  // namespace
}  // namespace ptepack::testing
