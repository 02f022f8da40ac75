// The writing commands end to end: pack, repack, split; every output must
// pass `ptepack verify`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ReadFile;

struct CliResult {
  int code;
  std::string out;
};

CliResult Cli(const std::string& args) {
  std::string cmd = std::string(PTEPACK_CLI) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string Testdata(const std::string& rel) { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/" + rel; }

TEST(CliWrite, PackBuildsAVerifiedProgramFromASpec) {
  std::string dir = testing::TempDir("cli_pack");
  CliResult r = Cli("pack " + Testdata("pack/config.json") + " " + Testdata("pack/add_spec.json") + " -o " + dir +
                    "/add.pte --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_TRUE(summary["verified"].get<bool>());
  EXPECT_EQ(Cli("verify " + dir + "/add.pte").code, 0);
  auto d = nlohmann::json::parse(Cli("inspect --json " + dir + "/add.pte").out);
  EXPECT_EQ(d["methods"][0]["name"], "forward");
  EXPECT_EQ(d["methods"][0]["operators"][0], "aten::add.out");
  EXPECT_TRUE(d["methods"][0]["stacktraces"].get<bool>());  // config.json asks for them
  ASSERT_EQ(d["constants"]["buffers"].size(), 1u);
  EXPECT_EQ(d["constants"]["buffers"][0]["nbytes"], 8);
  // The constant bytes are the spec's [1.0f, 2.0f].
  std::vector<uint8_t> bytes = ReadFile(dir + "/add.pte");
  uint64_t off = d["constants"]["buffers"][0]["file_offset"].get<uint64_t>();
  ASSERT_LE(off + 8, bytes.size());
  const uint8_t want[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40};
  EXPECT_EQ(std::memcmp(bytes.data() + off, want, 8), 0);
}

TEST(CliWrite, PackRejectsABadConfigWithoutWritingAnything) {
  std::string dir = testing::TempDir("cli_pack_bad");
  testing::WriteFile(dir + "/bad.json", std::vector<uint8_t>{'{', '"', 's', 'e', 'g', 'm', 'e', 'n', 't', '_', 'a', 'l',
                                                             'i', 'g', 'n', 'm', 'e', 'n', 't', '"', ':', '3', '}'});
  CliResult r = Cli("pack " + dir + "/bad.json " + Testdata("pack/add_spec.json") + " -o " + dir + "/x.pte");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.pte"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // only bad.json
}

class CliRepack : public ::testing::TestWithParam<const char*> {};

TEST_P(CliRepack, NoChangesGivesTheSameBytesAndNewAlignmentVerifies) {
  std::string name = GetParam();
  std::string ptd = name == "linear" ? "linear.ptd" : (name == "xor" ? "xor.ptd" : "");
  std::string ptd_arg = ptd.empty() ? "" : " --ptd " + FixturePath(ptd);
  std::string dir = testing::TempDir("cli_repack_" + name);
  ASSERT_EQ(Cli("repack " + FixturePath(name + ".pte") + ptd_arg + " -q -o " + dir + "/same.pte").code, 0);
  EXPECT_TRUE(ReadFile(dir + "/same.pte") == ReadFile(FixturePath(name + ".pte")));
  if (!ptd.empty()) {
    EXPECT_TRUE(ReadFile(dir + "/" + ptd) == ReadFile(FixturePath(ptd)));
  }

  std::string dir2 = testing::TempDir("cli_repack4k_" + name);
  CliResult r = Cli("repack " + FixturePath(name + ".pte") + ptd_arg +
                    " -q --segment-alignment 4096 --ptd-segment-alignment 4096 --json -o " + dir2 + "/out.pte");
  ASSERT_EQ(r.code, 0) << r.out;
  std::string out_ptd = ptd.empty() ? "" : " --ptd " + dir2 + "/" + ptd;
  // linear.ptd stays in its legacy layout (no --upgrade-ptd): accepted for older runtimes only.
  EXPECT_EQ(Cli("verify --allow-legacy-ptd --segment-alignment 4096 " + dir2 + "/out.pte" + out_ptd).code, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliRepack,
                         ::testing::Values("add", "arduino_add", "conv2d_quantized", "keyword_spotting", "linear",
                                           "maxpool2d", "module_linear_no_constant_segment", "softmax",
                                           "stories260k_qnn", "xor"));

TEST(CliWrite, RepackUpgradesALegacyPtd) {
  std::string dir = testing::TempDir("cli_upgrade");
  ASSERT_EQ(Cli("repack " + FixturePath("linear.pte") + " --ptd " + FixturePath("linear.ptd") +
                " --upgrade-ptd -q -o " + dir + "/linear.pte")
                .code,
            0);
  auto d = nlohmann::json::parse(Cli("inspect --json " + dir + "/linear.ptd").out);
  EXPECT_EQ(d["layout"], "current");
  EXPECT_TRUE(d["findings"].empty());
  std::map<std::string, uint64_t> sizes;
  for (const auto& e : d["entries"]) sizes[e["key"].get<std::string>()] = e["size"].get<uint64_t>();
  // Exactly the tensors' bytes (FLOAT[3,3] and FLOAT[3]), without the legacy padding.
  EXPECT_EQ(sizes, (std::map<std::string, uint64_t>{{"linear.weight", 36}, {"linear.bias", 12}}));
  EXPECT_EQ(Cli("verify " + dir + "/linear.pte --ptd " + dir + "/linear.ptd").code, 0);
}

TEST(CliWrite, SplitMovesEveryConstantIntoTheTaggedPtd) {
  std::string dir = testing::TempDir("cli_split");
  CliResult r = Cli("split " + FixturePath("keyword_spotting.pte") + " --external-constants weights -q --json -o " +
                    dir + "/kws.pte");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/weights.ptd"));
  EXPECT_EQ(Cli("verify " + dir + "/kws.pte --ptd " + dir + "/weights.ptd").code, 0);
  // Without the .ptd the keys dangle... but only when a .ptd is given is that checked:
  EXPECT_EQ(Cli("verify " + dir + "/kws.pte --ptd " + FixturePath("xor.ptd")).code, 1);

  auto before = nlohmann::json::parse(Cli("inspect --json " + FixturePath("keyword_spotting.pte")).out);
  auto after = nlohmann::json::parse(Cli("inspect --json " + dir + "/kws.pte --ptd " + dir + "/weights.ptd").out);
  size_t constant_tensors = 0;
  for (const auto& b : before["constants"]["buffers"]) constant_tensors += b["tensors"].get<size_t>();
  EXPECT_EQ(after["external_tensors"].size(), constant_tensors);
  for (const auto& e : after["external_tensors"]) EXPECT_TRUE(e["found"].get<bool>()) << e["key"];
  EXPECT_TRUE(after["constants"]["buffers"].empty());
  EXPECT_LT(std::filesystem::file_size(dir + "/kws.pte"),
            std::filesystem::file_size(FixturePath("keyword_spotting.pte")));
}

TEST(CliWrite, RepackRefusesToOverwriteItsInput) {
  std::string dir = testing::TempDir("cli_inplace");
  std::filesystem::copy_file(FixturePath("add.pte"), dir + "/add.pte");
  EXPECT_EQ(Cli("repack " + dir + "/add.pte -q --segment-alignment 256 -o " + dir + "/add.pte").code, 2);
  EXPECT_TRUE(ReadFile(dir + "/add.pte") == ReadFile(FixturePath("add.pte")));
  EXPECT_EQ(Cli("repack " + dir + "/add.pte -q --in-place --segment-alignment 256 -o " + dir + "/add.pte").code, 0);
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// Every regression input the fuzzers found: inspect (text and JSON) must
// report, not crash: exit 0 (valid) or 1 (invalid), never a signal or 2.
TEST(CliInspect, RegressionInputsAreReportedNotCrashedOn) {
  std::string dir = Testdata("regressions");
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".pte" && e.path().extension() != ".ptd") continue;  // JSON: cli_safety_test
    for (const char* mode : {"inspect ", "inspect --json "}) {
      CliResult r = Cli(mode + e.path().string());
      EXPECT_TRUE(r.code == 0 || r.code == 1) << mode << e.path() << " exited " << r.code;
    }
    ++n;
  }
  EXPECT_GE(n, 6u);
}

}  // namespace
}  // namespace ptepack
