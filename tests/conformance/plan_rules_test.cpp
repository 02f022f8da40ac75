// Issue 23, "Must show": the fixtures have no loops, MoveCall, et_view, delegates with planned
// outputs or several buffers, so the programs of plan_programs.h exercise each lifetime rule.
// Each runs in the runtime oracle's clobbering mode (tests/oracle/clobber.h: stub kernels and
// delegates whose outputs are a hash of their inputs, one trace entry per call) under three
// kinds of plan:
//  - unshared (every tensor its own bytes) and safe (bytes reused where the rule allows): the
//    runtime must execute both identically, call for call;
//  - unsafe (a tensor in bytes that are still to be read, or that nothing wrote): the run must
//    change.
// And `verify` (ptepack::Verify) must report nothing about the plan on the unshared and safe
// plans, and `plan-overlap` / `plan-read-before-write` on each unsafe one.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/plan_programs.h"
#include "ptepack/reader.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

// Calls each program's run makes (stub kernels and delegates; prim ops are not traced),
// per method in program order, derived by hand from the programs.
const std::map<std::string, std::vector<size_t>>& ExpectedCalls() {
  static const std::map<std::string, std::vector<size_t>> calls = {
      {"chain", {5}},    {"several_outputs", {4}}, {"loop", {11}},  // sum, 3 x (select_copy, mul, neg), neg
      {"move", {3}},  // both conds take their true branch: sin, tan, then add
      {"et_view", {3}},  {"static_view", {3}},     {"free", {4}},
      {"delegate", {4}}, {"two_buffers", {4}},     {"shared_state", {3, 2}},
  };
  return calls;
}

std::string WritePlan(const RuleProgram& p, const PlanLocations& loc, const std::string& file) {
  const std::string path = ScratchDir("plan_rules_" + p.name) + "/" + file;
  WriteUnchecked(p.Build(loc), path);
  return path;
}

json RunClobbered(const RuleProgram& p, const std::string& path) {
  OracleResult r = RunClobberOracle(OracleBuild::kOss, path, {}, p.share_buffers);
  EXPECT_TRUE(r.loaded()) << p.name << ": " << r.Describe();
  return ClobberView(r.out);
}

std::vector<Finding> PlanFindings(const std::string& path) {
  std::vector<Finding> out;
  for (const Finding& f : Verify(path).findings) {
    if (f.code.rfind("plan-", 0) == 0) out.push_back(f);
  }
  return out;
}

const json& MethodNamed(const json& view, const std::string& name) {
  for (const auto& m : view) {
    if (m["name"] == name) return m;
  }
  static const json none;
  ADD_FAILURE() << "no method " << name;
  return none;
}

std::string Describe(const std::vector<Finding>& fs) {
  std::string s;
  for (const Finding& f : fs) s += "\n  " + f.ToString();
  return s.empty() ? " (none)" : s;
}

class PlanRules : public ::testing::TestWithParam<size_t> {
 protected:
  const RuleProgram& Program() {
    static const std::vector<RuleProgram> programs = PlanRulePrograms();
    return programs.at(GetParam());
  }
};

TEST_P(PlanRules, SafePlanRunsAsUnshared) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const RuleProgram& p = Program();
  const json unshared = RunClobbered(p, WritePlan(p, p.Unshared(), "unshared.pte"));
  ASSERT_EQ(unshared.size(), ExpectedCalls().at(p.name).size());
  for (size_t m = 0; m < unshared.size(); m++) {
    ASSERT_EQ(unshared[m].value("status", json()).value("code", -1), 0) << p.name << ": " << unshared[m].dump();
    EXPECT_FALSE(unshared[m].contains("error")) << unshared[m]["error"];
    EXPECT_EQ(unshared[m]["trace"].size(), ExpectedCalls().at(p.name)[m]) << p.name << " " << unshared[m]["name"];
  }
  const PlanCase& safe = p.cases.at(0);
  const json run = RunClobbered(p, WritePlan(p, p.With(safe.moves), "safe.pte"));
  EXPECT_EQ(FirstClobberDifference(unshared, run), "") << p.name << ", " << safe.label;
}

