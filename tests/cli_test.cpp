// Runs the ptepack binary on the real ExecuTorch fixtures and checks exit codes
// and output. Expected numbers are the hand-derived ones of reader_test.cpp
// (xxd / python3 struct / flatc on the raw bytes), not ptepack's own output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

using testing::RunCli;
using testing::RunResult;

json RunJson(const std::vector<std::string>& args, int want_exit = 0) {
  RunResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, want_exit) << r.err;
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out;
  return j;
}

std::vector<std::string> AllFixtures() {
  std::vector<std::string> out;
  if (!testing::HaveFixtures()) testing::SkipWithoutFixtures();
  for (const auto& e : std::filesystem::directory_iterator(testing::FixturesDir())) {
    std::string ext = e.path().extension().string();
    if (ext == ".pte" || ext == ".ptd" || ext == ".bpte") out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------------------
// inspect --json

TEST(CliInspect, JsonArduinoAdd) {
  json d = RunJson({"inspect", "--json", FixturePath("arduino_add.pte")});
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["format"], "pte");
  EXPECT_EQ(d["size"], 1156);  // stat -c %s
  EXPECT_EQ(d["valid"], true);
  EXPECT_TRUE(d["findings"].empty()) << d["findings"].dump();
  // python3 struct.unpack_from('<4sIQQQ', b, 8): eh00, 32, 1040, 1152, 4
  const json& h = d["header"];
  EXPECT_EQ(h["file_identifier"], "ET12");
  EXPECT_EQ(h["extended_header"]["length"], 32);
  EXPECT_EQ(h["extended_header"]["program_size"], 1040);
  EXPECT_EQ(h["extended_header"]["segment_base_offset"], 1152);
  EXPECT_EQ(h["extended_header"]["segment_data_size"], 4);
  EXPECT_EQ(h["program_size"], 1040);
  // flatc: one plan "forward", 4 values, aten::add.out; segments [{offset 0, size 4}]; offsets [0, 0]
  ASSERT_EQ(d["methods"].size(), 1u);
  EXPECT_EQ(d["methods"][0]["name"], "forward");
  EXPECT_EQ(d["methods"][0]["num_values"], 4);
  EXPECT_EQ(d["methods"][0]["num_instructions"], 1);
  ASSERT_EQ(d["methods"][0]["operators"].size(), 1u);
  EXPECT_NE(d["methods"][0]["operators"][0].get<std::string>().find("aten::add"), std::string::npos);
  ASSERT_EQ(d["segments"].size(), 1u);
  EXPECT_EQ(d["segments"][0]["offset"], 0);
  EXPECT_EQ(d["segments"][0]["size"], 4);
  EXPECT_EQ(d["segments"][0]["file_offset"], 1152);
  EXPECT_EQ(d["segments"][0]["alignment"], 128);  // 1152 = 0x480
  EXPECT_EQ(d["constants"]["count"], 2);
}

TEST(CliInspect, JsonStoriesQnn) {
  json d = RunJson({"inspect", "--json", FixturePath("stories260k_qnn.pte")});
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["size"], 1350144);
  EXPECT_EQ(d["valid"], true);
  EXPECT_EQ(d["header"]["extended_header"]["program_size"], 18688);
  EXPECT_EQ(d["header"]["extended_header"]["segment_base_offset"], 18688);
  EXPECT_EQ(d["header"]["extended_header"]["segment_data_size"], 1331456);
  // flatc: 29 plans; kv_forward / prefill_forward each delegate to QnnBackend, processed in segment 1.
  ASSERT_EQ(d["methods"].size(), 29u);
  EXPECT_EQ(d["methods"][0]["name"], "kv_forward");
  EXPECT_EQ(d["methods"][1]["name"], "prefill_forward");
  EXPECT_EQ(d["methods"][28]["name"], "get_kv_output_9_quant_attr");
  for (int i = 0; i < 2; ++i) {
    const json& m = d["methods"][i];
    EXPECT_EQ(m["num_values"], 24);
    EXPECT_EQ(m["inputs"].size(), 13u);
    EXPECT_EQ(m["outputs"].size(), 11u);
    EXPECT_TRUE(m["operators"].empty());
    ASSERT_EQ(m["delegates"].size(), 1u);
    const json& dl = m["delegates"][0];
    EXPECT_EQ(dl["backend_id"], "QnnBackend");
    EXPECT_EQ(dl["location"], "segment");
    EXPECT_EQ(dl["index"], 1);
    EXPECT_EQ(dl["file_offset"], 18688);
    EXPECT_EQ(dl["size"], 1331456);
    EXPECT_EQ(dl["compile_specs"], 1);
  }
  for (size_t i = 2; i < 29; ++i) EXPECT_TRUE(d["methods"][i]["delegates"].empty()) << i;
  // flatc: segments [{0, 0}, {0, 1331456}]
  ASSERT_EQ(d["segments"].size(), 2u);
  EXPECT_EQ(d["segments"][0]["size"], 0);
  EXPECT_EQ(d["segments"][1]["offset"], 0);
  EXPECT_EQ(d["segments"][1]["file_offset"], 18688);
  EXPECT_EQ(d["segments"][1]["size"], 1331456);
  EXPECT_EQ(d["segments"][1]["alignment"], 256);  // 18688 = 0x4900
}

