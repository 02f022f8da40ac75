// Issue 24 item 23: every JSON document ptepack reads -- configs, pack specs,
// checksum manifests, bundle indexes, BundledProgram tests.json -- goes
// through one reader (serialize/io/json_reader.h): a field of the wrong type,
// a missing one, or a syntax error is a ptepack error that names the file,
// the field's path and the byte offset of the value in the file, and no
// JSON library exception or text ("[json.exception...") gets out. Offsets
// are counted by hand in the texts below.
#include "serialize/io/json_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ptepack/error.h"
#include "serialize/bundle/bundle.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;
using testing::WriteFile;

// The finding of what `fn` throws (and that it throws a ptepack::Error).
template <typename F>
Finding Thrown(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.finding();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ptepack::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

TEST(JsonReader, WrongTypeNamesThePathAndTheOffset) {
  //                      0         1         2
  //                      0123456789012345678901234
  const std::string text = R"({"files": [{"name": 5}]})";
  JsonDocument doc(text, "m.json", "bad-manifest");
  Finding f = Thrown([&] { doc.root()["files"].At(0)["name"].String(); });
  EXPECT_EQ(f.code, "bad-manifest");
  EXPECT_EQ(f.file, "m.json");
  EXPECT_EQ(f.offset, 20u);  // the 5
  EXPECT_EQ(f.message, "files[0].name: must be a string");
  EXPECT_EQ(f.found, "5, an unsigned integer");
}

TEST(JsonReader, MissingFieldIsLocatedAtItsObject) {
  const std::string text = "{\n  \"a\": {\"b\": 1}\n}";  // the inner object starts at offset 9
  JsonDocument doc(text, "c.json", "bad-config");
  Finding f = Thrown([&] { doc.root()["a"]["c"].U64(); });
  EXPECT_EQ(f.message, "a.c: required field is missing");
  EXPECT_EQ(f.offset, 9u);
}

TEST(JsonReader, NumbersAreCheckedForKindAndRange) {
  JsonDocument doc(std::string(R"({"n": -1, "f": 1.5, "big": 300, "s": "8"})"), "x.json", "bad-spec");
  EXPECT_EQ(Thrown([&] { doc.root()["n"].U64(); }).message, "n: must not be negative");
  EXPECT_EQ(Thrown([&] { doc.root()["f"].U64(); }).message, "f: must be a whole number");
  EXPECT_EQ(Thrown([&] { doc.root()["big"].I64(0, 255); }).message, "big: is out of range");
  EXPECT_EQ(Thrown([&] { doc.root()["big"].U64(255); }).message, "big: is too large");
  Finding s = Thrown([&] { doc.root()["s"].U64(); });
  EXPECT_EQ(s.message, "s: must be an integer");
  EXPECT_EQ(s.found, "\"8\", a string");
  EXPECT_EQ(s.offset, 37u);
  EXPECT_EQ(doc.root()["big"].U64(), 300u);
}

TEST(JsonReader, SyntaxErrorsAndDepthAreLocated) {
  Finding f = Thrown([] { JsonDocument(std::string("{\"a\": [1, 2,]}"), "t.json", "bad-config"); });
  EXPECT_EQ(f.code, "bad-config");
  EXPECT_EQ(f.offset, 12u);  // the ']' after the comma
  EXPECT_EQ(f.message.rfind("not valid JSON: ", 0), 0u) << f.message;
  EXPECT_EQ(f.message.find("[json.exception"), std::string::npos) << f.message;
  f = Thrown([] { JsonDocument(std::string(300, '[') + std::string(300, ']'), "d.json", "bad-spec"); });
  EXPECT_EQ(f.offset, 256u);
  // A base offset (a bundle's index inside the bundle) is added.
  f = Thrown([] {
    JsonDocument doc(std::string("{\"k\": true}"), "b.ptebundle", "bad-bundle", 1000);
    doc.root()["k"].String();
  });
  EXPECT_EQ(f.offset, 1006u);
}

// A spec's program is read by itself and cut out of the text nlohmann::json
// parses (JsonDocument::WithGap): offsets past the cut are the file's.
TEST(JsonReader, OffsetsPastACutAreThoseOfTheFile) {
  //                       0         1         2         3
  //                       01234567890123456789012345678901234567
  const std::string file = R"({"p": {"abc": 1}, "k": "v", "n": [1,]})";
  // Bytes 7..14 (`"abc": 1`) cut out: {"p": {}, "k": "v", "n": [1,]}
  const auto cut = [&](const std::string& f) { return f.substr(0, 7) + f.substr(15); };
  Finding f = Thrown([&] { JsonDocument::WithGap(cut(file), "s.json", "bad-spec", 7, 8, file); });
  EXPECT_EQ(f.offset, 36u);  // the ']' after the comma, in the file
  EXPECT_EQ(f.message.rfind("not valid JSON: parse error at line 1, column 37: ", 0), 0u) << f.message;
  // Lines and columns are the file's too, newlines in the cut counted.
  const std::string lines = "{\"p\": {\n\"abc\": 1\n},\n\"n\": [1,]}";
  // Offsets: the inner '{' 6, newlines 7, 16 and 19, its '}' 17, '[' 25, ']' 28.
  f = Thrown([&] { JsonDocument::WithGap(lines.substr(0, 7) + lines.substr(17), "s.json", "bad-spec", 7, 10, lines); });
  EXPECT_EQ(f.offset, 28u);  // the ']': line 4 starts at 20, so column 28 - 20 + 1
  EXPECT_EQ(f.message.rfind("not valid JSON: parse error at line 4, column 9: ", 0), 0u) << f.message;
  const std::string ok = R"({"p": {"abc": 1}, "k": "v"})";
  JsonDocument doc = JsonDocument::WithGap(cut(ok), "s.json", "bad-spec", 7, 8, ok);
  EXPECT_EQ(Thrown([&] { doc.root()["k"].U64(); }).offset, 23u);         // past the cut
  EXPECT_EQ(Thrown([&] { doc.root()["p"].String(); }).offset, 6u);       // before it
  EXPECT_EQ(Thrown([&] { doc.root()["p"]["x"].String(); }).offset, 6u);  // its object, missing "x"
}

TEST(JsonReader, DuplicateAndEscapedKeysAreFound) {
  //                      0          1          2          3
  //                      01234567890123456789012345678901234567
  const std::string text = R"({"a": 1, "a": "x", "b\u0041": [true]})";
  JsonDocument doc(text, "k.json", "bad-spec");
  EXPECT_EQ(Thrown([&] { doc.root()["a"].U64(); }).offset, 14u);  // the parser keeps the last "a"
  Finding f = Thrown([&] { doc.root()["bA"].At(0).String(); });
  EXPECT_EQ(f.offset, 31u);
  EXPECT_EQ(f.message, "bA[0]: must be a string");
}

TEST(JsonReader, UnknownFieldsAreNamed) {
  JsonDocument doc(std::string(R"({"segment_alignment": 128, "segmnt_alignment": 64})"), "", "bad-config");
  Finding f = Thrown([&] { doc.root().RejectUnknown({"segment_alignment"}); });
  EXPECT_EQ(f.message, "segmnt_alignment: unknown field");
  EXPECT_EQ(f.offset, 47u);
}

// ---- every document kind, through the CLI ----

struct Located {
  std::string file;
  std::string path_message;
};

void ExpectLocated(const testing::RunResult& r, const std::string& file, const std::string& message, uint64_t offset) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(file + ": error at offset " + std::to_string(offset) + " "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
}

TEST(JsonReaderCli, ConfigFieldOfTheWrongType) {
  const std::string dir = TempDir("json_cli_config");
  //                   0         1         2
  //                   0123456789012345678901234
  const std::string text = R"({"segment_alignment": "128"})";
  std::ofstream(dir + "/config.json") << text;
  auto r = RunCli({"repack", FixturePath("add.pte"), "--config", dir + "/config.json", "-o", dir + "/o.pte"});
  ExpectLocated(r, dir + "/config.json", "segment_alignment: must be an integer", 22);
  EXPECT_FALSE(std::filesystem::exists(dir + "/o.pte"));
}

TEST(JsonReaderCli, SpecFieldOfTheWrongType) {
  const std::string dir = TempDir("json_cli_spec");
  ASSERT_EQ(RunCli({"extract", FixturePath("add.pte"), "-o", dir + "/x"}).exit_code, 0);
  std::vector<uint8_t> spec = ReadFile(dir + "/x/spec.json");
  std::string text(spec.begin(), spec.end());
  const std::string tail = "\n\"named_data\": [{\"key\": 7, \"zeros\": 4}]\n}\n";
  text = text.substr(0, text.find_last_of('}')) + "," + tail;
  std::ofstream(dir + "/spec.json") << text;
  const uint64_t at = text.find("7, \"zeros\"");
  auto r = RunCli({"pack", dir + "/x/config.json", dir + "/spec.json", "-o", dir + "/o.pte"});
  ExpectLocated(r, dir + "/spec.json", "named_data[0].key: must be a string", at);
}

// A syntax error after the program (read by itself, json_tree.h) is located in the file.
TEST(JsonReaderCli, SpecSyntaxErrorAfterTheProgram) {
  const std::string dir = TempDir("json_cli_spec_syntax");
  ASSERT_EQ(RunCli({"extract", FixturePath("add.pte"), "-o", dir + "/x"}).exit_code, 0);
  std::vector<uint8_t> spec = ReadFile(dir + "/x/spec.json");
  std::string text(spec.begin(), spec.end());
  text = text.substr(0, text.find_last_of('}')) + ",\n\"mutable_data\": [1,]\n}\n";
  std::ofstream(dir + "/spec.json") << text;
  const uint64_t at = text.find(",]");
  auto r = RunCli({"pack", dir + "/x/config.json", dir + "/spec.json", "-o", dir + "/o.pte"});
  ExpectLocated(r, dir + "/spec.json", "not valid JSON", at + 1);  // the ']'
  EXPECT_FALSE(std::filesystem::exists(dir + "/o.pte"));
}

// The program is read where the scan of the spec finds it, and the scan goes
// on after it: what follows is still checked as before (nesting depth, a
// second "program" key).
TEST(JsonReaderCli, SpecTextAfterTheProgramIsStillScanned) {
  const std::string dir = TempDir("json_cli_spec_after");
  ASSERT_EQ(RunCli({"extract", FixturePath("add.pte"), "-o", dir + "/x"}).exit_code, 0);
  std::vector<uint8_t> spec = ReadFile(dir + "/x/spec.json");
  const std::string text(spec.begin(), spec.end());
  const std::string head = text.substr(0, text.find_last_of('}'));
  ASSERT_NE(head.find("\"program\""), std::string::npos);
  // 300 nested lists after the program: the top-level object is depth 1, so
  // the 256th '[' is the first past kMaxJsonDepth (256).
  std::string deep = head + ",\n\"mutable_data\": " + std::string(300, '[') + std::string(300, ']') + "\n}\n";
  std::ofstream(dir + "/deep.json") << deep;
  const uint64_t first = deep.find(std::string(300, '['));
  auto r = RunCli({"pack", dir + "/x/config.json", dir + "/deep.json", "-o", dir + "/o.pte"});
  ExpectLocated(r, dir + "/deep.json", "JSON nests too deeply", first + 255);
  EXPECT_FALSE(std::filesystem::exists(dir + "/o.pte"));
  // A second "program" after the first: nlohmann::json keeps the last one, an
  // empty object, which has no execution plan.
  std::string twice = head + ",\n\"program\": {}\n}\n";
  std::ofstream(dir + "/twice.json") << twice;
  r = RunCli({"pack", dir + "/x/config.json", dir + "/twice.json", "-o", dir + "/o.pte"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("program has no execution_plan list"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/o.pte"));
  // The same text with the program once packs.
  r = RunCli({"pack", dir + "/x/config.json", dir + "/x/spec.json", "-o", dir + "/o.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(JsonReaderCli, ManifestFieldOfTheWrongType) {
  const std::string dir = TempDir("json_cli_manifest");
  const std::string pte = dir + "/add.pte";
  WriteFile(pte, ReadFile(FixturePath("add.pte")));
  ASSERT_EQ(RunCli({"verify", pte, "--write-manifest", dir + "/m.json"}).exit_code, 0);
  std::vector<uint8_t> m = ReadFile(dir + "/m.json");
  std::string text(m.begin(), m.end());
  const size_t v = text.find("\"version\": 1");
  ASSERT_NE(v, std::string::npos);
  text.replace(v, 12, "\"version\": \"1\"");
  std::ofstream(dir + "/m.json", std::ios::trunc) << text;
  auto r = RunCli({"verify", pte, "--manifest", dir + "/m.json"});
  ExpectLocated(r, dir + "/m.json", "version: must be an integer", v + 11);
}

TEST(JsonReaderCli, TestsJsonFieldOfTheWrongType) {
  if (!std::filesystem::exists(FixturePath("bundled_program.bpte"))) GTEST_SKIP() << "no bundled_program.bpte";
  const std::string dir = TempDir("json_cli_tests");
  ASSERT_EQ(RunCli({"bpte", "extract-program", FixturePath("bundled_program.bpte"), "-o", dir + "/p.pte"}).exit_code,
            0);
  //                  0         1         2         3         4
  //                  0123456789012345678901234567890123456789012345
  const std::string text = R"({"method_test_suites": [{"method_name": 3, "test_cases": []}]})";
  std::ofstream(dir + "/tests.json") << text;
  auto r = RunCli({"bpte", "build", dir + "/p.pte", dir + "/tests.json", "-o", dir + "/o.bpte"});
  ExpectLocated(r, dir + "/tests.json", "method_test_suites[0].method_name: must be a string", 40);
}

// The index of a bundle with "format" a number: nlohmann's type_error
// escaped `bundle list` (its own text, no file, no field) and aborted
// fuzz_bundle_reader.
TEST(JsonReaderCli, BundleIndexFieldOfTheWrongType) {
  const std::string dir = TempDir("json_cli_bundle");
  auto r = RunCli({"bundle", "create", FixturePath("add.pte"), "-o", dir + "/b.ptebundle", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<uint8_t> b = ReadFile(dir + "/b.ptebundle");
  const std::string format = "\"format\":\"ptepack-bundle\"";
  auto it = std::search(b.begin(), b.end(), format.begin(), format.end());
  ASSERT_NE(it, b.end());
  const uint64_t value = static_cast<uint64_t>(it - b.begin()) + 9;  // after "format":
  const std::string number = "1234567890123456";                     // as long as "ptepack-bundle" quoted
  std::copy(number.begin(), number.end(), b.begin() + static_cast<std::ptrdiff_t>(value));
  WriteFile(dir + "/b.ptebundle", b);
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"bundle", "list", dir + "/b.ptebundle"}, {"bundle", "extract", dir + "/b.ptebundle", "-o", dir + "/x"}}) {
    r = RunCli(cmd);
    ExpectLocated(r, dir + "/b.ptebundle", "format: not a ptepack bundle index", value);
  }
  Finding f = Thrown([&] { ReadBundle(dir + "/b.ptebundle"); });
  EXPECT_EQ(f.code, "bad-bundle");
  EXPECT_EQ(f.offset, value);
}

}  // namespace
}  // namespace ptepack
