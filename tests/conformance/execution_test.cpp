// Execution before and after (issue 17, part 3): programs run end to end in ExecuTorch's runtime
// (the harness's float kernels plus the oracle's prim ops) as they were written originally,
// repacked under other configs, with constants inline, and split into one or several .ptd files.
// Every form must compute the same outputs, and the original's outputs must be the ones computed
// here by hand from the inputs and the constants the runtime resolved.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/programs.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

// The harness's deterministic inputs: element k of input i.
float In(size_t i, size_t k) { return static_cast<float>(static_cast<int>((k * 7 + i * 3) % 11) - 5) / 4.0f; }

std::vector<float> Values(const json& a) {
  std::vector<float> v;
  for (const auto& x : a) v.push_back(x.get<float>());
  return v;
}

// A constant's values as the runtime resolved them, by value index.
std::vector<float> Constant(const json& method, uint32_t value_index) {
  for (const auto& c : method["constants"]) {
    if (c["value_index"] == value_index && c.contains("values")) return Values(c["values"]);
  }
  ADD_FAILURE() << "no float constant at value " << value_index << " in " << method["name"];
  return {};
}

const json& Method(const json& out, const std::string& name) {
  for (const auto& m : out["methods"]) {
    if (m["name"] == name) return m;
  }
  static const json none;
  ADD_FAILURE() << "no method " << name;
  return none;
}

void ExpectOutput(const json& method, size_t output, const std::vector<float>& expected) {
  ASSERT_TRUE(method.contains("run")) << method.dump();
  const std::vector<float> got = Values(method["run"]["outputs"][output]["values"]);
  ASSERT_EQ(got.size(), expected.size()) << method["name"];
  for (size_t k = 0; k < got.size(); k++) EXPECT_NEAR(got[k], expected[k], 1e-5) << method["name"] << " [" << k << "]";
}

struct Runnable {
  std::string name;
  std::string pte;
  std::vector<std::string> ptds;
  // Hand computation of the outputs from the inputs and the runtime's view of the constants.
  std::function<void(const json& out)> check;
};

std::vector<Runnable> Runnables() {
  std::vector<Runnable> out;
  out.push_back({"add", FixturePath("add.pte"), {}, [](const json& o) {
                   ExpectOutput(Method(o, "forward"), 0, {In(0, 0) + In(1, 0)});  // x + y
                 }});
  out.push_back({"arduino_add", FixturePath("arduino_add.pte"), {}, [](const json& o) {
                   const json& m = Method(o, "forward");
                   const float c = Constant(m, 0).at(0);  // x + c, c a 0-d constant
                   EXPECT_EQ(c, 1.0f);
                   ExpectOutput(m, 0, {In(0, 0) + c, In(0, 1) + c, In(0, 2) + c});
                 }});
  out.push_back({"module_linear_no_constant_segment",
                 FixturePath("module_linear_no_constant_segment.pte"),
                 {},
                 [](const json& o) {
                   const json& m = Method(o, "forward");
                   const std::vector<float> a = Constant(m, 0), b = Constant(m, 1);  // a * x + b
                   std::vector<float> e;
                   for (size_t k = 0; k < 4; k++) e.push_back(a.at(k) * In(0, k) + b.at(k));
                   ExpectOutput(m, 0, e);
                 }});
  // linear.ptd is in the FlatTensor layout the runtime no longer reads: upgrade it first.
  const std::string dir = ScratchDir("execution_subjects");
  RunResult up = RunCli({"repack", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--upgrade-ptd", "-o",
                         dir + "/linear.pte"});
  EXPECT_EQ(up.exit_code, 0) << up.err;
  out.push_back({"linear_upgraded", dir + "/linear.pte", {dir + "/linear.ptd"}, [](const json& o) {
                   const json& m = Method(o, "forward");
                   const std::vector<float> w = Constant(m, 0), b = Constant(m, 1);  // x @ w^T + b, 3x3
                   std::vector<float> e;
                   for (size_t i = 0; i < 3; i++) {
                     for (size_t j = 0; j < 3; j++) {
                       float acc = 0;
                       for (size_t k = 0; k < 3; k++) acc += In(0, i * 3 + k) * w.at(j * 3 + k);
                       e.push_back(b.at(j) + acc);
                     }
                   }
                   ExpectOutput(m, 0, e);
                 }});
  WritePackage(AffineProgram().package, BackendConfig{}, dir + "/affine.pte");
  out.push_back({"builder_affine", dir + "/affine.pte", {}, [](const json& o) {
                   // The builder's own constants, not the runtime's view of them.
                   const float w[] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}, b[] = {1.0f, 2.0f, 3.0f};
                   const float s[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f};
                   std::vector<float> fwd, scale;
                   for (size_t k = 0; k < 6; k++) {
                     fwd.push_back((In(0, k) * w[k] + b[k % 3]) + 2 * s[k]);
                     scale.push_back(In(0, k) * w[k]);
                   }
                   ExpectOutput(Method(o, "forward"), 0, fwd);
                   ExpectOutput(Method(o, "scale"), 0, scale);
                 }});
  RunResult pack = RunCli({"pack", std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack/config.json",
                           std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack/add_spec.json", "-o", dir + "/pack.pte"});
  EXPECT_EQ(pack.exit_code, 0) << pack.err;
  out.push_back({"pack_add", dir + "/pack.pte", {}, [](const json& o) {
                   ExpectOutput(Method(o, "forward"), 0, {In(0, 0) + 1.0f, In(0, 1) + 2.0f});  // x + [1, 2]
                 }});
  return out;
}

struct Form {
  const char* name;
  std::function<void(BackendConfig&)> apply;
};

const Form kForms[] = {
    {"original config", [](BackendConfig&) {}},
    {"segment_alignment=4096 constant_tensor_alignment=64 python order",
     [](BackendConfig& c) {
       c.segment_alignment = 4096;
       c.constant_tensor_alignment = 64;
       c.flatbuffer_order = FlatbufferOrder::kPythonObjectApi;
     }},
    {"constants inline (Program.constant_buffer), legacy header",
     [](BackendConfig& c) {
       c.inline_constants = true;
       c.legacy_extended_header = true;
       c.external_constants = false;
       c.external_constants_fn = nullptr;
     }},
    {"constant segment", [](BackendConfig& c) { c.inline_constants = false; }},
    {"split into one .ptd",
     [](BackendConfig& c) {
       c.inline_constants = false;
       c.external_constants = true;
       c.external_tag = "weights";
     }},
    {"split into two .ptd by tag, mutable weights external",
     [](BackendConfig& c) {
       c.inline_constants = false;
       c.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
         return t.value_index % 2 == 0 ? "even" : "odd";
       };
       c.external_mutable_weights = true;
       c.external_tag = "state";
     }},
};

