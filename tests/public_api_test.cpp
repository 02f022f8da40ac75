// The public API (include/ptepack/*.h) used as a consumer uses it: only
// <ptepack/ptepack.h>. Real ExecuTorch fixtures are the reference: repack with
// no edit must give back their bytes, and the API's JSON must be what the
// CLI prints.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ptepack/ptepack.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;

TEST(PublicApi, VersionMatchesTheCli) {
  EXPECT_STREQ(Version(), PTEPACK_VERSION_STRING);
  auto r = RunCli({"--version"});
  EXPECT_EQ(r.out, std::string("ptepack ") + PTEPACK_VERSION_STRING + "\n");
}

TEST(PublicApi, VerifyAndInspectJsonAreTheCliOutput) {
  for (const std::string name : {"linear.pte", "xor.pte", "add.pte"}) {
    const std::string pte = FixturePath(name);
    const std::string ptd = FixturePath(name.substr(0, name.size() - 4) + ".ptd");
    const bool has_ptd = name != "add.pte";
    VerifyOptions o;
    std::vector<std::string> args = {"verify", pte, "--json"};
    if (has_ptd) {
      o.ptd = {ptd};
      o.allow_legacy_ptd = true;
      args.insert(args.end(), {"--ptd", ptd, "--allow-legacy-ptd"});
    }
    auto cli = RunCli(args);
    EXPECT_EQ(nlohmann::json::parse(VerifyJson(pte, o)), nlohmann::json::parse(cli.out)) << name;
    VerifyResult v = Verify(pte, o);
    EXPECT_EQ(v.valid, cli.exit_code == 0) << name;
    EXPECT_EQ(v.findings.size(), nlohmann::json::parse(cli.out)["findings"].size()) << name;
    args[0] = "inspect";  // with the same --allow-legacy-ptd: one verdict
    auto ins = RunCli(args);
    EXPECT_EQ(nlohmann::json::parse(InspectJson(pte, o)), nlohmann::json::parse(ins.out)) << name;
  }
}

TEST(PublicApi, VerifyFindsALocatedErrorInACorruptFile) {
  std::vector<uint8_t> bytes = ReadFile(FixturePath("add.pte"));
  bytes.resize(bytes.size() / 2);  // the flatbuffer now ends past the file
  const std::string path = TempDir("public_api_corrupt") + "/half.pte";
  testing::WriteFile(path, bytes);
  VerifyResult v = Verify(path);
  EXPECT_FALSE(v.valid);
  ASSERT_FALSE(v.findings.empty());
  EXPECT_EQ(v.findings[0].file, path);
  EXPECT_EQ(v.findings[0].severity, Finding::Severity::kError);
}

TEST(PublicApi, VerifyOfAMissingFileThrows) { EXPECT_THROW(Verify("/nonexistent/dir/model.pte"), Error); }

TEST(PublicApi, RepackWithoutEditReproducesRealFilesByteForByte) {
  const std::string dir = TempDir("public_api_repack");
  for (const std::string name : {"add.pte", "conv2d_quantized.pte", "keyword_spotting.pte"}) {
    RepackResult r = Repack(FixturePath(name), dir + "/" + name);
    EXPECT_TRUE(r.input_reproducible) << name;
    EXPECT_EQ(ReadFile(dir + "/" + name), ReadFile(FixturePath(name))) << name;
    EXPECT_EQ(r.written.pte.size, ReadFile(FixturePath(name)).size()) << name;
  }
}

