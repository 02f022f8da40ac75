// The runtime oracle's clobbering mode (tests/oracle/clobber.h) itself: it runs every real
// fixture the runtime loads, deterministically, one trace entry per call the program makes;
// what it reads and writes follows ExecuTorch's emitter (checked on the fixtures' own
// instructions); a delegate's payload says how many outputs it has; a loop that never ends
// stops. (--share-buffer: plan_rules_test.cpp, on the shared-state program.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/programs.h"
#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

struct Fixture {
  std::string pte, ptd;
  OracleBuild build;
  // Calls to stub kernels and delegates per method with instructions, in program order (the
  // fixtures have no jumps and no prim ops: every KernelCall and DelegateCall, counted in
  // `flatc --json` of each file).
  std::map<std::string, size_t> calls;
};

const std::vector<Fixture>& Fixtures() {
  static const std::vector<Fixture> f = {
      {"add.pte", "", OracleBuild::kOss, {{"forward", 1}}},
      {"arduino_add.pte", "", OracleBuild::kOss, {{"forward", 1}}},
      {"conv2d_quantized.pte", "", OracleBuild::kOss, {{"forward", 3}}},
      {"keyword_spotting.pte", "", OracleBuild::kOss, {{"forward", 16}}},
      {"maxpool2d.pte", "", OracleBuild::kOss, {{"forward", 1}}},
      // constants in Program.constant_buffer: only the runtime built with the deprecated path loads it
      {"module_linear_no_constant_segment.pte", "", OracleBuild::kDeprecatedConstantBuffer, {{"forward", 2}}},
      {"softmax.pte", "", OracleBuild::kOss, {{"forward", 1}}},
      {"stories260k_qnn.pte", "", OracleBuild::kOss, {{"kv_forward", 1}, {"prefill_forward", 1}}},
      {"xor.pte", "xor.ptd", OracleBuild::kOss, {{"forward", 66}}},
      // linear.pte + linear.ptd: the runtime refuses linear.ptd (FlatTensor layout of before June 2025)
  };
  return f;
}

OracleResult Clobber(const Fixture& f) {
  return RunClobberOracle(f.build, FixturePath(f.pte),
                          f.ptd.empty() ? std::vector<std::string>{} : std::vector<std::string>{FixturePath(f.ptd)});
}

const json& MethodNamed(const json& view, const std::string& name) {
  for (const auto& m : view) {
    if (m["name"] == name) return m;
  }
  static const json none;
  ADD_FAILURE() << "no method " << name;
  return none;
}

TEST(ClobberOracle, EveryFixtureRunsTheSameTwice) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  for (const Fixture& f : Fixtures()) {
    OracleResult a = Clobber(f);
    ASSERT_TRUE(a.loaded()) << f.pte << ": " << a.Describe();
    const json view = ClobberView(a.out);
    for (const auto& m : view) {
      EXPECT_EQ(m["status"]["code"], 0) << f.pte << " " << m["name"];
      EXPECT_FALSE(m.contains("error")) << f.pte << " " << m["name"] << ": " << m.value("error", "");
      const auto it = f.calls.find(m["name"].get<std::string>());
      const size_t expected = it == f.calls.end() ? 0 : it->second;
      ASSERT_EQ(m["trace"].size(), expected) << f.pte << " " << m["name"];
      for (size_t c = 0; c < expected; c++) {  // straight-line programs: call c is instruction c
        EXPECT_EQ(m["trace"][c]["call"], c);
        EXPECT_EQ(m["trace"][c]["instruction"], c);
      }
    }
    OracleResult b = Clobber(f);
    EXPECT_EQ(FirstClobberDifference(view, ClobberView(b.out)), "") << f.pte;
  }
}

const executorch_flatbuffer::KernelCall* FirstKernelCall(const PteFile& pte) {
  return pte.program()->execution_plan()->Get(0)->chains()->Get(0)->instructions()->Get(0)->instr_args_as_KernelCall();
}

