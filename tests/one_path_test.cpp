// One path per job (issue 25 item 2): the CLI's `verify --json` and `inspect --json` are
// what the library's VerifyJson/InspectJson return, on every real ExecuTorch file and every
// regression input, for the default options, --strict and --checksum; and a file's kind
// (.pte/.ptd/.bpte) is told by its FlatBuffers file identifier, not by its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/reader.h"
#include "serialize/api/read_api.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/json_limits.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunCli;
using testing::RunResult;

// Every .pte/.ptd/.bpte of the fixtures (when present) and every binary regression input.
std::vector<std::string> Inputs() {
  std::vector<std::string> files;
  auto add_dir = [&](const std::string& dir) {
    if (!fs::is_directory(dir)) return;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".pte" || ext == ".ptd" || ext == ".bpte") files.push_back(e.path().string());
    }
  };
  if (testing::HaveFixtures()) add_dir(testing::FixturesDir());
  add_dir(std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions");
  std::sort(files.begin(), files.end());
  return files;
}

struct Variant {
  const char* name;
  std::vector<std::string> flags;
  VerifyOptions options;
};

std::vector<Variant> Variants() {
  VerifyOptions strict, sums, legacy;
  strict.strict = true;
  sums.checksum = true;
  legacy.allow_legacy_ptd = true;
  return {{"default", {}, {}},
          {"strict", {"--strict"}, strict},
          {"checksum", {"--checksum"}, sums},
          {"allow-legacy-ptd", {"--allow-legacy-ptd"}, legacy}};
}

// What the CLI prints for `cmd FILE --json FLAGS` against what `api` returns: the same JSON
// and the exit status the verdict gives, or (when the library throws) exit 2 and its message.
template <typename Api>
void ExpectSame(const std::string& cmd, const std::string& file, const Variant& v, Api api, bool* valid) {
  std::vector<std::string> args = {cmd, file, "--json"};
  args.insert(args.end(), v.flags.begin(), v.flags.end());
  const RunResult cli = RunCli(args);
  const std::string what = cmd + " " + file + " (" + v.name + ")";
  try {
    const json j = json::parse(api(file, v.options));
    ASSERT_TRUE(json::accept(cli.out)) << what << ": " << cli.err;
    EXPECT_EQ(json::parse(cli.out), j) << what;
    *valid = cmd == "verify" ? j.at("valid").get<bool>() : cli.exit_code == 0;
    EXPECT_EQ(cli.exit_code, *valid ? 0 : 1) << what;
  } catch (const Error& e) {
    EXPECT_EQ(cli.exit_code, 2) << what;
    EXPECT_NE(cli.err.find(e.finding().message), std::string::npos) << what << ": " << cli.err;
  }
}

TEST(OnePath, VerifyJsonIsWhatTheCliPrintsOnEveryFixtureAndRegressionInput) {
  const std::vector<std::string> files = Inputs();
  ASSERT_GE(files.size(), 10u);  // testdata/regressions alone holds 13 binary inputs
  if (!testing::HaveFixtures()) std::cout << "[ note ] fixtures absent: only testdata/regressions compared\n";
  size_t compared = 0, valid_count = 0;
  for (const std::string& f : files) {
    for (const Variant& v : Variants()) {
      bool valid = false;
      ExpectSame(
          "verify", f, v, [](const std::string& p, const VerifyOptions& o) { return VerifyJson(p, o); }, &valid);
      ++compared;
      valid_count += valid;
    }
  }
  // Both verdicts occur: the real files are valid, the regression inputs mostly not.
  EXPECT_GT(valid_count, 0u);
  EXPECT_LT(valid_count, compared);
  std::cout << "[ note ] " << files.size() << " files, " << compared << " comparisons, " << valid_count << " valid\n";
}

TEST(OnePath, InspectJsonIsWhatTheCliPrintsOnEveryFixtureAndRegressionInput) {
  const std::vector<std::string> files = Inputs();
  ASSERT_GE(files.size(), 10u);
  for (const Variant& v : {Variants()[0], Variants()[3]}) {  // default, --allow-legacy-ptd
    for (const std::string& f : files) {
      // (a lone .ptd's JSON is streamed entry by entry by the CLI: still the same document)
      bool ok = false;
      ExpectSame(
          "inspect", f, v, [](const std::string& p, const VerifyOptions& o) { return InspectJson(p, o); }, &ok);
    }
  }
}

