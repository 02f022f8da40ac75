// `ptepack repack` with no layout flags says whether it reproduced its input
// byte for byte, and where not, the first differing offset and what the
// input holds there; `--expect-identical` makes a difference exit 3.
//
// The differences are made by hand in bytes a writer never sets: the zero
// padding after a string's terminator inside the flatbuffer (a FlatBuffers
// string's length prefix is 4-aligned, so "aten::add" + NUL ends 2 bytes
// before the next 4-aligned object), and the zero padding between the end
// of the program (eh00 program_size) and the first segment (eh00
// segment_base_offset). Neither is read by a loader, so the files stay valid.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;
using testing::WriteFile;

uint64_t U64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

TEST(RepackIdentity, EveryFixtureIsReproducedAndSaysSo) {
  std::string dir = TempDir("repack_identity");
  int n = 0;
  for (std::string name : testing::PteFixtures()) {
    name = name.substr(0, name.size() - 4);  // without ".pte"
    SCOPED_TRACE(name);
    std::vector<std::string> args = {"repack", FixturePath(name + ".pte")};
    if (std::filesystem::exists(FixturePath(name + ".ptd"))) {
      args.insert(args.end(), {"--ptd", FixturePath(name + ".ptd")});
    }
    args.insert(args.end(), {"--expect-identical", "--json", "-o", dir + "/" + name + ".pte"});
    auto r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["identity"]["identical"], true) << r.out;
    EXPECT_TRUE(j["identity"]["differences"].empty());
    EXPECT_TRUE(ReadFile(dir + "/" + name + ".pte") == ReadFile(FixturePath(name + ".pte")));
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(RepackIdentity, FlatbufferDifferenceIsLocatedAndExpectIdenticalWritesNothing) {
  std::vector<uint8_t> b = ReadFile(FixturePath("add.pte"));
  const std::string op = std::string("aten::add") + '\0';
  auto it = std::search(b.begin(), b.end(), op.begin(), op.end());
  ASSERT_NE(it, b.end());
  const uint64_t pad = static_cast<uint64_t>(it - b.begin()) + op.size();
  ASSERT_EQ((pad - 4) % 4, 2u);  // 4-aligned length prefix + 10 bytes: 2 padding bytes follow
  ASSERT_EQ(b[pad], 0);
  b[pad] = 0x5a;
  std::string dir = TempDir("repack_identity_fb");
  WriteFile(dir + "/in.pte", b);
  ASSERT_EQ(RunCli({"verify", dir + "/in.pte"}).exit_code, 0);

  auto r = RunCli({"repack", dir + "/in.pte", "--json", "-o", dir + "/out.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out)["identity"];
  EXPECT_EQ(d["identical"], false);
  ASSERT_EQ(d["differences"].size(), 1u);
  EXPECT_EQ(d["differences"][0]["offset"], pad);
  EXPECT_EQ(d["differences"][0]["region"], "flatbuffer");
  EXPECT_EQ(d["differences"][0]["input_size"], b.size());
  EXPECT_EQ(d["differences"][0]["output_size"], b.size());
  EXPECT_NE(r.err.find("first difference at offset " + std::to_string(pad) + " (flatbuffer)"), std::string::npos)
      << r.err;

  r = RunCli({"repack", dir + "/in.pte", "--expect-identical", "--json", "-o", dir + "/strict.pte"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/strict.pte"));
  json e = json::parse(r.out)["error"];
  EXPECT_EQ(e["code"], "not-identical");
  EXPECT_EQ(e["offset"], pad);
  EXPECT_EQ(e["exit_code"], 3);
  EXPECT_NE(r.err.find("[not-identical]"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
}

// Issue 24 item 17: a difference only in padding (found before, not after,
// writing) is an exit 3 that leaves nothing behind.
TEST(RepackIdentity, PaddingDifferenceIsNamedAndNothingIsWritten) {
  std::vector<uint8_t> b = ReadFile(FixturePath("arduino_add.pte"));
  ASSERT_EQ(std::string(b.begin() + 8, b.begin() + 12), "eh00");
  const uint64_t program_size = U64(b, 16), base = U64(b, 24);
  ASSERT_LT(program_size, base);
  ASSERT_EQ(b[program_size], 0);
  b[program_size] = 0xab;
  std::string dir = TempDir("repack_identity_pad");
  WriteFile(dir + "/in.pte", b);

  auto r = RunCli({"repack", dir + "/in.pte", "--expect-identical", "--json", "-o", dir + "/out.pte"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  json e = json::parse(r.out)["error"];
  EXPECT_EQ(e["offset"], program_size);
  EXPECT_NE(e["message"].get<std::string>().find("(padding)"), std::string::npos) << e.dump();
  // Exit 3: no output, and no temporary file beside it.
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.pte"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  // Without --expect-identical the file is written (zero padded) and the difference named.
  r = RunCli({"repack", dir + "/in.pte", "--json", "-o", dir + "/out.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["identity"]["differences"][0]["offset"], program_size);
  std::vector<uint8_t> out = ReadFile(dir + "/out.pte");
  ASSERT_EQ(out.size(), b.size());
  EXPECT_EQ(out[program_size], 0);
}

// The same for a .ptd: a padding byte of xor.ptd differs; the .pte is
// identical. xor.ptd's segment 1 (net.linear.bias, 40 bytes at 624) ends at
// 664 and segment 2 starts at 672 (`ptepack inspect xor.ptd`): 8 bytes of
// padding that nothing reads.
TEST(RepackIdentity, PtdPaddingDifferenceWritesNothing) {
  std::vector<uint8_t> ptd = ReadFile(FixturePath("xor.ptd"));
  ASSERT_EQ(ptd.size(), 760u);
  for (size_t i = 664; i < 672; ++i) ASSERT_EQ(ptd[i], 0) << i;
  ptd[666] = 0x77;
  std::string dir = TempDir("repack_identity_ptd_pad");
  std::filesystem::create_directories(dir + "/in");
  WriteFile(dir + "/in/xor.pte", ReadFile(FixturePath("xor.pte")));
  WriteFile(dir + "/in/xor.ptd", ptd);
  ASSERT_EQ(RunCli({"verify", dir + "/in/xor.pte", "--ptd", dir + "/in/xor.ptd"}).exit_code, 0);
  std::filesystem::create_directories(dir + "/out");
  auto r = RunCli({"repack", dir + "/in/xor.pte", "--ptd", dir + "/in/xor.ptd", "--expect-identical", "--json", "-o",
                   dir + "/out/xor.pte"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  json e = json::parse(r.out)["error"];
  EXPECT_EQ(e["offset"], 666);
  EXPECT_EQ(e["file"], dir + "/in/xor.ptd");
  EXPECT_NE(e["message"].get<std::string>().find("(padding)"), std::string::npos) << e.dump();
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/out"));
}

// Issue 24 item 16: a .ptd beside its program, repacked into the same
// folder. Unchanged: kept as it is and said so. Changed: the new .ptd is
// named after the output; the input .ptd is left alone.
TEST(RepackIdentity, PtdBesideTheOutputIsKeptOrNamedAfterIt) {
  std::string dir = TempDir("repack_ptd_same_folder");
  WriteFile(dir + "/xor.pte", ReadFile(FixturePath("xor.pte")));
  WriteFile(dir + "/xor.ptd", ReadFile(FixturePath("xor.ptd")));
  struct stat before {};
  ASSERT_EQ(::stat((dir + "/xor.ptd").c_str(), &before), 0);

  auto r = RunCli({"repack", dir + "/xor.pte", "--ptd", dir + "/xor.ptd", "-o", dir + "/xor2.pte", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["identity"]["identical"], true) << r.out;
  ASSERT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"][1]["path"], dir + "/xor.ptd");
  EXPECT_EQ(j["files"][1]["kept"], true);
  EXPECT_TRUE(ReadFile(dir + "/xor2.pte") == ReadFile(FixturePath("xor.pte")));
  struct stat after {};
  ASSERT_EQ(::stat((dir + "/xor.ptd").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // not rewritten
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  r = RunCli({"repack", dir + "/xor.pte", "--ptd", dir + "/xor.ptd", "-o", dir + "/xor3.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kept " + dir + "/xor.ptd as it was"), std::string::npos) << r.err;
  EXPECT_EQ(RunCli({"verify", dir + "/xor2.pte", "--ptd", dir + "/xor.ptd"}).exit_code, 0);

  // A layout change rewrites the .ptd: linear.ptd (legacy layout) upgraded
  // becomes linear2.ptd beside linear2.pte; linear.ptd is left alone.
  WriteFile(dir + "/linear.pte", ReadFile(FixturePath("linear.pte")));
  WriteFile(dir + "/linear.ptd", ReadFile(FixturePath("linear.ptd")));
  r = RunCli({"repack", dir + "/linear.pte", "--ptd", dir + "/linear.ptd", "--upgrade-ptd", "-o", dir + "/linear2.pte",
              "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"][1]["path"], dir + "/linear2.ptd");
  EXPECT_FALSE(j["files"][1].contains("kept"));
  EXPECT_TRUE(ReadFile(dir + "/linear.ptd") == ReadFile(FixturePath("linear.ptd")));
  EXPECT_EQ(RunCli({"verify", dir + "/linear2.pte", "--ptd", dir + "/linear2.ptd"}).exit_code, 0);
  // --in-place still rewrites the input .ptd in place.
  r = RunCli({"repack", dir + "/linear.pte", "--ptd", dir + "/linear.ptd", "--upgrade-ptd", "--in-place"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ReadFile(dir + "/linear.ptd") == ReadFile(dir + "/linear2.ptd"));
}

TEST(RepackIdentity, ExpectIdenticalWithALayoutChangeIsAUsageError) {
  std::string dir = TempDir("repack_identity_usage");
  auto r = RunCli(
      {"repack", FixturePath("add.pte"), "--segment-alignment", "256", "--expect-identical", "-o", dir + "/x.pte"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.pte"));
  EXPECT_NE(r.err.find("config was changed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// add.pte has no delegates and no extended header: neither extraction nor
// the delegate alignment shows in it. inspect says so, with the value chosen.
TEST(InferredConfigAmbiguity, InspectNamesWhatTheFileCannotTell) {
  auto r = testing::RunCli({"inspect", "--json", testing::FixturePath("add.pte")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json cfg = nlohmann::json::parse(r.out)["config"];
  EXPECT_EQ(cfg["reproduces_file_exactly"], true);
  std::map<std::string, nlohmann::json> by_field;
  for (const auto& a : cfg["ambiguous"]) by_field[a["field"].get<std::string>()] = a;
  ASSERT_TRUE(by_field.count("extract_delegate_segments")) << cfg.dump();
  EXPECT_EQ(by_field["extract_delegate_segments"]["chosen"], "true");
  EXPECT_EQ(by_field["extract_delegate_segments"]["why"], "no delegates");
  EXPECT_EQ(by_field["extract_delegate_segments"]["fits"]["values"], nlohmann::json::array({"true", "false"}));
  ASSERT_TRUE(by_field.count("delegate_alignment")) << cfg.dump();
  EXPECT_EQ(by_field["delegate_alignment"]["chosen"], "16");  // ExecuTorch's schema default
  EXPECT_LE(by_field["delegate_alignment"]["fits"]["min"].get<uint64_t>(), 16u);
  EXPECT_GE(by_field["delegate_alignment"]["fits"]["max"].get<uint64_t>(), 16u);
  auto t = testing::RunCli({"inspect", testing::FixturePath("add.pte"), "--verbose"});
  EXPECT_NE(t.out.find("    extract_delegate_segments: true or false (true chosen); no delegates"), std::string::npos)
      << t.out;
}

}  // namespace
}  // namespace ptepack