TEST(CliInspect, JsonXorWithPtd) {
  json d = RunJson({"inspect", "--json", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")});
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["valid"], true);
  // struct.unpack_from('<4sIQQ', b, 8): eh00, 24, 13704, 13824 -- the old header, no segment_data_size
  const json& e = d["header"]["extended_header"];
  EXPECT_EQ(e["length"], 24);
  EXPECT_EQ(e["program_size"], 13704);
  EXPECT_EQ(e["segment_base_offset"], 13824);
  EXPECT_FALSE(e.contains("segment_data_size"));
  ASSERT_EQ(d["methods"].size(), 4u);
  EXPECT_EQ(d["methods"][0]["name"], "forward");
  EXPECT_EQ(d["methods"][0]["num_values"], 155);
  EXPECT_EQ(d["methods"][0]["operators"].size(), 23u);
  EXPECT_EQ(d["methods"][0]["num_instructions"], 66);
  // flatc: four EXTERNAL tensors, all named in xor.ptd
  ASSERT_EQ(d["external_tensors"].size(), 4u);
  for (const auto& t : d["external_tensors"]) {
    EXPECT_EQ(t["found"], true) << t.dump();
  }
  EXPECT_EQ(d["external_tensors"][0]["key"], "net.linear.weight");
}

// ---------------------------------------------------------------------------
// inspect on .ptd files

TEST(CliInspect, PtdText) {
  for (const char* f : {"linear.ptd", "xor.ptd"}) {
    RunResult r = RunCli({"inspect", FixturePath(f)});
    // linear.ptd's legacy layout is explained, and judged as verify judges it (issue 24 item 4).
    EXPECT_EQ(r.exit_code, std::string(f) == "linear.ptd" ? 1 : 0) << f << "\n" << r.err;
    EXPECT_FALSE(r.out.empty()) << f;
  }
  RunResult lin = RunCli({"inspect", FixturePath("linear.ptd")});
  EXPECT_NE(lin.out.find("linear.weight"), std::string::npos) << lin.out;
  EXPECT_NE(lin.out.find("linear.bias"), std::string::npos) << lin.out;
  RunResult x = RunCli({"inspect", FixturePath("xor.ptd")});
  EXPECT_NE(x.out.find("net.linear2.bias"), std::string::npos) << x.out;
}

TEST(CliInspect, PtdJson) {
  json lin = RunJson({"inspect", "--json", FixturePath("linear.ptd")}, /*want_exit=*/1);
  ASSERT_TRUE(lin.is_object());
  EXPECT_EQ(lin["format"], "ptd");
  EXPECT_EQ(lin["size"], 336);
  EXPECT_EQ(lin["valid"], false);  // the legacy layout: verify's verdict (without --allow-legacy-ptd)
  EXPECT_NE(lin["layout"].get<std::string>().find("legacy"), std::string::npos);
  // struct.unpack_from('<IQQQQ', b, 12): 40, 48, 224, 272, 64
  EXPECT_EQ(lin["header"]["flatbuffer_offset"], 48);
  EXPECT_EQ(lin["header"]["segment_base_offset"], 272);
  ASSERT_EQ(lin["entries"].size(), 2u);
  EXPECT_EQ(lin["entries"][0]["key"], "linear.weight");
  EXPECT_EQ(lin["entries"][0]["sizes"], json({3, 3}));

  json x = RunJson({"inspect", "--json", FixturePath("xor.ptd")});
  ASSERT_TRUE(x.is_object());
  EXPECT_EQ(x["size"], 760);
  EXPECT_EQ(x["layout"], "current");
  EXPECT_EQ(x["header"]["segment_base_offset"], 544);
  ASSERT_EQ(x["segments"].size(), 4u);
  ASSERT_EQ(x["entries"].size(), 4u);
  EXPECT_EQ(x["entries"][3]["key"], "net.linear2.bias");
}

// ---------------------------------------------------------------------------
// verify

TEST(CliVerify, EveryFixture) {
  std::vector<std::string> files = AllFixtures();
  ASSERT_EQ(files.size(), 13u);  // 10 .pte, 2 .ptd, 1 .bpte
  for (const auto& f : files) {
    RunResult r = RunCli({"verify", FixturePath(f)});
    // linear.ptd is in the FlatTensor layout of before June 2025, which current runtimes cannot
    // load (accepted with --allow-legacy-ptd). Every other real .pte / .ptd / .bpte is valid.
    int want = f == "linear.ptd" ? 1 : 0;
    EXPECT_EQ(r.exit_code, want) << f << "\n" << r.err;
    if (want == 0) {
      EXPECT_NE(r.out.find("OK"), std::string::npos) << f << ": " << r.out;
    }
  }
}

TEST(CliVerify, BundledProgramMessage) {
  // Recognised by its identifier and checked as a BundledProgram (tests/bpte_test.cpp).
  RunResult r = RunCli({"verify", FixturePath("bundled_program.bpte")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OK (BundledProgram: 1 method test suite(s), 10 test case(s))"), std::string::npos) << r.out;
}

TEST(CliVerify, ProgramWithItsPtd) {
  EXPECT_EQ(
      RunCli({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--allow-legacy-ptd"}).exit_code,
      0);
  EXPECT_EQ(RunCli({"verify", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")}).exit_code, 0);
  // The keys of one model are not in the other's data file.
  RunResult r = RunCli({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dangling-external-key"), std::string::npos) << r.err;
}

TEST(CliVerify, TruncatedCopiesFail) {
  std::string dir = TempDir("cli_truncated");
  for (const auto& f : AllFixtures()) {
    if (f == "bundled_program.bpte") continue;
    std::vector<uint8_t> b = ReadFile(FixturePath(f));
    b.resize(b.size() / 2);
    std::string path = dir + "/" + f;
    WriteFile(path, b);
    RunResult r = RunCli({"verify", path});
    EXPECT_EQ(r.exit_code, 1) << f << " cut to " << b.size() << " bytes\n" << r.out << r.err;
  }
}

TEST(CliVerify, OneByteShortReportsTruncated) {
  // arduino_add.pte: segment_base_offset 1152 + segment_data_size 4 = 1156 = file size; drop the last byte.
  std::string dir = TempDir("cli_one_short");
  std::vector<uint8_t> b = ReadFile(FixturePath("arduino_add.pte"));
  ASSERT_EQ(b.size(), 1156u);
  b.pop_back();
  WriteFile(dir + "/arduino_add.pte", b);
  json j = RunJson({"verify", "--json", dir + "/arduino_add.pte"}, 1);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["valid"], false);
  bool truncated = false;
  for (const auto& f : j["findings"]) truncated = truncated || f["code"] == "truncated";
  EXPECT_TRUE(truncated) << j.dump(2);

  // xor.ptd: 544 + 216 = 760 = file size.
  std::vector<uint8_t> p = ReadFile(FixturePath("xor.ptd"));
  ASSERT_EQ(p.size(), 760u);
  p.pop_back();
  WriteFile(dir + "/xor.ptd", p);
  EXPECT_EQ(RunCli({"verify", dir + "/xor.ptd"}).exit_code, 1);
}

// ---------------------------------------------------------------------------
// --help

TEST(CliHelp, MentionsEverySubcommand) {
  RunResult r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* sub : {"inspect", "verify", "pack", "repack", "split", "extract"}) {
    // A line of the "Subcommands:" list starts with the name ("pack" must not just match "repack").
    EXPECT_NE(r.out.find("\n  " + std::string(sub) + " "), std::string::npos) << sub << " missing from --help:\n"
                                                                              << r.out;
  }
}

}  // namespace
}  // namespace ptepack
