// Data safety of the writing commands and hostile inputs of the CLI (issue
// "never destroy a good file, never hang, never crash"): a failing write never
// replaces a good output, --in-place keeps the file's mode, symlinks and name
// collisions are refused before anything is written, existing .ptd files of
// other programs are not replaced without --force, extract never mixes old
// and new files, FIFOs are refused instead of hanging, deeply nested JSON is
// refused instead of crashing, and `zeros` sizes are checked and streamed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace fs = std::filesystem;
using testing::FixturePath;
using testing::RunPtepack;
using testing::ScopedDir;
using testing::Slurp;

std::string Testdata(const std::string& rel) { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/" + rel; }

bool HaveFixtures() { return fs::exists(FixturePath("keyword_spotting.pte")); }
#define NEED_FIXTURES() \
  if (!HaveFixtures()) GTEST_SKIP() << "ExecuTorch fixtures not found at " << FixturePath("")

// One line per error, naming the file, with no raw library exception text.
void ExpectLocatedError(const testing::Run& r, const std::string& file, const std::string& code) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[" + code + "]"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
}

nlohmann::json AddSpec() { return nlohmann::json::parse(Slurp(Testdata("pack/add_spec.json"))); }

void WriteJson(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(); }

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Data loss

TEST(CliSafety, PackOfAnInvalidProgramLeavesThePreviousOutput) {
  ScopedDir d("safety_pack_invalid");
  ASSERT_EQ(
      RunPtepack({"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-q", "-o", d / "add.pte"})
          .exit_code,
      0);
  const std::string good = Slurp(d / "add.pte");
  // Output value index 99 of a method with 4 values: ExecuTorch's runtime
  // rejects it, and so must the writer, before the rename.
  nlohmann::json spec = AddSpec();
  spec["program"]["execution_plan"][0]["outputs"] = {99};
  spec["program"]["execution_plan"][0]["chains"][0]["outputs"] = {99};
  fs::create_directories(d / "in");
  WriteJson(d / "in/bad.json", spec);
  auto r = RunPtepack({"pack", Testdata("pack/config.json"), d / "in/bad.json", "-o", d / "add.pte"});
  ExpectLocatedError(r, d / "add.pte", "output-invalid");
  EXPECT_NE(r.err.find("nothing was written"), std::string::npos) << r.err;
  EXPECT_EQ(Slurp(d / "add.pte"), good);
  EXPECT_EQ(Entries(d.path()), (std::vector<std::string>{"add.pte", "in"}));
}

