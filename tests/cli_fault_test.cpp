// Fault injection: every writing subcommand is run with the N-th output
// operation (write, copy_file_range, fsync, ftruncate, rename, mkdir) failing
// -- or with SIGTERM arriving just before it -- for every N up to the number
// of operations a clean run makes. The LD_PRELOAD shim (tests/fault/) does
// the failing. After each run the output directory must be exactly as before
// (same files, bytes and modes, no temporary files), or -- only for a signal
// that arrives after the outputs are in place -- exactly as a clean run
// leaves it.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::RunPtepack;
using testing::ScopedDir;
using testing::Snapshot;

std::string Testdata(const std::string& rel) { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/" + rel; }

std::vector<std::pair<std::string, std::string>> ShimEnv(long at, const std::string& mode, const std::string& log) {
  std::string asan = std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", PTEPACK_FAULT_SHIM},
      // The shim is preloaded ahead of a dynamically linked ASan runtime.
      {"ASAN_OPTIONS", asan + (asan.empty() ? "" : ":") + "verify_asan_link_order=0"},
      {"PTEPACK_FAULT_AT", std::to_string(at)},
      {"PTEPACK_FAULT_MODE", mode}};
  if (!log.empty()) env.emplace_back("PTEPACK_FAULT_LOG", log);
  return env;
}

struct Scenario {
  std::string name;
  // Creates the previous outputs in `out` (with the real CLI, no faults).
  std::function<void(const ScopedDir& d, const std::string& out)> setup;
  // The command under test.
  std::function<std::vector<std::string>(const ScopedDir& d, const std::string& out)> command;
};

void Must(const std::vector<std::string>& args) {
  auto r = RunPtepack(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

std::vector<Scenario> Scenarios() {
  const std::string ks = FixturePath("keyword_spotting.pte");
  const std::string lin = FixturePath("linear.pte"), lin_ptd = FixturePath("linear.ptd");
  return {
      {"pack",
       [](const ScopedDir& d, const std::string& out) {
         std::ofstream(d / "config2.json") << R"({"segment_alignment": 4096, "constant_tensor_alignment": 64})";
         Must({"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-q", "-o", out + "/add.pte"});
       },
       [](const ScopedDir& d, const std::string& out) {
         return std::vector<std::string>{"pack", d / "config2.json", Testdata("pack/add_spec.json"), "-q",
                                         "-o",   out + "/add.pte"};
       }},
      {"repack",
       [ks](const ScopedDir&, const std::string& out) {
         Must({"repack", ks, "-q", "-o", out + "/m.pte"});
       },
       [ks](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{"repack", ks, "--segment-alignment", "4096", "-q", "-o", out + "/m.pte"};
       }},
      {"repack_in_place",
       [ks](const ScopedDir&, const std::string& out) {
         std::filesystem::copy_file(ks, out + "/m.pte");
         ::chmod((out + "/m.pte").c_str(), 0600);
       },
       [](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{"repack", out + "/m.pte", "--in-place", "--segment-alignment", "1024", "-q"};
       }},
      {"split_program_and_ptd",
       [ks](const ScopedDir&, const std::string& out) {
         Must({"split", ks, "--external-constants", "w", "-q", "-o", out + "/m.pte"});
       },
       [ks](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{
             "split", ks,   "--external-constants", "w", "--ptd-segment-alignment", "4096", "--force",
             "-q",    "-o", out + "/m.pte"};
       }},
      {"extract",
       [](const ScopedDir&, const std::string& out) {
         Must({"extract", FixturePath("add.pte"), "-o", out + "/ex"});
       },
       [lin, lin_ptd](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{"extract", lin, "--ptd", lin_ptd, "-o", out + "/ex", "--force"};
       }},
      {"checksum_manifest",
       [](const ScopedDir&, const std::string& out) {
         Must({"verify", FixturePath("add.pte"), "--checksum", "--write-manifest", out + "/m.json"});
       },
       [lin, lin_ptd](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{
             "verify", lin, "--ptd", lin_ptd, "--allow-legacy-ptd", "--checksum", "--write-manifest", out + "/m.json"};
       }},
      {"bundle_create",
       [](const ScopedDir&, const std::string& out) {
         Must({"bundle", "create", out + "/b.ptebundle", FixturePath("add.pte"), "-q"});
       },
       [lin, lin_ptd](const ScopedDir&, const std::string& out) {
         return std::vector<std::string>{"bundle", "create", out + "/b.ptebundle", lin, lin_ptd, "-q"};
       }},
      {"bundle_extract",
       [lin, lin_ptd](const ScopedDir& d, const std::string& out) {
         Must({"bundle", "create", d / "b.ptebundle", lin, lin_ptd, "-q"});
         std::filesystem::create_directories(out + "/bx");
         std::ofstream(out + "/bx/linear.pte") << "an older linear.pte";
         std::ofstream(out + "/bx/linear.ptd") << "an older linear.ptd";
       },
       [](const ScopedDir& d, const std::string& out) {
         return std::vector<std::string>{"bundle", "extract", d / "b.ptebundle", "-o", out + "/bx", "--force", "-q"};
       }},
  };
}

class CliFault : public ::testing::TestWithParam<size_t> {};

TEST_P(CliFault, EveryFailedOrInterruptedWriteLeavesThePreviousOutputs) {
  const Scenario sc = Scenarios()[GetParam()];
  if (!std::filesystem::exists(FixturePath("linear.pte"))) GTEST_SKIP() << "ExecuTorch fixtures not found";
  ScopedDir d("fault_" + sc.name);
  const std::string out = d / "out";
  std::filesystem::create_directories(out);
  sc.setup(d, out);
  if (HasFatalFailure()) return;
  const Snapshot before = testing::TakeSnapshot(out);
  const auto cmd = sc.command(d, out);

  // A clean run under the shim: how many operations, and the state it leaves.
  const std::string log = d / "count";
  auto clean = RunPtepack(cmd, ShimEnv(0, "fail", log));
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const long total = std::atol(testing::Slurp(log).c_str());
  ASSERT_GT(total, 0) << "the fault shim counted no output operations: is it preloaded?";
  const Snapshot after = testing::TakeSnapshot(out);
  ASSERT_TRUE(before != after) << "the command must change its outputs for this test to mean anything";

  for (long n = 1; n <= total; ++n) {
    SCOPED_TRACE(sc.name + ": operation " + std::to_string(n) + " of " + std::to_string(total));
    testing::RestoreSnapshot(out, before);
    auto r = RunPtepack(cmd, ShimEnv(n, "fail", ""));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
    Snapshot s = testing::TakeSnapshot(out);
    EXPECT_TRUE(s == before) << "before: " << testing::Names(before) << "\nafter:  " << testing::Names(s) << "\n"
                             << r.err;

    testing::RestoreSnapshot(out, before);
    r = RunPtepack(cmd, ShimEnv(n, "signal", ""));
    EXPECT_EQ(r.signal, SIGTERM) << "exit " << r.exit_code << ": " << r.err;
    s = testing::TakeSnapshot(out);
    EXPECT_TRUE(s == before || s == after)
        << "before: " << testing::Names(before) << "\nafter:  " << testing::Names(s) << "\n"
        << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Subcommands, CliFault, ::testing::Range<size_t>(0, 8),
                         [](const ::testing::TestParamInfo<size_t>& i) { return Scenarios()[i.param].name; });

}  // namespace
}  // namespace ptepack