TEST_P(PlanRules, UnsafePlansChangeTheRun) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const RuleProgram& p = Program();
  const json unshared = RunClobbered(p, WritePlan(p, p.Unshared(), "unshared.pte"));
  ASSERT_GE(p.cases.size(), 2u);
  for (size_t i = 1; i < p.cases.size(); i++) {
    const json run = RunClobbered(p, WritePlan(p, p.With(p.cases[i].moves), "unsafe_" + std::to_string(i) + ".pte"));
    const std::string diff = FirstClobberDifference(unshared, run);
    EXPECT_NE(diff, "") << p.name << ", " << p.cases[i].label << ": the run did not change";
    std::printf("%s, %s: first change: %s\n", p.name.c_str(), p.cases[i].label.c_str(), diff.substr(0, 300).c_str());
  }
}

// Waits for the plan checks (branch `lifetimes`): until then verify reports nothing on any plan.
TEST_P(PlanRules, VerifyFlagsExactlyTheUnsafePlans) {
  const RuleProgram& p = Program();
  for (size_t i = 0; i < p.cases.size(); i++) {
    const PlanLocations loc = i == 0 ? p.Unshared() : p.With(p.cases[i].moves);
    const std::string path = WritePlan(p, loc, "verify_" + std::to_string(i) + ".pte");
    const std::vector<Finding> found = PlanFindings(path);
    if (i == 0) {
      EXPECT_TRUE(found.empty()) << p.name << ", unshared plan:" << Describe(found);
      const std::string safe = WritePlan(p, p.With(p.cases[0].moves), "verify_safe.pte");
      const std::vector<Finding> safe_found = PlanFindings(safe);
      EXPECT_TRUE(safe_found.empty()) << p.name << ", " << p.cases[0].label << ":" << Describe(safe_found);
      continue;
    }
    bool flagged = false;
    for (const Finding& f : found) flagged = flagged || f.code == p.cases[i].expected_finding;
    EXPECT_TRUE(flagged) << p.name << ", " << p.cases[i].label << ": expected " << p.cases[i].expected_finding
                         << ", found:" << Describe(found);
  }
}

// --share-buffer 2: both methods of the shared-state program run in one buffer 2, so `read`
// reads the s1 that `step` wrote; each with its own buffer 2, `read` reads s1's initial state.
TEST(PlanRulesOracle, ShareBufferGivesMethodsOneBuffer) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  RuleProgram p;
  for (RuleProgram& q : PlanRulePrograms()) {
    if (q.name == "shared_state") p = q;
  }
  ASSERT_EQ(p.name, "shared_state");
  const std::string path = ScratchDir("clobber_share") + "/shared.pte";
  WritePackage(p.Build(p.Unshared()), BackendConfig{}, path);
  OracleResult shared = RunClobberOracle(OracleBuild::kOss, path, {}, {2});
  OracleResult separate = RunClobberOracle(OracleBuild::kOss, path);
  ASSERT_TRUE(shared.loaded()) << shared.Describe();
  ASSERT_TRUE(separate.loaded()) << separate.Describe();
  const json a = ClobberView(shared.out), b = ClobberView(separate.out);
  EXPECT_EQ(MethodNamed(a, "step"), MethodNamed(b, "step"));
  const json& ra = MethodNamed(a, "read")["trace"].at(0)["in"].at(0);
  const json& rb = MethodNamed(b, "read")["trace"].at(0)["in"].at(0);
  EXPECT_EQ(ra["value"], rb["value"]);  // s1
  EXPECT_NE(ra["xxh64"], rb["xxh64"]);
  // In `step`, s1.copy_(t) wrote s1 with t's bytes... and the stub's hash of them: what `read`
  // reads as s1 with a shared buffer is what `step`'s copy_ wrote.
  EXPECT_EQ(ra["xxh64"], MethodNamed(a, "step")["trace"].at(1)["out"].at(0)["xxh64"]);
}

std::string Name(const ::testing::TestParamInfo<size_t>& info) {
  static const std::vector<RuleProgram> programs = PlanRulePrograms();
  return programs.at(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Programs, PlanRules, ::testing::Range<size_t>(0, PlanRulePrograms().size()), Name);

}  // namespace
}  // namespace ptepack::testing