TEST(OnePath, ChecksumAndStrictReachTheLibraryToo) {
  const std::string pte = testing::FixturePath("add.pte");
  VerifyOptions o;
  o.checksum = true;
  const json j = json::parse(VerifyJson(pte, o));
  // add.pte has one segment (the constants): the regions are program, segments[0], padding.
  ASSERT_EQ(j.at("checksums").size(), 1u);
  std::vector<std::string> names;
  for (const auto& r : j["checksums"][0]["regions"]) names.push_back(r["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"program", "segments[0]", "padding"}));
  // A manifest written through the library is the one the CLI then accepts.
  const std::string m = testing::TempDir("one_path_manifest") + "/m.json";
  o.write_manifest = m;
  EXPECT_TRUE(Verify(pte, o).valid);
  EXPECT_EQ(json::parse(VerifyJson(pte, o)).at("manifest_written"), m);
  RunResult r = RunCli({"verify", pte, "--manifest", m});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The 4 bytes at offset 4 (the FlatBuffers file identifier) of the real files, read here by hand.
std::string Identifier(const std::string& path) {
  const std::vector<uint8_t> b = testing::ReadFile(path);
  return b.size() >= 8 ? std::string(reinterpret_cast<const char*>(b.data()) + 4, 4) : "";
}

TEST(OnePath, FileKindIsTheIdentifierNotTheName) {
  const std::string dir = testing::TempDir("one_path_kind");
  struct Case {
    const char* fixture;
    const char* renamed;
    const char* id;
    FileKind kind;
  };
  const Case cases[] = {{"add.pte", "add.bin", "ET12", FileKind::kPte},
                        {"add.pte", "add.ptd", "ET12", FileKind::kPte},
                        {"xor.ptd", "xor.pte", "FT01", FileKind::kPtd},
                        {"bundled_program.bpte", "bundled.ptd", "BP08", FileKind::kBpte},
                        {"bundled_program.bpte", "bundled.pte", "BP08", FileKind::kBpte}};
  for (const Case& c : cases) {
    const std::string from = testing::FixturePath(c.fixture);
    const std::string to = dir + "/" + c.renamed;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    ASSERT_EQ(Identifier(to), c.id) << c.fixture;
    EXPECT_EQ(KindOfFile(to), c.kind) << c.renamed;
    // Judged as the original: the same JSON but for the name, from the library and the CLI.
    json a = json::parse(VerifyJson(from)), b = json::parse(VerifyJson(to));
    EXPECT_EQ(b["file"], to);
    b["file"] = a["file"];
    EXPECT_EQ(a, b) << c.renamed;
    EXPECT_EQ(json::parse(RunCli({"verify", to, "--json"}).out)["file"], to);
    if (c.kind == FileKind::kBpte) {
      EXPECT_EQ(b["format"], "bpte") << c.renamed;
    }
  }
  // Bytes without a name (stdin) are told apart the same way, a BundledProgram included.
  const std::string sh = std::string(PTEPACK_CLI) + " verify - < " +
                         testing::ShellQuote(testing::FixturePath("bundled_program.bpte")) + " 2>&1";
  FILE* p = popen(sh.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("<stdin>: OK (BundledProgram: "), std::string::npos) << out;
}

// Error's located constructor carries every field of the finding (the 17 throw sites that
// built a Finding by hand now use it).
TEST(OnePath, LocatedErrorCarriesTheFinding) {
  const Error e("bad-spec", "program.segments is already laid out", "spec.json", 12, "no segments", "2 segments");
  EXPECT_EQ(e.finding().code, "bad-spec");
  EXPECT_EQ(e.finding().file, "spec.json");
  EXPECT_EQ(e.finding().offset, 12u);
  EXPECT_EQ(e.finding().severity, Finding::Severity::kError);
  EXPECT_STREQ(e.what(),
               "spec.json: error at offset 12 (0xc): program.segments is already laid out (expected no segments, "
               "found 2 segments) [bad-spec]");
  const Error bare("io", "cannot read", "a.pte");
  EXPECT_STREQ(bare.what(), "a.pte: error: cannot read [io]");
  EXPECT_FALSE(bare.finding().offset.has_value());
}

// The one TensorNbytes follows runtime/executor/program_validation.cpp's validate_tensor:
// the element count in a signed 64-bit ssize_t, flagged at the first overflow even when a
// later dimension is 0, then times elementSize (scalar_type_util.h) in 64 unsigned bits.
TEST(OnePath, TensorNbytesIsTheRuntimes) {
  auto nbytes = [](int type, std::vector<int32_t> dims) {
    return TensorNbytes(static_cast<ScalarType>(type), dims.data(), dims.size());
  };
  const int32_t kMax = 2147483647;              // 2^31 - 1
  EXPECT_EQ(nbytes(6, {2, 3}), 24u);            // Float: 6 elements of 4 bytes
  EXPECT_EQ(nbytes(6, {}), 4u);                 // a scalar
  EXPECT_EQ(nbytes(10, {4}), 64u);              // ComplexDouble: complex<double>, 16 bytes
  EXPECT_EQ(nbytes(8, {3}), 12u);               // ComplexHalf: complex<Half>, 4 bytes
  EXPECT_EQ(nbytes(21, {5}), 5u);               // Bits8: 1 byte
  EXPECT_EQ(nbytes(29, {0, kMax}), 0u);         // UInt64, no elements
  EXPECT_EQ(nbytes(6, {2, -1}), std::nullopt);  // a negative dimension
  EXPECT_EQ(nbytes(30, {1}), std::nullopt);     // Undefined: the runtime rejects it
  EXPECT_EQ(nbytes(-1, {1}), std::nullopt);
  // (2^31-1)^2 * 2 = 9223372028264841218 < 2^63 elements of 1 byte: counted.
  EXPECT_EQ(nbytes(0, {kMax, kMax, 2}), 9223372028264841218u);
  // ... * 4 elements exceed 2^63 - 1 (though not 2^64): the runtime's ssize_t overflows.
  EXPECT_EQ(nbytes(0, {kMax, kMax, 4}), std::nullopt);
  // The overflow is not undone by a later 0.
  EXPECT_EQ(nbytes(0, {kMax, kMax, kMax, 0}), std::nullopt);
  // 2^62 - 2^32 + 1 elements fit; times 8 bytes (Long) does not fit 64 bits.
  EXPECT_EQ(nbytes(4, {kMax, kMax}), std::nullopt);
  // Element sizes of every named type and the unnamed ones (ET_FORALL_SCALAR_TYPES).
  const size_t sizes[30] = {1, 1, 2, 4, 8, 2, 4, 8, 4, 8, 16, 1, 1, 1, 4, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2, 4, 8};
  for (int t = 0; t < 30; ++t) {
    EXPECT_EQ(ElementSize(static_cast<ScalarType>(t)), sizes[t]) << t;
    const bool named = !(t >= 8 && t <= 10) && !(t >= 18 && t <= 21);  // what program.fbs names
    EXPECT_EQ(ScalarTypeSize(t), named ? sizes[t] : 0) << t;
  }
}

// The one JSON token scanner (serialize/io/json_limits.h): strings whole (escaped quotes
// inside), every other non-blank character on its own.
TEST(OnePath, JsonTokens) {
  const std::string text = "{\"a\\\"b\": [1, {\"c\": \"x}\"}],\n \"program\":{}}";
  std::vector<std::string> tokens;
  ScanJsonTokens(text, [&](size_t b, size_t e) {
    tokens.push_back(text.substr(b, e - b));
    return true;
  });
  const std::vector<std::string> want = {"{",      "\"a\\\"b\"", ":", "[", "1",           ",", "{", "\"c\"", ":",
                                         "\"x}\"", "}",          "]", ",", "\"program\"", ":", "{", "}",     "}"};
  EXPECT_EQ(tokens, want);
  // An unterminated string (ending in a backslash) runs to the end; `fn` can stop the scan.
  const std::string open = "[\"ab\\";
  tokens.clear();
  ScanJsonTokens(open, [&](size_t b, size_t e) {
    tokens.push_back(open.substr(b, e - b));
    return true;
  });
  EXPECT_EQ(tokens, (std::vector<std::string>{"[", "\"ab\\"}));
  size_t seen = 0;
  ScanJsonTokens(text, [&](size_t, size_t) { return ++seen < 3; });
  EXPECT_EQ(seen, 3u);
}

}  // namespace
}  // namespace ptepack