TEST(PublicApi, RepackEditChangesTheLayoutAndTheCliAgrees) {
  const std::string dir = TempDir("public_api_repack_edit");
  RepackOptions o;
  o.edit = [](BackendConfig& c) { c.segment_alignment = 4096; };
  RepackResult r = Repack(FixturePath("add.pte"), dir + "/api.pte", o);
  EXPECT_EQ(r.config.segment_alignment, 4096u);
  auto cli = RunCli({"repack", FixturePath("add.pte"), "-o", dir + "/cli.pte", "--segment-alignment", "4096"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(ReadFile(dir + "/api.pte"), ReadFile(dir + "/cli.pte"));
}

TEST(PublicApi, RepackOfAProgramWithoutItsPtdNamesTheMissingData) {
  const std::string dir = TempDir("public_api_missing_ptd");
  try {
    Repack(FixturePath("linear.pte"), dir + "/out.pte");
    FAIL() << "repack without the .ptd succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "missing-ptd");
    EXPECT_NE(std::string(e.what()).find("--ptd"), std::string::npos) << e.what();
  }
}

TEST(PublicApi, SplitMovesConstantsToAPtdThatVerifies) {
  const std::string dir = TempDir("public_api_split");
  SplitOptions o;
  o.tag = "weights";
  RepackResult r = Split(FixturePath("add.pte"), dir + "/add.pte", o);
  // add.pte has no constants besides the placeholder: nothing to move.
  EXPECT_TRUE(r.written.ptds.empty());
  r = Split(FixturePath("conv2d_quantized.pte"), dir + "/conv.pte", o);
  ASSERT_EQ(r.written.ptds.size(), 1u);
  EXPECT_EQ(r.written.ptds[0].path, dir + "/weights.ptd");
  VerifyOptions vo;
  vo.ptd = {dir + "/weights.ptd"};
  VerifyResult v = Verify(dir + "/conv.pte", vo);
  EXPECT_TRUE(v.valid);
  const std::string cli_dir = TempDir("public_api_split_cli");
  auto cli = RunCli(
      {"split", FixturePath("conv2d_quantized.pte"), "--external-constants", "weights", "-o", cli_dir + "/conv.pte"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(ReadFile(dir + "/conv.pte"), ReadFile(cli_dir + "/conv.pte"));
  EXPECT_EQ(ReadFile(dir + "/weights.ptd"), ReadFile(cli_dir + "/weights.ptd"));
}

TEST(PublicApi, ConfigJsonStringRoundTripsAndNamesBadFields) {
  BackendConfig c;
  c.segment_alignment = 64;
  c.emit_stacktrace = true;
  BackendConfig back = BackendConfig::FromJsonString(c.ToJsonString());
  EXPECT_EQ(back.segment_alignment, 64u);
  EXPECT_TRUE(back.emit_stacktrace);
  try {
    BackendConfig::FromJsonString(R"({"segment_alignment": 100})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "bad-config");
    EXPECT_NE(std::string(e.what()).find("segment_alignment"), std::string::npos);
  }
  EXPECT_THROW(BackendConfig::FromJsonString("{"), Error);
  EXPECT_THROW(BackendConfig::FromJsonString(std::string(300, '[') + std::string(300, ']')), Error);
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// Issue 24 item 19: ProgramBuilder hands out and takes one index type, so
// `auto x = m.Tensor(...)` goes into `m.Inputs({x})` and the instruction
// argument lists with no narrowing: clang++ refused it (error) and g++
// warned (-Wnarrowing) while the builder returned uint32_t and took int32_t.
// Each installed compiler checks a snippet against include/ with -Werror.
TEST(PublicApi, BuilderIndicesNeedNoConversion) {
  const std::string dir = testing::TempDir("builder_indices");
  const std::string src = dir + "/auto_indices.cpp";
  std::ofstream(src) << R"(#include <ptepack/program_builder.h>
void Build() {
  ptepack::ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  auto x = m.Tensor({ptepack::ScalarType::kFloat, {4}, ptepack::PlannedLocation{1, 0}});
  auto w = m.ConstantTensor({ptepack::ScalarType::kFloat, {4}}, ptepack::Bytes{}, "w");
  auto y = m.Tensor({ptepack::ScalarType::kFloat, {4}, ptepack::PlannedLocation{1, 16}});
  auto one = m.Int(1);
  auto list = m.TensorList({x, w});
  auto op = m.Operator("aten::add", "out");
  m.KernelCall(op, {x, w, one, y, list});
  auto d = m.Delegate("Backend", ptepack::Bytes{});
  m.DelegateCall(d, {y, y});
  m.Move(x, y);
  m.JumpFalse(one, 0);
  m.Free(y);
  m.Inputs({x});
  m.Outputs({y});
  m.OptionalTensorList({x, -1});
}
)";
  int compilers = 0;
  for (const char* cxx : {"g++", "clang++"}) {
    if (std::system((std::string("command -v ") + cxx + " >/dev/null 2>&1").c_str()) != 0) continue;
    ++compilers;
    const std::string log = dir + "/" + cxx + ".log";
    const std::string cmd = std::string(cxx) + " -std=c++17 -fsyntax-only -Wall -Wextra -Werror -I" +
                            testing::ShellQuote(std::string(PTEPACK_SOURCE_DIR) + "/include") + " " +
                            testing::ShellQuote(src) + " >" + testing::ShellQuote(log) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    const std::vector<uint8_t> diag = testing::ReadFile(log);
    EXPECT_EQ(rc, 0) << cxx << ":\n" << std::string(diag.begin(), diag.end());
  }
  if (compilers == 0) GTEST_SKIP() << "neither g++ nor clang++ on PATH";
}

}  // namespace
}  // namespace ptepack