// Every method's run: inputs and outputs (values and hashes) as the runtime computed them.
json Runs(const json& out) {
  json runs = json::array();
  for (const auto& m : out["methods"]) runs.push_back({{"name", m["name"]}, {"run", m.value("run", json())}});
  return runs;
}

TEST(Execution, SameOutputsBeforeAndAfterRepacking) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  size_t executed = 0;
  for (const Runnable& subject : Runnables()) {
    SCOPED_TRACE(subject.name);
    // The original, run by the build that loads every layout.
    OracleResult original =
        RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, subject.pte, subject.ptds, /*run=*/true);
    ASSERT_TRUE(original.loaded()) << original.Describe();
    subject.check(original.out);
    executed++;

    auto pte = PteFile::Open(subject.pte);
    std::vector<std::unique_ptr<PtdFile>> ptd_files;
    std::vector<const PtdFile*> ptds;
    for (const auto& p : subject.ptds) {
      ptd_files.push_back(PtdFile::Open(p));
      ptds.push_back(ptd_files.back().get());
    }
    PackageParts pkg = PackageFromPte(*pte, ptds);
    const InferredConfig inf = InferConfig(*pte, pkg, ptds);
    inf.ApplyBlobAlignments(pkg);
    const BackendConfig base = inf.config;
    for (size_t f = 0; f < std::size(kForms); f++) {
      SCOPED_TRACE(kForms[f].name);
      BackendConfig config = base;
      kForms[f].apply(config);
      const std::string dir = ScratchDir("execution_" + subject.name + "_" + std::to_string(f));
      WriteResult wr = WritePackage(PackageOf(pkg), config, dir + "/" + subject.name + ".pte");
      std::vector<std::string> out_ptds;
      for (const auto& p : wr.ptds) out_ptds.push_back(p.path);
      for (OracleBuild b : {OracleBuild::kDeprecatedConstantBuffer, OracleBuild::kOss}) {
        const bool oss = b == OracleBuild::kOss;
        SCOPED_TRACE(oss ? "OSS build" : "deprecated-constant-buffer build");
        OracleResult r = RunRuntimeOracle(b, wr.pte.path, out_ptds, /*run=*/true);
        if (oss && config.inline_constants) {
          EXPECT_EQ(r.out["program"]["status"]["name"], "Error::InvalidProgram") << r.Describe();
          continue;
        }
        ASSERT_TRUE(r.loaded()) << r.Describe();
        EXPECT_EQ(Runs(r.out), Runs(original.out));
        subject.check(r.out);
        executed++;
      }
      std::filesystem::remove_all(dir);
    }
  }
  std::printf("[ conformance ] %zu programs executed in the runtime with the expected outputs\n", executed);
}

}  // namespace
}  // namespace ptepack::testing
