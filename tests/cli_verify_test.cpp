// `ptepack verify` on a program together with its data files, as ExecuTorch's
// runtime loads them (issue 17 item 6): .ptd entries that differ from the
// program's tensors, keys in two .ptd files, legacy-layout .ptd files,
// --strict, external tensors verified without any .ptd, and the layouts
// `inspect --json` shows for each external tensor. Facts about the fixtures
// are the hand-derived ones of reader_test.cpp ([ptd]: xor.ptd holds
// net.linear.weight FLOAT[10, 2], net.linear.bias FLOAT[10], net.linear2.weight
// FLOAT[2, 10], net.linear2.bias FLOAT[2]; linear.pte's keys are
// linear.weight and linear.bias; linear.ptd is in the legacy layout).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::RunCli;
using testing::RunResult;
using testing::TempDir;

bool Contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(CliVerifyData, PtdOfAnotherProgramWithTheSameKeysDiffersInShape) {
  // Split two programs (keyword_spotting and conv2d_quantized) into .ptd files; their unnamed constants
  // share keys (constant_<index>) but not shapes. The runtime's validateTensorLayout refuses the pair.
  std::string a = TempDir("cli_verify_data_a"), b = TempDir("cli_verify_data_b");
  ASSERT_EQ(RunCli({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "weights", "-q", "-o",
                    a + "/kws.pte"})
                .exit_code,
            0);
  ASSERT_EQ(RunCli({"split", FixturePath("conv2d_quantized.pte"), "--external-constants", "weights", "-q", "-o",
                    b + "/conv.pte"})
                .exit_code,
            0);
  EXPECT_EQ(RunCli({"verify", a + "/kws.pte", "--ptd", a + "/weights.ptd"}).exit_code, 0);
  RunResult r = RunCli({"verify", a + "/kws.pte", "--ptd", b + "/weights.ptd"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "[external-layout-mismatch]")) << r.err;
}

TEST(CliVerifyData, SameKeyInTwoPtdFiles) {
  // MergedDataMap::load refuses duplicate keys.
  RunResult r =
      RunCli({"verify", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd"), "--ptd", FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "net.linear.weight\" is in two .ptd files")) << r.err;
  EXPECT_TRUE(Contains(r.err, "[duplicate-key]")) << r.err;
}

TEST(CliVerifyData, LegacyPtdFailsByDefaultWithAHint) {
  RunResult r = RunCli({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "[legacy-format]")) << r.err;
  EXPECT_TRUE(Contains(r.err, "repack --upgrade-ptd")) << r.err;
  RunResult ok =
      RunCli({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--allow-legacy-ptd"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(Contains(ok.out, "OK (not checked: a legacy-layout .ptd")) << ok.out;
  // --strict: the legacy warning fails again.
  EXPECT_EQ(RunCli({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--allow-legacy-ptd",
                    "--strict"})
                .exit_code,
            1);
  // Upgraded, it verifies without any option.
  std::string dir = TempDir("cli_verify_upgrade");
  ASSERT_EQ(RunCli({"repack", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--upgrade-ptd", "-q",
                    "-o", dir + "/linear.pte"})
                .exit_code,
            0);
  EXPECT_EQ(RunCli({"verify", dir + "/linear.pte", "--ptd", dir + "/linear.ptd", "--strict"}).exit_code, 0);
}

TEST(CliVerifyData, ExternalTensorsWithoutAnyPtd) {
  RunResult r = RunCli({"verify", FixturePath("linear.pte")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "2 external tensors need a .ptd; not checked (keys: linear.weight, linear.bias)"))
      << r.err;
  EXPECT_TRUE(Contains(r.out, "OK (program only: 2 tensor(s) live in a .ptd data file that was not given")) << r.out;
  RunResult s = RunCli({"verify", FixturePath("linear.pte"), "--strict"});
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_TRUE(Contains(s.err, "--strict")) << s.err;
  // A program without external tensors has nothing unchecked.
  RunResult a = RunCli({"verify", FixturePath("arduino_add.pte"), "--strict"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_TRUE(Contains(a.out, ": OK\n")) << a.out;
}

TEST(CliVerifyData, StrictFailsOnWarnings) {
  // module_linear_no_constant_segment keeps its constants in Program.constant_buffer: a warning
  // (runtimes built without ET_ENABLE_DEPRECATED_CONSTANT_BUFFER refuse it).
  const std::string f = FixturePath("module_linear_no_constant_segment.pte");
  RunResult r = RunCli({"verify", f});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "[deprecated-constant-buffer]")) << r.err;
  EXPECT_EQ(RunCli({"verify", f, "--strict"}).exit_code, 1);
  json j = json::parse(RunCli({"verify", f, "--strict", "--json"}).out);
  EXPECT_EQ(j["valid"], false);
  EXPECT_EQ(j["strict"], true);
}

TEST(CliVerifyData, InspectJsonGivesEachExternalTensorAndItsEntry) {
  RunResult r = RunCli({"inspect", "--json", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  bool seen = false;
  for (const auto& e : d["external_tensors"]) {
    if (e["key"] != "net.linear.weight") continue;
    seen = true;
    EXPECT_EQ(e["dtype"], "FLOAT");
    EXPECT_EQ(e["shape"], json::array({10, 2}));
    EXPECT_EQ(e["bytes"], 80);
    ASSERT_TRUE(e.contains("ptd_entry"));
    EXPECT_EQ(e["ptd_entry"]["dtype"], "FLOAT");
    EXPECT_EQ(e["ptd_entry"]["shape"], json::array({10, 2}));
    EXPECT_EQ(e["ptd_entry"]["bytes"], 80);
  }
  EXPECT_TRUE(seen);
}

TEST(CliVerifyFlags, AlignmentsMustBePowersOfTwo) {
  for (const char* flag : {"--segment-alignment", "--tensor-alignment"}) {
    RunResult r = RunCli({"verify", FixturePath("add.pte"), flag, "100"});
    EXPECT_EQ(r.exit_code, 2) << flag << r.err;
    EXPECT_TRUE(Contains(r.err, std::string(flag) + ": must be a power of two from 1 to 1073741824 (found \"100\")"))
        << r.err;
    EXPECT_EQ(RunCli({"verify", FixturePath("add.pte"), flag, "64"}).exit_code, 0) << flag;
  }
}

TEST(CliInspect, SegmentSharedByTwoNamedDataKeysNamesBoth) {
  // Equal blobs are stored once (ExecuTorch's NamedDataStore does the same): two keys, one segment.
  ProgramBuilder b;
  auto& g = b.AddMethod("get_size");
  g.Outputs({static_cast<int32_t>(g.Int(42))});
  std::vector<uint8_t> blob(100, 7);
  b.AddNamedData("first", Bytes::Copy(blob.data(), blob.size()));
  b.AddNamedData("second", Bytes::Copy(blob.data(), blob.size()));
  const std::string path = TempDir("cli_inspect_shared_named") + "/p.pte";
  WritePackage(b.Build(), BackendConfig{}, path);
  RunResult r = RunCli({"inspect", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  ASSERT_EQ(d["named_data"].size(), 2u);
  EXPECT_EQ(d["named_data"][0]["segment"], d["named_data"][1]["segment"]);
  const auto seg = d["named_data"][0]["segment"].get<size_t>();
  ASSERT_LT(seg, d["segments"].size());
  EXPECT_EQ(d["segments"][seg]["role"], "named data \"first\", \"second\"");
}

TEST(CliInspect, SaysTheSegmentAlignmentTheFileWasWrittenWith) {
  // keyword_spotting.pte: eh00 header says program_size 14904, segment_base_offset 14976 (read with
  // python struct at offset 12), one constant segment, ExecuTorch's default segment alignment 128.
  // Repacked at 256 the base is 14904 rounded up to 256 = 15104 (0x3B00), which is not a multiple of
  // 512: the only alignment that reproduces it is 256 (the largest power of two dividing 15104).
  RunResult r = RunCli({"inspect", FixturePath("keyword_spotting.pte"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_EQ(d["config"]["segment_alignment"], 128);
  EXPECT_EQ(d["config"]["reproduces_file_exactly"], true);
  for (const auto& s : d["segments"]) EXPECT_EQ(s["aligned"], true) << s.dump();

  const std::string out = TempDir("cli_inspect_written_with") + "/k256.pte";
  ASSERT_EQ(
      RunCli({"repack", FixturePath("keyword_spotting.pte"), "--segment-alignment", "256", "-q", "-o", out}).exit_code,
      0);
  r = RunCli({"inspect", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "written with: segment alignment 256,")) << r.out;
  EXPECT_TRUE(Contains(r.out, "file offset 15104, size 39216, aligned to the segment alignment 256: constants"))
      << r.out;
  EXPECT_FALSE(Contains(r.out, "NOT aligned")) << r.out;
}

TEST(CliInspect, EmptySegmentAtOffsetZeroHasNoMadeUpAlignment) {
  // add.pte has no extended header and one empty constant segment: offset 0, size 0.
  RunResult r = RunCli({"inspect", FixturePath("add.pte"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  ASSERT_EQ(d["segments"].size(), 1u);
  EXPECT_EQ(d["segments"][0]["file_offset"], 0);
  EXPECT_FALSE(d["segments"][0].contains("alignment")) << d["segments"][0].dump();
  EXPECT_FALSE(Contains(RunCli({"inspect", FixturePath("add.pte")}).out, "9223372036854775808"));
}

TEST(CliInspect, ConfigNotInferredSaysWhy) {
  // A program whose external tensors' data is not given cannot be restored: say so, do not guess.
  RunResult r = RunCli({"inspect", FixturePath("xor.pte")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "written with: ")) << r.out;
}

}  // namespace
}  // namespace ptepack