TEST(LibrarySafety, WritePackageRefusesWhatTheReaderRejects) {
  ScopedDir d("safety_lib");
  struct Case {
    const char* what;
    std::function<void(ProgramBuilder::Method&, uint32_t x, uint32_t y, uint32_t op)> build;
  };
  const std::vector<Case> cases = {
      {"kernel argument past the values",
       [](ProgramBuilder::Method& m, uint32_t x, uint32_t, uint32_t op) {
         m.KernelCall(op, {static_cast<int32_t>(x), 57});
       }},
      {"output index out of range",
       [](ProgramBuilder::Method& m, uint32_t x, uint32_t y, uint32_t op) {
         m.KernelCall(op, {static_cast<int32_t>(x), static_cast<int32_t>(y)});
         m.Outputs({42});
       }},
      {"planned tensor past its arena",
       [](ProgramBuilder::Method& m, uint32_t x, uint32_t, uint32_t op) {
         uint32_t z = m.Tensor({ScalarType::kFloat, {64}, PlannedLocation{1, 4096}});
         m.KernelCall(op, {static_cast<int32_t>(x), static_cast<int32_t>(z)});
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
    uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
    uint32_t op = m.Operator("aten::relu", "out");
    m.Inputs({static_cast<int32_t>(x)});
    m.Outputs({static_cast<int32_t>(y)});
    m.PlannedBufferSizes({0, 32});
    c.build(m, x, y, op);
    const std::string out = d / "m.pte";
    std::ofstream(out) << "previous";
    try {
      WritePackage(b.Build(), BackendConfig{}, out);
      ADD_FAILURE() << "an invalid program was written";
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "output-invalid") << e.what();
      EXPECT_EQ(e.finding().file, out);
      EXPECT_TRUE(e.finding().offset.has_value()) << e.what();
    }
    EXPECT_EQ(Slurp(out), "previous");
    EXPECT_EQ(Entries(d.path()), (std::vector<std::string>{"m.pte"}));
  }
}

TEST(CliSafety, InPlaceKeepsTheModeAndNeedsNoOutput) {
  NEED_FIXTURES();
  ScopedDir d("safety_inplace");
  const std::string f = d / "m.pte";
  fs::copy_file(FixturePath("keyword_spotting.pte"), f);
  ASSERT_EQ(::chmod(f.c_str(), 0600), 0);
  auto r = RunPtepack({"repack", f, "--in-place", "--segment-alignment", "4096", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_NE(Slurp(f), Slurp(FixturePath("keyword_spotting.pte")));
  EXPECT_EQ(RunPtepack({"verify", f, "--segment-alignment", "4096"}).exit_code, 0);
  // Without --in-place, a missing -o is a usage error, not a guess.
  r = RunPtepack({"repack", f});
  ExpectLocatedError(r, "-o", "usage");
}

TEST(CliSafety, ASymlinkOutputIsRefusedAndLeftAlone) {
  NEED_FIXTURES();
  ScopedDir d("safety_symlink");
  std::ofstream(d / "target.pte") << "someone else's file";
  fs::create_symlink("target.pte", d / "link.pte");
  auto r = RunPtepack({"repack", FixturePath("add.pte"), "-o", d / "link.pte"});
  ExpectLocatedError(r, d / "link.pte", "output-symlink");
  EXPECT_NE(r.err.find("target.pte"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_symlink(d / "link.pte"));
  EXPECT_EQ(Slurp(d / "target.pte"), "someone else's file");
  EXPECT_EQ(Entries(d.path()), (std::vector<std::string>{"link.pte", "target.pte"}));
}

TEST(CliSafety, AnExistingPtdOfAnotherProgramIsNotReplacedWithoutForce) {
  NEED_FIXTURES();
  ScopedDir d("safety_ptd_clash");
  ASSERT_EQ(RunPtepack({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "weights", "-q", "-o",
                        d / "ks.pte"})
                .exit_code,
            0);
  const std::string first_ptd = Slurp(d / "weights.ptd");
  auto r = RunPtepack(
      {"split", FixturePath("conv2d_quantized.pte"), "--external-constants", "weights", "-q", "-o", d / "conv.pte"});
  ExpectLocatedError(r, d / "weights.ptd", "output-exists");
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  EXPECT_EQ(Slurp(d / "weights.ptd"), first_ptd);
  EXPECT_FALSE(fs::exists(d / "conv.pte"));
  // The first program still loads with its data.
  EXPECT_EQ(RunPtepack({"verify", d / "ks.pte", "--ptd", d / "weights.ptd"}).exit_code, 0);
  // --force replaces it, as asked.
  r = RunPtepack({"split", FixturePath("conv2d_quantized.pte"), "--external-constants", "weights", "-q", "--force",
                  "-o", d / "conv.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Slurp(d / "weights.ptd"), first_ptd);
}

TEST(CliSafety, NameCollisionsAreRefusedBeforeWriting) {
  NEED_FIXTURES();
  ScopedDir d("safety_collision");
  // The program would be written under its own data file's name.
  auto r = RunPtepack({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "x", "-o", d / "x.ptd"});
  ExpectLocatedError(r, d / "x.ptd", "output-collision");
  EXPECT_TRUE(Entries(d.path()).empty());
  // The output is the input.
  fs::copy_file(FixturePath("add.pte"), d / "in.pte");
  r = RunPtepack({"repack", d / "in.pte", "-o", d / "in.pte"});
  ExpectLocatedError(r, d / "in.pte", "overwrite-input");
  EXPECT_EQ(Slurp(d / "in.pte"), Slurp(FixturePath("add.pte")));
}

TEST(CliSafety, DryRunListsTheFilesAndWritesNothing) {
  NEED_FIXTURES();
  ScopedDir d("safety_dry_run");
  auto r = RunPtepack(
      {"split", FixturePath("keyword_spotting.pte"), "--external-constants", "w", "--dry-run", "-o", d / "m.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(d / "m.pte"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(d / "w.ptd"), std::string::npos) << r.out;
  EXPECT_TRUE(Entries(d.path()).empty());
  r = RunPtepack({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "w", "--dry-run", "--json",
                  "-o", d / "m.pte"});
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 2u);
  // The sizes announced are the sizes written.
  ASSERT_EQ(
      RunPtepack({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "w", "-q", "-o", d / "m.pte"})
          .exit_code,
      0);
  for (const auto& f : j["files"]) {
    EXPECT_EQ(fs::file_size(f["path"].get<std::string>()), f["size"].get<uint64_t>()) << f.dump();
  }
}

TEST(CliSafety, ExtractNeverMixesOldAndNewFiles) {
  NEED_FIXTURES();
  ScopedDir d("safety_extract");
  const std::string out = d / "ex";
  ASSERT_EQ(RunPtepack({"extract", FixturePath("keyword_spotting.pte"), "-o", out}).exit_code, 0);
  const auto first = Entries(out);
  ASSERT_GT(first.size(), 3u);
  // A second program into the same directory: refused, directory unchanged.
  auto r = RunPtepack({"extract", FixturePath("add.pte"), "-o", out});
  ExpectLocatedError(r, out, "output-exists");
  EXPECT_EQ(Entries(out), first);
  // With --force the directory is replaced: no file of the first program stays.
  r = RunPtepack({"extract", FixturePath("add.pte"), "-o", out, "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto index = nlohmann::json::parse(Slurp(out + "/index.json"));
  std::set<std::string> listed = {"index.json", "program.json", index["spec"], index["config"]};
  for (const char* k : {"segments", "constants", "delegates", "mutable_data", "named_data", "external"}) {
    for (const auto& e : index.value(k, nlohmann::json::array())) listed.insert(e["file"].get<std::string>());
  }
  auto now = Entries(out);
  EXPECT_EQ(std::set<std::string>(now.begin(), now.end()), listed);
  EXPECT_EQ(Entries(d.path()), (std::vector<std::string>{"ex"}));  // no temp dirs left
  // A directory that is not an earlier extract is never replaced.
  fs::create_directories(d / "docs");
  std::ofstream(d / "docs/notes.txt") << "mine";
  r = RunPtepack({"extract", FixturePath("add.pte"), "-o", d / "docs", "--force"});
  ExpectLocatedError(r, d / "docs", "output-exists");
  EXPECT_EQ(Slurp(d / "docs/notes.txt"), "mine");
}

TEST(CliSafety, RepackWithoutItsPtdNamesTheMissingData) {
  NEED_FIXTURES();
  ScopedDir d("safety_missing_ptd");
  auto r = RunPtepack({"repack", FixturePath("linear.pte"), "-o", d / "l.pte"});
  ExpectLocatedError(r, "linear.pte", "missing-ptd");
  EXPECT_NE(r.err.find("linear.weight"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ptd"), std::string::npos) << r.err;
  EXPECT_TRUE(Entries(d.path()).empty());
  // verify agrees: the program alone is valid, and it says the data was not checked.
  r = RunPtepack({"verify", FixturePath("linear.pte")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OK (program only: 2 tensor(s) live in a .ptd data file that was not given"), std::string::npos)
      << r.out;
  EXPECT_EQ(
      RunPtepack({"repack", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "-q", "-o", d / "l.pte"})
          .exit_code,
      0);
}

// ---- Hangs and crashes

TEST(CliHostile, AFifoIsRefusedNotWaitedOn) {
  ScopedDir d("hostile_fifo");
  const std::string fifo = d / "in.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::vector<std::string>> cmds = {
      {"pack", fifo, Testdata("pack/add_spec.json"), "-o", d / "x.pte"},
      {"pack", Testdata("pack/config.json"), fifo, "-o", d / "x.pte"},
      {"verify", fifo},
      {"inspect", fifo},
      {"repack", fifo, "-o", d / "x.pte"},
      {"checksum", fifo},
  };
  for (const auto& c : cmds) {
    SCOPED_TRACE(c[0]);
    auto r = RunPtepack(c, {}, 20);
    ASSERT_FALSE(r.timed_out) << "ptepack waited on a FIFO";
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("not a regular file (a FIFO)"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(d / "x.pte"));
}

TEST(CliHostile, DeeplyNestedJsonIsRefusedWithItsOffset) {
  ScopedDir d("hostile_deep_json");
  const std::string deep = std::string(75000, '[') + std::string(75000, ']');
  std::ofstream(d / "deep.json") << deep;
  std::ofstream(d / "deep_program.json") << "{\"program\": " << deep << "}";
  auto r = RunPtepack({"pack", d / "deep.json", Testdata("pack/add_spec.json"), "-o", d / "x.pte"});
  ExpectLocatedError(r, d / "deep.json", "bad-config");
  EXPECT_NE(r.err.find("at offset 256 "), std::string::npos) << r.err;  // the 257th '['
  EXPECT_NE(r.err.find("nests too deeply"), std::string::npos) << r.err;
  r = RunPtepack({"pack", Testdata("pack/config.json"), d / "deep_program.json", "-o", d / "x.pte"});
  ExpectLocatedError(r, d / "deep_program.json", "bad-spec");
  EXPECT_NE(r.err.find("nests too deeply"), std::string::npos) << r.err;
  // Strings holding brackets do not count.
  nlohmann::json spec = AddSpec();
  spec["program"]["execution_plan"][0]["name"] = std::string(1000, '[');
  WriteJson(d / "brackets.json", spec);
  r = RunPtepack({"pack", Testdata("pack/config.json"), d / "brackets.json", "-q", "-o", d / "x.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliHostile, ZerosSizesAreCheckedAndLocated) {
  ScopedDir d("hostile_zeros");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1.5", "must be a whole number (expected an integer, found 1.5)"},
      {"1e15", "must be a whole number (expected an integer, found 1e+15)"},
      {"-1", "must not be negative (expected an integer >= 0, found -1)"},
      {"\"8\"", "must be an integer (found \"8\", a string)"},
      {"2199023255553", "is too large (expected at most 1099511627776, found 2199023255553)"},
  };
  for (const auto& [value, message] : cases) {
    SCOPED_TRACE(value);
    nlohmann::json spec = AddSpec();
    spec["constants"] = nlohmann::json::array({nlohmann::json::parse("{\"zeros\": " + value + "}")});
    WriteJson(d / "spec.json", spec);
    auto r = RunPtepack({"pack", Testdata("pack/config.json"), d / "spec.json", "-o", d / "x.pte"});
    ExpectLocatedError(r, d / "spec.json", "bad-spec");
    EXPECT_NE(r.err.find("constants[0].zeros: " + message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d / "x.pte"));
  }
}

TEST(CliHostile, LargeZerosAreStreamedAsAHole) {
  ScopedDir d("hostile_zeros_large");
  constexpr uint64_t kSize = uint64_t{512} << 20;
  nlohmann::json spec = AddSpec();
  // A [2]-float constant followed by 512 MiB of zeros in a second buffer.
  spec["constants"].push_back({{"zeros", kSize}});
  WriteJson(d / "spec.json", spec);
  auto r = RunPtepack({"pack", Testdata("pack/config.json"), d / "spec.json", "-q", "-o", d / "z.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not materialised: the peak grows by far less than the 512 MiB the data
  // would take. Measured against the same pack without the zeros, since the
  // process's own size varies with the build (a sanitized binary is resident
  // at over 100 MiB before it reads anything).
  auto base =
      RunPtepack({"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-q", "-o", d / "a.pte"});
  ASSERT_EQ(base.exit_code, 0) << base.err;
  EXPECT_LT(r.max_rss_kb, base.max_rss_kb + 64 * 1024)
      << "peak RSS " << r.max_rss_kb << " KiB, without the zeros " << base.max_rss_kb << " KiB";
  struct stat st {};
  ASSERT_EQ(::stat((d / "z.pte").c_str(), &st), 0);
  EXPECT_GT(static_cast<uint64_t>(st.st_size), kSize);
  // A sparse file where the filesystem allows holes (tmpfs, ext4, xfs, btrfs).
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{16} << 20);
  EXPECT_EQ(RunPtepack({"verify", d / "z.pte"}).exit_code, 0);
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// ---- Messages and exit codes

TEST(CliMessages, AMistypedSubcommandIsNamedWithASuggestion) {
  auto r = RunPtepack({"inpsect", "f.pte"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown subcommand \"inpsect\"; did you mean \"inspect\"?"), std::string::npos) << r.err;
  r = RunPtepack({"help", "repack"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--in-place"), std::string::npos) << r.out;
  r = RunPtepack({"help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("extract"), std::string::npos) << r.out;
  // A terminal escape in the word is shown escaped, not sent to the terminal.
  r = RunPtepack({"\x1b[2Jx"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[2Jx"), std::string::npos) << r.err;
}

TEST(CliMessages, JsonErrorsAreAJsonObjectOnStdout) {
  ScopedDir d("messages_json");
  auto r = RunPtepack({"verify", d / "missing.pte", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["code"], "open-failed");  // the library's own error, naming the file
  EXPECT_EQ(j["error"]["file"], d / "missing.pte");
  EXPECT_EQ(j["error"]["exit_code"], 2);
  std::ofstream(d / "deep.json") << std::string(300, '[');
  r = RunPtepack({"repack", d / "deep.json", "--json", "-o", d / "x.pte"});
  EXPECT_EQ(r.exit_code, 2);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["file"], d / "deep.json");
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
}

// The README's table: 0 ok, 1 invalid / differs, 2 usage or I/O error.
TEST(CliMessages, ExitCodesFollowOneTable) {
  NEED_FIXTURES();
  ScopedDir d("messages_exit");
  const std::string ks = FixturePath("keyword_spotting.pte");
  std::ofstream(d / "bad.pte") << "not a program";
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  const std::vector<Case> cases = {
      {{"verify", ks}, 0},
      {{"verify", d / "bad.pte"}, 1},
      {{"inspect", d / "bad.pte"}, 1},
      {{"checksum", ks}, 0},
      {{"verify", ks, "--bogus-flag"}, 2},
      {{"verify", d / "none.pte"}, 2},
      {{"inspect", d / "none.pte"}, 2},
      {{"repack", ks}, 2},                                // no -o
      {{"repack", d / "bad.pte", "-o", d / "o.pte"}, 2},  // cannot rewrite an invalid input
      {{"split", ks, "-o", d / "o.pte"}, 2},              // no tag
      {{"pack", d / "none.json", d / "none.json", "-o", d / "o.pte"}, 2},
      {{"extract", d / "none.pte", "-o", d / "ex"}, 2},
      {{"bundle", "create", d / "b.ptebundle", d / "none.pte"}, 2},
      {{"bundle", "list", d / "bad.pte"}, 2},
      {{"nosuchcommand"}, 2},
  };
  for (const auto& c : cases) {
    auto r = RunPtepack(c.args);
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    EXPECT_EQ(r.exit_code, c.code) << cmd << "\n" << r.err;
  }
}

TEST(CliMessages, SplitWithNothingToSplitSaysSo) {
  NEED_FIXTURES();
  ScopedDir d("messages_split_nothing");
  auto r = RunPtepack({"split", FixturePath("add.pte"), "--external-constants", "w", "-o", d / "a.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("has no constants to move"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no w.ptd was written"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "w.ptd"));
}

// Every JSON input a fuzzer or a report found a crash with: refused with
// exit 2 as a spec and as a config, never a signal.
TEST(CliHostile, JsonRegressionInputsAreRefusedNotCrashedOn) {
  ScopedDir d("hostile_json_regressions");
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(Testdata("regressions"))) {
    if (e.path().extension() != ".json") continue;
    ++n;
    for (bool as_spec : {true, false}) {
      SCOPED_TRACE(e.path().string() + (as_spec ? " as spec" : " as config"));
      auto r = as_spec ? RunPtepack({"pack", Testdata("pack/config.json"), e.path().string(), "-o", d / "x.pte"})
                       : RunPtepack({"pack", e.path().string(), Testdata("pack/add_spec.json"), "-o", d / "x.pte"});
      EXPECT_EQ(r.signal, 0);
      EXPECT_EQ(r.exit_code, 2) << r.err;
    }
  }
  EXPECT_GE(n, 2u);
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

TEST(CliMessages, ChecksumTakesPtdAndRefusesAmbiguousManifests) {
  NEED_FIXTURES();
  ScopedDir d("messages_checksum");
  auto r = RunPtepack({"checksum", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"][1]["name"], "linear.ptd");
  fs::create_directories(d / "a");
  fs::create_directories(d / "b");
  fs::copy_file(FixturePath("add.pte"), d / "a/m.pte");
  fs::copy_file(FixturePath("xor.pte"), d / "b/m.pte");
  r = RunPtepack({"checksum", d / "a/m.pte", d / "b/m.pte", "--write-manifest", d / "man.json"});
  ExpectLocatedError(r, d / "man.json", "manifest-name-clash");
  EXPECT_FALSE(fs::exists(d / "man.json"));
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

TEST(CliMessages, VerifyManifestChecksOrNamesEveryEntry) {
  NEED_FIXTURES();
  ScopedDir d("messages_manifest_entries");
  ASSERT_EQ(RunPtepack({"checksum", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--write-manifest",
                        d / "m.json"})
                .exit_code,
            0);
  // The .ptd listed in the manifest is not given: not "all checksums match".
  auto r = RunPtepack({"verify", FixturePath("linear.pte"), "--checksum", "--manifest", d / "m.json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("all checksums match"), std::string::npos) << r.out;
  EXPECT_NE((r.out + r.err).find("linear.ptd"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("[not-checked]"), std::string::npos) << r.out << r.err;
  r = RunPtepack({"verify", FixturePath("linear.pte"), "--ptd", FixturePath("linear.ptd"), "--allow-legacy-ptd",
                  "--checksum", "--manifest", d / "m.json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all checksums match"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// extract's program.json is JSON even for infinite and NaN doubles, and packs
// back to the same values.
TEST(CliMessages, ProgramJsonQuotesInfAndNan) {
  ScopedDir d("messages_inf_nan");
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
  uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
  uint32_t inf = m.Double(std::numeric_limits<double>::infinity());
  uint32_t ninf = m.Double(-std::numeric_limits<double>::infinity());
  uint32_t nan = m.Double(std::numeric_limits<double>::quiet_NaN());
  uint32_t op = m.Operator("aten::clamp", "out");
  m.KernelCall(op, {static_cast<int32_t>(x), static_cast<int32_t>(ninf), static_cast<int32_t>(inf),
                    static_cast<int32_t>(nan), static_cast<int32_t>(y)});
  m.Inputs({static_cast<int32_t>(x)});
  m.Outputs({static_cast<int32_t>(y)});
  m.PlannedBufferSizes({0, 32});
  WritePackage(b.Build(), BackendConfig{}, d / "m.pte");
  auto r = RunPtepack({"extract", d / "m.pte", "-o", d / "ex"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json program;
  ASSERT_NO_THROW(program = nlohmann::json::parse(Slurp(d / "ex/program.json"))) << Slurp(d / "ex/program.json");
  const auto& values = program["execution_plan"][0]["values"];
  EXPECT_EQ(values[inf]["val"]["double_val"], "inf");
  EXPECT_EQ(values[ninf]["val"]["double_val"], "-inf");
  EXPECT_EQ(values[nan]["val"]["double_val"], "nan");
  // Packed back from extract's spec.json (program.json is the file as laid
  // out, which pack refuses), the doubles are the same.
  nlohmann::json spec;
  ASSERT_NO_THROW(spec = nlohmann::json::parse(Slurp(d / "ex/spec.json"))) << Slurp(d / "ex/spec.json");
  EXPECT_EQ(spec["program"]["execution_plan"][0]["values"][nan]["val"]["double_val"], "nan");
  r = RunPtepack({"pack", d / "ex/config.json", d / "ex/spec.json", "-q", "-o", d / "again.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto pte = PteFile::Open(d / "again.pte");
  ASSERT_TRUE(pte->ok());
  const auto* vals = pte->program()->execution_plan()->Get(0)->values();
  EXPECT_TRUE(std::isinf(vals->Get(inf)->val_as_Double()->double_val()));
  EXPECT_LT(vals->Get(ninf)->val_as_Double()->double_val(), 0);
  EXPECT_TRUE(std::isnan(vals->Get(nan)->val_as_Double()->double_val()));
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

TEST(CliMessages, ControlCharactersInNamesAreEscaped) {
  ScopedDir d("messages_escape");
  ProgramBuilder b;
  auto& m = b.AddMethod("fwd\x1b]0;pwned\x07\x1b[2J");
  uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
  uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
  uint32_t op = m.Operator("aten::relu\x1b[31m", "out");
  m.KernelCall(op, {static_cast<int32_t>(x), static_cast<int32_t>(y)});
  m.Inputs({static_cast<int32_t>(x)});
  m.Outputs({static_cast<int32_t>(y)});
  m.PlannedBufferSizes({0, 32});
  WritePackage(b.Build(), BackendConfig{}, d / "m.pte");
  auto r = RunPtepack({"inspect", d / "m.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("fwd\\x1b]0;pwned\\x07\\x1b[2J"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aten::relu\\x1b[31m"), std::string::npos) << r.out;
  // JSON keeps the exact bytes (escaped by JSON itself).
  r = RunPtepack({"inspect", "--json", d / "m.pte"});
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["methods"][0]["name"], "fwd\x1b]0;pwned\x07\x1b[2J");
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

TEST(CliMessages, BundleCreateNeedsEveryExternalKey) {
  NEED_FIXTURES();
  ScopedDir d("messages_bundle_keys");
  auto r = RunPtepack({"bundle", "create", d / "b.ptebundle", FixturePath("linear.pte"), "-q"});
  ExpectLocatedError(r, "linear.pte", "dangling-external-key");
  EXPECT_NE(r.err.find("linear.weight"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "b.ptebundle"));
  // The wrong .ptd does not do either.
  r = RunPtepack({"bundle", "create", d / "b.ptebundle", FixturePath("linear.pte"), FixturePath("xor.ptd"), "-q"});
  ExpectLocatedError(r, "linear.pte", "dangling-external-key");
  r = RunPtepack({"bundle", "create", d / "b.ptebundle", FixturePath("linear.pte"), FixturePath("linear.ptd"), "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

TEST(CliMessages, EmitFlagsThatCannotAddAnythingSaySo) {
  NEED_FIXTURES();
  ScopedDir d("messages_emit_noop");
  auto r = RunPtepack({"repack", FixturePath("add.pte"), "--emit-stacktrace", "true", "-q", "-o", d / "a.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("has no stack traces; --emit-stacktrace true cannot add them"), std::string::npos) << r.err;
  // testdata/pack/config.json keeps stack traces: nothing to say then.
  ASSERT_EQ(
      RunPtepack({"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-q", "-o", d / "traced.pte"})
          .exit_code,
      0);
  r = RunPtepack({"repack", d / "traced.pte", "--emit-stacktrace", "true", "-q", "-o", d / "b.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("stack traces"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptepack
