// Issue 23, "Must show": what `ptepack plan -o` writes executes exactly as its input. Every
// fixture the runtime runs and every program of plan_programs.h (one per lifetime rule: chains,
// several outputs, loops, MoveCall, et_view, static views, FreeCall, delegates, two buffers,
// state several methods share) is re-planned with each algorithm and run in the runtime
// oracle's clobbering mode (tests/oracle/clobber.h: stub kernels and delegates fill their outputs
// with a hash of what they read, so a tensor overwritten while still to be read changes every
// later call): the per-call trace and the outputs must equal the input's, call for call.
//
// Each algorithm's placement is written even where it is not smaller than the input's
// (PlanReportOptions::keep_input_unless_smaller = false), so that every planner's offsets run,
// not only the ones `plan` keeps; and `best` as `ptepack plan -o` writes it. Every output
// passes the writer's read-back (verify's plan checks) with no plan finding at all.
#include "serialize/api/replan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/plan_programs.h"
#include "ptepack/reader.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

struct Variant {
  const char* label;
  PlanAlgorithm algorithm;
  bool keep_input_unless_smaller;
};

const std::vector<Variant>& Variants() {
  static const std::vector<Variant> v = {
      {"executorch-greedy", PlanAlgorithm::kExecutorchGreedy, false},
      {"best-fit", PlanAlgorithm::kBestFit, false},
      {"exact", PlanAlgorithm::kExact, false},
      {"best", PlanAlgorithm::kBest, false},
      {"plan-o", PlanAlgorithm::kBest, true},  // what `ptepack plan -o OUT` writes
  };
  return v;
}

std::string PlanFindings(const std::string& pte, const std::vector<std::string>& ptds) {
  VerifyOptions vo;
  vo.ptd = ptds;
  std::string s;
  for (const Finding& f : Verify(pte, vo).findings) {
    if (f.code.rfind("plan-", 0) == 0) s += "\n  " + f.ToString();
  }
  return s;
}

// Re-plans `in` with one variant into `dir`; returns the output's path and the bytes its
// planned buffers need (summed over methods).
struct Replanned {
  std::string pte;
  std::vector<std::string> ptds;
  uint64_t planned = 0, size_now = 0;
};

Replanned Replan(const std::string& in, const std::vector<std::string>& ptds, const std::string& dir,
                 const Variant& v) {
  ReplanOptions o;
  o.ptd = ptds;
  o.plan.chosen = v.algorithm;
  o.plan.keep_input_unless_smaller = v.keep_input_unless_smaller;
  const std::string out = dir + "/" + v.label + ".pte";
  ReplanResult r = ptepack::Replan(in, out, o);
  Replanned p;
  p.pte = r.files.pte.path;
  for (const auto& f : r.files.ptds) p.ptds.push_back(f.path);
  p.planned = r.report.planned;
  p.size_now = r.report.size_now;
  return p;
}

struct Fixture {
  std::string pte, ptd;
  OracleBuild build;
};

// The fixtures the runtime oracle runs (clobber_oracle_test.cpp; linear.ptd is in the layout
// current runtimes refuse).
const std::vector<Fixture>& Fixtures() {
  static const std::vector<Fixture> f = {
      {"add.pte", "", OracleBuild::kOss},
      {"arduino_add.pte", "", OracleBuild::kOss},
      {"conv2d_quantized.pte", "", OracleBuild::kOss},
      {"keyword_spotting.pte", "", OracleBuild::kOss},
      {"maxpool2d.pte", "", OracleBuild::kOss},
      {"module_linear_no_constant_segment.pte", "", OracleBuild::kDeprecatedConstantBuffer},
      {"softmax.pte", "", OracleBuild::kOss},
      {"stories260k_qnn.pte", "", OracleBuild::kOss},
      {"xor.pte", "xor.ptd", OracleBuild::kOss},
  };
  return f;
}

TEST(ReplanOracle, EveryFixtureReplannedRunsAsItsInput) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  size_t runs = 0;
  for (const Fixture& f : Fixtures()) {
    const std::string in = FixturePath(f.pte);
    const std::vector<std::string> ptds = f.ptd.empty() ? std::vector<std::string>{} : std::vector{FixturePath(f.ptd)};
    OracleResult base = RunClobberOracle(f.build, in, ptds);
    ASSERT_TRUE(base.loaded()) << f.pte << ": " << base.Describe();
    const json want = ClobberView(base.out);
    for (const Variant& v : Variants()) {
      const std::string dir = ScratchDir("replan_" + f.pte.substr(0, f.pte.size() - 4) + "_" + v.label);
      const Replanned p = Replan(in, ptds, dir, v);
      EXPECT_EQ(PlanFindings(p.pte, p.ptds), "") << f.pte << ", " << v.label;
      if (v.keep_input_unless_smaller) {
        EXPECT_LE(p.planned, p.size_now) << f.pte;
      }
      OracleResult got = RunClobberOracle(f.build, p.pte, p.ptds);
      ASSERT_TRUE(got.loaded()) << f.pte << ", " << v.label << ": " << got.Describe();
      EXPECT_EQ(FirstClobberDifference(want, ClobberView(got.out)), "") << f.pte << ", " << v.label;
      ++runs;
      std::printf("%s, %s: planned %llu -> %llu bytes, same trace and outputs\n", f.pte.c_str(), v.label,
                  static_cast<unsigned long long>(p.size_now), static_cast<unsigned long long>(p.planned));
    }
  }
  std::printf("%zu re-planned fixtures ran as their inputs\n", runs);
}

class ReplanRules : public ::testing::TestWithParam<size_t> {
 protected:
  const RuleProgram& Program() {
    static const std::vector<RuleProgram> programs = PlanRulePrograms();
    return programs.at(GetParam());
  }
};

// The unshared plan (every tensor its own bytes) and the hand-made safe plan, each re-planned.
TEST_P(ReplanRules, ReplannedRunsAsTheUnsharedPlan) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const RuleProgram& p = Program();
  const std::string dir = ScratchDir("replan_rules_" + p.name);
  const std::string unshared = dir + "/unshared.pte";
  WriteUnchecked(p.Build(p.Unshared()), unshared);
  OracleResult base = RunClobberOracle(OracleBuild::kOss, unshared, {}, p.share_buffers);
  ASSERT_TRUE(base.loaded()) << p.name << ": " << base.Describe();
  const json want = ClobberView(base.out);
  const std::string safe = dir + "/safe.pte";
  WriteUnchecked(p.Build(p.With(p.cases.at(0).moves)), safe);
  for (const std::string& in : {unshared, safe}) {
    for (const Variant& v : Variants()) {
      const std::string out_dir = ScratchDir("replan_rules_" + p.name + "_" + (in == safe ? "safe_" : "") + v.label);
      const Replanned r = Replan(in, {}, out_dir, v);
      EXPECT_EQ(PlanFindings(r.pte, {}), "") << p.name << ", " << v.label;
      OracleResult got = RunClobberOracle(OracleBuild::kOss, r.pte, {}, p.share_buffers);
      ASSERT_TRUE(got.loaded()) << p.name << ", " << v.label << ": " << got.Describe();
      EXPECT_EQ(FirstClobberDifference(want, ClobberView(got.out)), "")
          << p.name << " (" << (in == safe ? "safe" : "unshared") << " plan), " << v.label;
      std::printf("%s (%s plan), %s: planned %llu -> %llu bytes, same trace and outputs\n", p.name.c_str(),
                  in == safe ? "safe" : "unshared", v.label, static_cast<unsigned long long>(r.size_now),
                  static_cast<unsigned long long>(r.planned));
    }
  }
}

std::string Name(const ::testing::TestParamInfo<size_t>& info) {
  static const std::vector<RuleProgram> programs = PlanRulePrograms();
  return programs.at(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(Programs, ReplanRules, ::testing::Range<size_t>(0, PlanRulePrograms().size()), Name);

}  // namespace
}  // namespace ptepack::testing