// maxpool2d.pte's one call is aten::max_pool2d_with_indices.out(self, kernel_size, stride,
// padding, dilation, ceil_mode, *, out, indices) -> (out, indices): the emitter writes the six
// schema arguments, the two out kwargs, then a TensorList of both (_emit_operator). The stub
// reads the first six and writes the two outs.
TEST(ClobberOracle, ReadsAndWritesWhatTheEmitterSays) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  auto pte = PteFile::Open(FixturePath("maxpool2d.pte"));
  const auto* call = FirstKernelCall(*pte);
  ASSERT_EQ(call->args()->size(), 9u);
  OracleResult r = RunClobberOracle(OracleBuild::kOss, FixturePath("maxpool2d.pte"));
  ASSERT_TRUE(r.loaded()) << r.Describe();
  const json view0 = ClobberView(r.out);
  const json& entry = view0.at(0)["trace"].at(0);
  EXPECT_EQ(entry["op"], "aten::max_pool2d_with_indices.out");
  ASSERT_EQ(entry["in"].size(), 6u);
  for (size_t i = 0; i < 6; i++) {
    EXPECT_EQ(entry["in"][i]["arg"], i);
    EXPECT_EQ(entry["in"][i]["value"], call->args()->Get(static_cast<flatbuffers::uoffset_t>(i)));
  }
  ASSERT_EQ(entry["out"].size(), 2u);
  EXPECT_EQ(entry["out"].at(0)["value"], call->args()->Get(6));
  EXPECT_EQ(entry["out"].at(1)["value"], call->args()->Get(7));

  // stories260k_qnn's delegate calls name the 13 method inputs, then the 11 method outputs
  // (_emit_delegate: inputs, then the flattened returns); its payload (a QNN context) does not
  // say how many outputs there are, so the stub takes the trailing values nothing gave bytes to.
  auto stories = PteFile::Open(FixturePath("stories260k_qnn.pte"));
  OracleResult s = RunClobberOracle(OracleBuild::kOss, FixturePath("stories260k_qnn.pte"));
  ASSERT_TRUE(s.loaded()) << s.Describe();
  const json view = ClobberView(s.out);
  for (const char* name : {"kv_forward", "prefill_forward"}) {
    const executorch_flatbuffer::ExecutionPlan* plan = nullptr;
    for (const auto* p : *stories->program()->execution_plan()) {
      if (p->name()->str() == name) plan = p;
    }
    ASSERT_NE(plan, nullptr);
    const json& e = MethodNamed(view, name)["trace"].at(0);
    EXPECT_EQ(e["delegate"], "QnnBackend");
    std::set<int> in, out, method_in(plan->inputs()->begin(), plan->inputs()->end()),
        method_out(plan->outputs()->begin(), plan->outputs()->end());
    for (const auto& a : e["in"]) in.insert(a["value"].get<int>());
    for (const auto& a : e["out"]) out.insert(a["value"].get<int>());
    EXPECT_EQ(in, method_in) << name;
    EXPECT_EQ(out, method_out) << name;
    EXPECT_EQ(MethodNamed(view, name)["inputs"].size(), 13u) << "every input gets bytes, whatever its dtype";
  }
}

// A delegate of ours says in its payload how many of its arguments are outputs.
TEST(ClobberOracle, DelegatePayloadSaysHowManyOutputs) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  for (int outputs : {1, 2}) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = static_cast<int>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}}));
    const int o1 = static_cast<int>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 16}}));
    const int o2 = static_cast<int>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 32}}));
    m.DelegateCall(m.Delegate("ClobberBackend", Bytes::Own(ClobberDelegatePayload(outputs))), {x, o1, o2});
    m.Inputs({x});
    m.Outputs({o2});
    m.PlannedBufferSizes({0, 48});
    const std::string path = ScratchDir("clobber_delegate") + "/d" + std::to_string(outputs) + ".pte";
    WritePackage(b.Build(), BackendConfig{}, path);
    OracleResult r = RunClobberOracle(OracleBuild::kOss, path);
    ASSERT_TRUE(r.loaded()) << r.Describe();
    const json view = ClobberView(r.out);
    const json& e = view.at(0)["trace"].at(0);
    EXPECT_EQ(e["in"].size(), static_cast<size_t>(3 - outputs));
    ASSERT_EQ(e["out"].size(), static_cast<size_t>(outputs));
    EXPECT_EQ(e["out"].back()["value"], o2);
    EXPECT_EQ(e["in"].at(0)["value"], x);
  }
}

// A JumpFalseCall on a constant False back to itself never ends: the run stops at --max-steps
// and says so (exit 1), instead of hanging.
TEST(ClobberOracle, LoopWithoutExitStops) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  const int x = static_cast<int>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}}));
  const int y = static_cast<int>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 16}}));
  const int never = static_cast<int>(m.Bool(false));
  m.KernelCall(m.Operator("aten::neg", "out"), {x, y, y});
  m.JumpFalse(never, 0);
  m.Inputs({x});
  m.Outputs({y});
  m.PlannedBufferSizes({0, 32});
  const std::string path = ScratchDir("clobber_loop") + "/loop.pte";
  WriteFile(path, RenderPte(LayoutPte(PartsOf(b.Build()), BackendConfig{})));  // verify refuses a loop without exit
  OracleResult r = RunRuntimeOracleWith(OracleBuild::kOss, path, {}, {"--clobber", "--max-steps", "1000"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  const json view = ClobberView(r.out);
  const json& run = view.at(0);
  ASSERT_TRUE(run.contains("limit")) << run.dump().substr(0, 500);
  EXPECT_EQ(run["trace"].size(), 500u);  // instructions 0, 1, 0, 1, ...: every other step is the call
}

int ExitOf(const std::string& args) {
#ifdef PTEPACK_RUNTIME_ORACLE_OSS
  const int st = std::system((ShellQuote(PTEPACK_RUNTIME_ORACLE_OSS) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
#else
  (void)args;
  return -1;
#endif
}

TEST(ClobberOracle, UsageErrors) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const std::string add = ShellQuote(FixturePath("add.pte"));
  EXPECT_EQ(ExitOf(add + " --clobber"), 0);
  EXPECT_EQ(ExitOf(add + " --clobber --run"), 2);
  EXPECT_EQ(ExitOf(add + " --share-buffer 2"), 2);
  EXPECT_EQ(ExitOf(add + " --clobber --share-buffer 0"), 2);
  EXPECT_EQ(ExitOf(add + " --clobber --max-steps x"), 2);
}

}  // namespace
}  // namespace ptepack::testing
