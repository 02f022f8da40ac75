// The CLI's edges (issue 24, items 1-12 and 21), driven through the built `ptepack`: one
// argument and error layer for every command (tools/args.h), the README's exit-code table,
// numbers, repeatable options, output that agrees with itself, docs and help.
//
// Facts come from outside ptepack: the README's table and ExecuTorch's config rules
// (alignments are powers of two), and the fixtures' bytes as reader_test.cpp derives them
// (python3 struct on the headers; xxd).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ptepack/program_builder.h"
#include "ptepack/reader.h"
#include "serialize/model/program_parts.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::RunResult;
using testing::TempDir;
using testing::WriteFile;

bool Contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

json Parse(const std::string& s) { return json::parse(s, nullptr, /*allow_exceptions=*/false); }

std::string Testdata(const std::string& rel) { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/" + rel; }

// The leaf commands the man page (generated from the parser) documents: "inspect", ...,
// "bundle create", "bpte build".
std::set<std::string> LeafCommands() {
  RunResult man = RunCli({"--man"});
  std::vector<std::string> paths;
  std::istringstream in(man.out);
  for (std::string line; std::getline(in, line);) {
    static const std::regex kSection(R"re(^\.SS "ptepack (.*)"$)re");
    std::smatch m;
    if (std::regex_match(line, m, kSection)) paths.push_back(m[1]);
  }
  std::set<std::string> leaves;
  for (const auto& p : paths) {
    bool parent =
        std::any_of(paths.begin(), paths.end(), [&](const std::string& q) { return q.rfind(p + " ", 0) == 0; });
    if (!parent) leaves.insert(p);
  }
  return leaves;
}

// ---------------------------------------------------------------------------
// Item 1: an input that cannot be read gets the library's own located error.

TEST(CliEdges, Item01UnreadableInputsGetTheLibrarysError) {
  const std::string d = TempDir("edges_item1");
  const std::string add = FixturePath("add.pte"), xor_pte = FixturePath("xor.pte");
  const std::string missing = d + "/missing.pte";
  std::filesystem::create_directory(d + "/dir.pte");
  // What the library says of the same file (as Python does): ptepack::Verify throws it.
  Finding lib;
  try {
    Verify(missing);
  } catch (const Error& e) {
    lib = e.finding();
  }
  ASSERT_EQ(lib.code, "open-failed");
  // Each kind of file argument: a positional program, the second of two, a config, a
  // repeatable option, a manifest, a bundle.
  struct Use {
    std::vector<std::string> args;  // "@": the file that cannot be read
    bool json;                      // the command has --json
  };
  const std::vector<Use> uses = {
      {{"repack", "@", "-o", d + "/o.pte"}, true},
      {{"diff", add, "@"}, true},
      {{"pack", "@", Testdata("pack/add_spec.json"), "-o", d + "/o.pte"}, true},
      {{"repack", xor_pte, "--ptd", "@", "-o", d + "/o.pte"}, true},
      {{"verify", add, "--manifest", "@"}, true},
      {{"size", "@"}, true},
      {{"plan", xor_pte, "--ptd", "@"}, true},
      {{"graph", "@"}, false},
      {{"bundle", "list", "@"}, true},
  };
  for (const Use& use : uses) {
    for (const auto& [bad, code] : std::vector<std::pair<std::string, std::string>>{
             {missing, "open-failed"}, {d + "/dir.pte", "not-regular-file"}}) {
      for (bool with_json : {false, true}) {
        if (with_json && !use.json) continue;
        std::vector<std::string> args;
        for (const auto& a : use.args) args.push_back(a == "@" ? bad : a);
        if (with_json) args.push_back("--json");
        RunResult r = RunCli(args);
        const std::string what = args[0] + " " + args[1] + " on " + bad + (with_json ? " --json" : "");
        EXPECT_EQ(r.exit_code, 2) << what << r.err;
        EXPECT_TRUE(Contains(r.err, "ptepack: " + bad + ": error: ")) << what << r.err;
        EXPECT_TRUE(Contains(r.err, "[" + code + "]")) << what << r.err;
        EXPECT_FALSE(Contains(r.err, "Run with --help")) << what << r.err;  // CLI11's
        if (!with_json) continue;
        json j = Parse(r.out);
        ASSERT_FALSE(j.is_discarded()) << what << r.out;
        EXPECT_EQ(j["error"]["code"], code) << what << r.out;
        EXPECT_EQ(j["error"]["file"], bad) << what << r.out;
        if (bad == missing) {
          EXPECT_EQ(j["error"]["message"], lib.message) << what;
        }
      }
    }
  }
  // Several files: the one that cannot be read is counted as unreadable, the others judged.
  RunResult r = RunCli({"verify", add, missing, xor_pte, "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  json j = Parse(r.out);
  ASSERT_TRUE(j.contains("files")) << r.out;
  EXPECT_EQ(j["summary"], "3 files: 2 valid, 0 invalid, 1 unreadable");
  EXPECT_EQ(j["files"][1]["file"], missing);
  EXPECT_EQ(j["files"][1]["error"]["code"], "open-failed");
  EXPECT_EQ(j["files"][0]["valid"], true);
  EXPECT_EQ(j["files"][2]["valid"], true);
  r = RunCli({"inspect", add, d + "/dir.pte"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.out, "==> " + add + " <==")) << r.out;  // the first is still explained
  EXPECT_TRUE(Contains(r.err, d + "/dir.pte: error: not a regular file (a directory)")) << r.err;
}

// ---------------------------------------------------------------------------
// Item 2: one rule for an invalid input. verify/inspect/checksum answer "not valid" (exit
// 1); size, map, graph and diff cannot do their work on it: its first error, once, exit 2,
// and with --json the error object.

TEST(CliEdges, Item02InvalidInputOneRule) {
  const std::string d = TempDir("edges_item2");
  // xor.pte without its last 4 bytes: the flatbuffer is intact, segments[0] (file offset
  // 13824, 8 bytes: python3 struct.unpack_from('<4sIQQ', b, 8) gives segment base 13824)
  // now ends past the end of the file.
  std::vector<uint8_t> bytes = ReadFile(FixturePath("xor.pte"));
  ASSERT_EQ(bytes.size(), 13832u);
  bytes.resize(13828);
  const std::string cut = d + "/segcut.pte";
  WriteFile(cut, bytes);
  WriteFile(d + "/empty.pte", {});
  const std::string line =
      "ptepack: " + cut +
      ": error at offset 13824 (0x3600): segments[0] runs past the end of the file (expected end <= 13828, found "
      "end 13832) [segment-out-of-range]\n";
  for (const auto& cmd : std::vector<std::vector<std::string>>{
           {"size", cut}, {"map", cut, "-o", d + "/m.svg"}, {"graph", cut}, {"diff", cut, FixturePath("xor.pte")}}) {
    RunResult r = RunCli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd[0] << r.err;
    EXPECT_EQ(r.err, line) << cmd[0];  // once, located
    EXPECT_FALSE(std::filesystem::exists(d + "/m.svg"));
  }
  // size: empty and random files too, and --json prints the error object on stdout.
  for (const std::string& f : {cut, d + "/empty.pte"}) {
    RunResult r = RunCli({"size", f, "--json"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    json j = Parse(r.out);
    ASSERT_TRUE(j.contains("error")) << r.out;
    EXPECT_EQ(j["error"]["file"], f);
    EXPECT_EQ(j["error"]["exit_code"], 2);
  }
  json j = Parse(RunCli({"size", cut, "--json"}).out);
  EXPECT_EQ(j["error"]["code"], "segment-out-of-range");
  EXPECT_EQ(j["error"]["offset"], 13824);
  // The judging commands answer.
  EXPECT_EQ(RunCli({"verify", cut}).exit_code, 1);
  EXPECT_EQ(RunCli({"inspect", cut}).exit_code, 1);
  EXPECT_EQ(RunCli({"checksum", cut}).exit_code, 1);
}

// ---------------------------------------------------------------------------
// Item 3: an output in a directory that does not exist says so, not the temporary file's name.

TEST(CliEdges, Item03OutputInAMissingDirectory) {
  const std::string d = TempDir("edges_item3");
  const std::string add = FixturePath("add.pte");
  const std::string nodir = d + "/nodir";
  WriteFile(d + "/file", {1});  // a parent that is a file, not a directory
  struct Use {
    std::vector<std::string> args;  // "@": the output
    bool json;
  };
  const std::vector<Use> uses = {
      {{"repack", add, "-o", "@"}, true},
      {{"split", add, "--external-constants", "w", "-o", "@"}, true},
      {{"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-o", "@"}, true},
      {{"map", add, "-o", "@.svg"}, false},
      {{"graph", add, "-o", "@.dot"}, false},
      {{"bundle", "create", add, "-o", "@"}, false},
      {{"bpte", "extract-program", FixturePath("bundled_program.bpte"), "-o", "@"}, false},
      {{"checksum", add, "--write-manifest", "@"}, true},
      {{"verify", add, "--write-manifest", "@"}, true},
  };
  for (const Use& use : uses) {
    for (const auto& [dir, why] : std::vector<std::pair<std::string, std::string>>{
             {nodir, "directory " + nodir + " does not exist"}, {d + "/file", d + "/file is not a directory"}}) {
      std::vector<std::string> args;
      std::string out;
      for (const auto& a : use.args) {
        if (a[0] != '@') {
          args.push_back(a);
          continue;
        }
        out = dir + "/out" + a.substr(1);
        args.push_back(out);
      }
      if (use.json) args.push_back("--json");
      RunResult r = RunCli(args);
      const std::string what = args[0] + " " + args[1] + " -> " + out;
      EXPECT_EQ(r.exit_code, 2) << what << r.err;
      EXPECT_EQ(r.err, "ptepack: " + out + ": error: cannot write the output: " + why + " [create-failed]\n") << what;
      EXPECT_FALSE(Contains(r.err, ".tmp")) << what << r.err;
      if (use.json) {
        EXPECT_EQ(Parse(r.out)["error"]["file"], out) << what << r.out;
      }
    }
  }
  EXPECT_FALSE(std::filesystem::exists(nodir));
}

// ---------------------------------------------------------------------------
// Item 4: one verdict per file. linear.ptd uses the FlatTensor layout of before June 2025
// (its root table has the legacy `tensors` list: reader_test.cpp), which current runtimes
// reject; inspect, verify, size, map and the library (what Python calls) agree on it, and
// --allow-legacy-ptd makes every one of them accept it.

TEST(CliEdges, Item04OneVerdictPerFile) {
  const std::string d = TempDir("edges_item4");
  const std::string ptd = FixturePath("linear.ptd");
  for (bool allow : {false, true}) {
    std::vector<std::string> flag;
    if (allow) flag.push_back("--allow-legacy-ptd");
    auto run = [&](std::vector<std::string> args) {
      args.insert(args.end(), flag.begin(), flag.end());
      return RunCli(args);
    };
    RunResult v = run({"verify", ptd});
    RunResult i = run({"inspect", ptd});
    RunResult ij = run({"inspect", ptd, "--json"});
    RunResult s = run({"size", ptd});
    RunResult m = run({"map", ptd, "-o", d + "/m.svg"});
    EXPECT_EQ(v.exit_code, allow ? 0 : 1) << v.err;
    EXPECT_EQ(i.exit_code, allow ? 0 : 1) << i.err;
    EXPECT_TRUE(Contains(i.out, allow ? "layout, valid\n" : "layout, INVALID\n")) << i.out;
    EXPECT_EQ(Parse(ij.out)["valid"], allow) << ij.out;
    EXPECT_EQ(s.exit_code, allow ? 0 : 2) << s.err;
    EXPECT_EQ(m.exit_code, allow ? 0 : 2) << m.err;
    if (!allow) {
      EXPECT_TRUE(Contains(s.err, "[legacy-format]")) << s.err;
      EXPECT_TRUE(Contains(s.err, "--allow-legacy-ptd")) << s.err;
    }
    VerifyOptions o;
    o.allow_legacy_ptd = allow;
    EXPECT_EQ(Verify(ptd, o).valid, allow);
    EXPECT_EQ(json::parse(InspectJson(ptd, o))["valid"], allow);
  }
}

// ---------------------------------------------------------------------------
// Item 5: a .bpte where a program is wanted names the `ptepack bpte` command to use; `bpte
// extract-tests` takes its folder with -o like every other command.

TEST(CliEdges, Item05BpteWhereAProgramIsWanted) {
  const std::string d = TempDir("edges_item5");
  const std::string bpte = FixturePath("bundled_program.bpte"), add = FixturePath("add.pte");
  for (const auto& cmd :
       std::vector<std::vector<std::string>>{{"size", bpte},
                                             {"map", bpte, "-o", d + "/m.svg"},
                                             {"graph", bpte},
                                             {"diff", add, bpte},
                                             {"extract", bpte, "-o", d + "/x"},
                                             {"repack", bpte, "-o", d + "/r.pte"},
                                             {"split", bpte, "--external-constants", "w", "-o", d + "/s.pte"},
                                             {"checksum", bpte},
                                             {"repack", add, "--ptd", bpte, "-o", d + "/r.pte"}}) {
    RunResult r = RunCli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd[0] << r.err;
    EXPECT_EQ(r.err, "ptepack: " + bpte + ": error: a BundledProgram (.bpte), not a program: `ptepack bpte " +
                         "extract-program " + bpte + " -o P.pte` writes the program it wraps, for `ptepack " + cmd[0] +
                         " P.pte` [bpte-input]\n")
        << cmd[0];
  }
  EXPECT_TRUE(std::filesystem::is_empty(d));
  // inspect and verify read it as it is.
  EXPECT_EQ(RunCli({"verify", bpte}).exit_code, 0);
  EXPECT_EQ(RunCli({"inspect", bpte}).exit_code, 0);
  // extract-tests -o DIR (4,608-byte sample: one suite of 10 cases, bpte_test.cpp).
  RunResult r = RunCli({"bpte", "extract-tests", bpte, "-o", d + "/t"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "extracted 10 test case(s) to " + d + "/t/\n");
  EXPECT_TRUE(std::filesystem::exists(d + "/t/tests.json"));
  // The old form still works, with a note; both at once is refused.
  r = RunCli({"bpte", "extract-tests", bpte, d + "/t2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "deprecated")) << r.err;
  EXPECT_TRUE(std::filesystem::exists(d + "/t2/tests.json"));
  r = RunCli({"bpte", "extract-tests", bpte, d + "/t3", "-o", d + "/t4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(d + "/t3") || std::filesystem::exists(d + "/t4"));
}

// ---------------------------------------------------------------------------
// Item 6: one parser for every number (config/numbers.h): a negative, empty, non-decimal,
// overflowing or out-of-range value, or an alignment that is not a power of two (ExecuTorch's
// config: alignments are powers of two), gets one message naming the option and the text.

TEST(CliEdges, Item06OneParserForEveryNumber) {
  const std::string d = TempDir("edges_item6");
  const std::string add = FixturePath("add.pte");
  const std::string kAlign = "must be a power of two from 1 to 1073741824";
  struct Opt {
    std::vector<std::string> cmd;  // the option is appended with its value
    std::string option, rule;
    std::vector<std::string> good;
  };
  const std::vector<Opt> opts = {
      {{"verify", add}, "--segment-alignment", kAlign, {"1", "64"}},
      {{"verify", add}, "--tensor-alignment", kAlign, {"4"}},
      {{"inspect", add}, "--segment-alignment", kAlign, {"128"}},
      {{"repack", add, "-o", d + "/r.pte"}, "--segment-alignment", kAlign, {"4096"}},
      {{"repack", add, "-o", d + "/r.pte"}, "--constant-tensor-alignment", kAlign, {"32"}},
      {{"repack", add, "-o", d + "/r.pte"}, "--delegate-alignment", kAlign, {"8"}},
      {{"split", add, "--external-constants", "w", "-o", d + "/s.pte"}, "--ptd-segment-alignment", kAlign, {"64"}},
      {{"size", add}, "--top", "must be a whole number from 0 to 1000000", {"0", "3"}},
      {{"plan", add}, "--alignment", kAlign, {"1", "64"}},
      {{"bundle", "create", add, "-o", d + "/b.ptebundle"}, "--level", "must be a whole number from 1 to 22", {"19"}},
      {{"bundle", "create", add, "-o", d + "/b.ptebundle"}, "--threads", "must be a whole number from 0 to 256", {"2"}},
  };
  // Every bad text through the first alignment and the first whole number; each other option
  // gets the issue's three (negative, empty, overflowing) and one of its own range, enough to
  // show it goes through the same parser (each run is a process: seconds under ASan).
  const std::vector<std::string> bad_any = {"-1", "", "99999999999999999999", "abc", "0x10", " 8", "8 ", "+8", "1e3"};
  const std::vector<std::string> bad_issue = {"-1", "", "99999999999999999999"};
  for (const Opt& o : opts) {
    const bool all = &o == &opts.front() || o.option == "--top";
    std::vector<std::string> bad = all ? bad_any : bad_issue;
    if (o.rule == kAlign) {
      const std::vector<std::string> more =
          all ? std::vector<std::string>{"0", "100", "48", "2147483648"} : std::vector<std::string>{"100"};
      bad.insert(bad.end(), more.begin(), more.end());
    }
    if (o.option == "--top") bad.push_back("1000001");
    if (o.option == "--level") bad.insert(bad.end(), {"0", "23"});
    if (o.option == "--threads") bad.push_back("257");
    for (const auto& v : bad) {
      std::vector<std::string> args = o.cmd;
      args.insert(args.end(), {o.option, v});
      RunResult r = RunCli(args);
      EXPECT_EQ(r.exit_code, 2) << o.option << " '" << v << "'" << r.err;
      EXPECT_EQ(r.err, "ptepack: error: " + o.option + ": " + o.rule + " (found \"" + v + "\") [bad-number]\n")
          << o.option << " '" << v << "'";
    }
    for (const auto& v : o.good) {
      std::vector<std::string> args = o.cmd;
      args.insert(args.end(), {o.option, v, "-q"});
      if (args[0] == "inspect" || args[0] == "size") args.pop_back();  // no -q: their output is the point
      RunResult r = RunCli(args);
      EXPECT_EQ(r.exit_code, 0) << o.option << " " << v << r.err;
    }
  }
  // With --json, the error object; repack writes nothing.
  RunResult r = RunCli({"repack", add, "-o", d + "/j.pte", "--segment-alignment", "-1", "--json"});
  json j = Parse(r.out);
  EXPECT_EQ(j["error"]["code"], "bad-number");
  EXPECT_EQ(j["error"]["message"], "--segment-alignment: " + kAlign);
  EXPECT_FALSE(std::filesystem::exists(d + "/j.pte"));
  // The library's options, as Python's keyword arguments: the same rule.
  VerifyOptions vo;
  vo.segment_alignment = 100;
  try {
    Verify(add, vo);
    ADD_FAILURE() << "segment_alignment 100 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "bad-number");
    EXPECT_EQ(e.finding().message, "segment_alignment: " + kAlign);
  }
}

// ---------------------------------------------------------------------------
// Item 7: a repeatable option takes one value per occurrence and never swallows the
// positional argument after it. xor.pte keeps its 4 weights in xor.ptd (reader_test.cpp).

TEST(CliEdges, Item07RepeatableOptionsLeavePositionalsAlone) {
  const std::string d = TempDir("edges_item7");
  const std::string pte = FixturePath("xor.pte"), ptd = FixturePath("xor.ptd");
  auto ok = [](const RunResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    return r;
  };
  // verify/inspect: the .ptd goes with the FILE after it when it comes first.
  RunResult r = ok(RunCli({"verify", "--ptd", ptd, pte}), "verify --ptd");
  EXPECT_EQ(r.out, pte + ": OK\n");  // no "program only" note: the .ptd was used
  json j = Parse(ok(RunCli({"inspect", "--ptd", ptd, pte, "--json"}), "inspect --ptd").out);
  ASSERT_EQ(j["external_tensors"].size(), 4u);
  for (const auto& e : j["external_tensors"]) EXPECT_EQ(e["found"], true);
  // The writers: --ptd before IN.pte, and given twice.
  for (const char* sub : {"/r", "/s", "/r2"}) std::filesystem::create_directory(d + sub);
  ok(RunCli({"repack", "--ptd", ptd, pte, "-o", d + "/r/x.pte"}), "repack --ptd");
  EXPECT_TRUE(std::filesystem::exists(d + "/r/xor.ptd"));
  r = ok(RunCli({"split", "--ptd", ptd, pte, "--external-constants", "w", "-o", d + "/s/x.pte", "--dry-run"}),
         "split --ptd");
  EXPECT_TRUE(Contains(r.out, d + "/s/xor.ptd")) << r.out;
  ok(RunCli({"extract", "--ptd", ptd, pte, "-o", d + "/x"}), "extract --ptd");
  EXPECT_TRUE(std::filesystem::exists(d + "/x/spec.json"));
  std::filesystem::create_directory(d + "/p");
  ok(RunCli({"plan", "--ptd", ptd, pte, "-o", d + "/p/x.pte", "-q"}), "plan --ptd");
  EXPECT_TRUE(std::filesystem::exists(d + "/p/xor.ptd"));  // rewritten beside the output
  r = RunCli({"repack", "--ptd", ptd, "--ptd", ptd, pte, "-o", d + "/r2/x.pte"});
  EXPECT_TRUE(Contains(r.err, "xor.ptd")) << r.err;  // twice the same .ptd: the writer says so, by name
  // The readers.
  j = Parse(ok(RunCli({"size", "--ptd", ptd, pte, "--json"}), "size --ptd").out);
  EXPECT_EQ(j["ptds"].size(), 1u);
  j = Parse(ok(RunCli({"checksum", "--ptd", ptd, pte, "--json"}), "checksum --ptd").out);
  EXPECT_EQ(j["files"].size(), 2u);
  for (const auto& args : std::vector<std::vector<std::string>>{{"diff", "--ptd-a", ptd, pte, "--ptd-b", ptd, pte},
                                                                {"diff", pte, "--ptd-a", ptd, pte, "--ptd-b", ptd}}) {
    r = ok(RunCli(args), "diff --ptd-a/--ptd-b");
    EXPECT_TRUE(Contains(r.out, "identical: every file byte for byte the same")) << r.out;
  }
}

// ---------------------------------------------------------------------------
// `ptepack plan` and `map --memory` on the argument layer: --algorithm is a named choice
// (README synopsis: executorch-greedy|best-fit|exact|best), a single-valued option given twice
// is refused, --log is for the byte map only, and the README's exit-code table holds: 0 for
// the report, 2 with nothing written for a refusal, the --json error object.

TEST(CliEdges, PlanAndMapMemoryOnTheArgumentLayer) {
  const std::string d = TempDir("edges_plan");
  const std::string x = FixturePath("xor.pte");
  RunResult r = RunCli({"plan", x, "--algorithm", "fastest", "-o", d + "/o.pte"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "ptepack: error: --algorithm: must be one of executorch-greedy, best-fit, exact, best (found "
            "\"fastest\") [bad-choice]\n");
  EXPECT_FALSE(std::filesystem::exists(d + "/o.pte"));
  json j = Parse(RunCli({"plan", x, "--algorithm", "", "--json"}).out);
  EXPECT_EQ(j["error"]["code"], "bad-choice");
  EXPECT_EQ(j["error"]["exit_code"], 2);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"plan", x, "--algorithm", "best", "--algorithm", "exact"},
                                             {"plan", x, "--alignment", "16", "--alignment", "32"},
                                             {"plan", x, "--output", d + "/a.pte", "-o", d + "/b.pte"}}) {
    r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args[2];
    EXPECT_TRUE(Contains(r.err, args[2] + ": given 2 times")) << r.err;
    EXPECT_TRUE(Contains(r.err, "[usage]")) << r.err;
  }
  // A name other than the default is taken; the report says which one -o writes.
  j = Parse(RunCli({"plan", x, "--algorithm", "best-fit", "--json"}).out);
  EXPECT_EQ(j["algorithm"], "best-fit");
  // -q: nothing on success, with or without -o; the written file is there.
  r = RunCli({"plan", x, "--ptd", FixturePath("xor.ptd"), "-o", d + "/q.pte", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
  EXPECT_TRUE(std::filesystem::exists(d + "/q.pte"));
  // map --memory: the input checked as map's; --log refused, nothing written.
  r = RunCli({"map", "--memory", x, "--log", "-o", d + "/m.svg"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ptepack: error: map: --log is for the byte map, not --memory [usage]\n");
  EXPECT_FALSE(std::filesystem::exists(d + "/m.svg"));
  r = RunCli({"map", "--memory", FixturePath("bundled_program.bpte"), "-o", d + "/m.svg"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "[bpte-input]")) << r.err;
  r = RunCli({"map", "--memory", x, "-o", d + "/m.html", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out + r.err, "");
}

// ---------------------------------------------------------------------------
// Item 8: a setting the file cannot tell is shown as the range that fits, and diff reports
// a change only when no one value fits both files.

uint64_t U64At(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[at + i];
  return v;
}

TEST(CliEdges, Item08SettingsShownAsTheRangeThatFits) {
  const std::string d = TempDir("edges_item8");
  const std::string ks = FixturePath("keyword_spotting.pte");
  ASSERT_EQ(RunCli({"repack", ks, "--segment-alignment", "4096", "-o", d + "/k4k.pte", "-q"}).exit_code, 0);
  // The range, from the bytes (python3 struct.unpack_from('<4sIQQ', b, 8)): one segment at
  // offset 0 of the segment data, which starts at AlignUp(program_size, a); every power of
  // two a with AlignUp(program_size, a) == segment_base_offset writes this file.
  const std::vector<uint8_t> b = ReadFile(d + "/k4k.pte");
  ASSERT_EQ(std::string(b.begin() + 8, b.begin() + 12), "eh00");
  const uint64_t program_size = U64At(b, 16), base = U64At(b, 24);
  EXPECT_EQ(base, 16384u);
  std::vector<uint64_t> fit;
  for (uint64_t a = 1; a <= (1u << 20); a <<= 1) {
    if ((program_size + a - 1) / a * a == base) fit.push_back(a);
  }
  ASSERT_FALSE(fit.empty());
  const std::string range = std::to_string(fit.front()) + ".." + std::to_string(fit.back());
  EXPECT_EQ(range, "2048..16384");  // 4096, the value asked for, is inside it
  json j = Parse(RunCli({"inspect", d + "/k4k.pte", "--json"}).out);
  ASSERT_EQ(j["segments"].size(), 1u);
  EXPECT_EQ(j["segments"][0]["offset"], 0);
  RunResult r = RunCli({"inspect", d + "/k4k.pte"});
  EXPECT_TRUE(Contains(r.out, "written with: segment alignment " + range + ",")) << r.out;
  // diff: 128 (the original, which its offsets pin down) against the range.
  r = RunCli({"diff", ks, d + "/k4k.pte", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  j = Parse(r.out);
  int segment_alignment_changes = 0;
  for (const auto& c : j["changes"]) {
    if (c["subject"] != "segment_alignment") continue;
    ++segment_alignment_changes;
    EXPECT_EQ(c["a"], "128");
    EXPECT_EQ(c["b"], range);
  }
  EXPECT_EQ(segment_alignment_changes, 1) << r.out;
  // add.pte has no segments, constants or delegates: any alignment fits it, so no alignment
  // differs from the repacked file's (their content does). Their flatbuffer orders do differ:
  // add.pte was written by flatc, keyword_spotting by the Python object API (README,
  // "Byte-identical output"), and no one order writes both.
  r = RunCli({"diff", FixturePath("add.pte"), d + "/k4k.pte", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  j = Parse(r.out);  // kept: a range-for over a temporary's member would read freed memory
  std::set<std::string> config_changes;
  for (const auto& c : j["changes"]) {
    if (c["category"] == "config") config_changes.insert(c["subject"].get<std::string>());
  }
  EXPECT_EQ(config_changes, (std::set<std::string>{"flatbuffer_order"})) << r.out;
}

// ---------------------------------------------------------------------------
// Item 9: -q silences every command's success output (README, "Progress and --quiet").

TEST(CliEdges, Item09QuietMeansNothingOnSuccess) {
  const std::string d = TempDir("edges_item9");
  const std::string add = FixturePath("add.pte"), bpte = FixturePath("bundled_program.bpte");
  std::filesystem::create_directory(d + "/s");
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"verify", {"verify", add}},
      {"verify", {"verify", add, "--checksum"}},
      {"verify", {"verify", add, "--write-manifest", d + "/m.json"}},
      {"verify", {"verify", add, "--manifest", d + "/m.json"}},
      {"checksum", {"checksum", add}},
      {"checksum", {"checksum", add, "--write-manifest", d + "/c.json"}},
      {"checksum", {"checksum", add, "--manifest", d + "/c.json"}},
      {"diff", {"diff", add, add}},
      {"repack", {"repack", add, "-o", d + "/r.pte"}},
      {"split",
       {"split", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd"), "--external-constants", "w", "-o",
        d + "/s/x.pte"}},
      {"pack", {"pack", Testdata("pack/config.json"), Testdata("pack/add_spec.json"), "-o", d + "/p.pte"}},
      {"extract", {"extract", add, "-o", d + "/x"}},
      {"map", {"map", add, "-o", d + "/m.svg"}},
      {"map", {"map", "--memory", add, "-o", d + "/mm.svg"}},
      {"plan", {"plan", add}},
      {"plan", {"plan", add, "-o", d + "/pl.pte"}},
      {"graph", {"graph", add, "-o", d + "/g.dot"}},
      {"bundle create", {"bundle", "create", add, "-o", d + "/b.ptebundle"}},
      {"bundle extract", {"bundle", "extract", d + "/b.ptebundle", "-o", d + "/bx"}},
      {"bpte extract-program", {"bpte", "extract-program", bpte, "-o", d + "/p2.pte"}},
      {"bpte extract-tests", {"bpte", "extract-tests", bpte, "-o", d + "/t"}},
      {"bpte build", {"bpte", "build", d + "/p2.pte", d + "/t/tests.json", "-o", d + "/b2.bpte"}},
  };
  std::set<std::string> covered;
  for (const auto& [command, args] : runs) {
    std::vector<std::string> q = args;
    q.push_back("-q");
    RunResult r = RunCli(q);
    std::string what;
    for (const auto& a : q) what += " " + a;
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    EXPECT_EQ(r.out, "") << what;
    EXPECT_EQ(r.err, "") << what;
    covered.insert(command);
  }
  // Every command that has -q is in the list above.
  std::set<std::string> with_quiet;
  for (const std::string& c : LeafCommands()) {
    std::vector<std::string> args = {"help"};
    std::istringstream words(c);
    for (std::string w; words >> w;) args.push_back(w);
    if (Contains(RunCli(args).out, "-q,--quiet")) with_quiet.insert(c);
  }
  EXPECT_EQ(covered, with_quiet);
  // Without -q the same runs speak (a check that the list exercises the output -q hides).
  EXPECT_FALSE(RunCli({"verify", add, "--manifest", d + "/m.json"}).out.empty());
  EXPECT_FALSE(RunCli({"bundle", "create", add, "-o", d + "/b3.ptebundle"}).out.empty());
}

// ---------------------------------------------------------------------------
// Item 10: output that agrees with itself. One definition of each size (README, "Sizes"),
// from the bytes: header = 8 + eh00's length field (python3: struct.unpack_from('<4sIQ', b,
// 8)), flatbuffer = program size - header, program size = eh00's program_size or the file.

TEST(CliEdges, Item10OneDefinitionOfEachSize) {
  const std::string d = TempDir("edges_item10");
  for (const std::string& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    const std::string f = FixturePath(name);
    const std::vector<uint8_t> b = ReadFile(f);
    const bool eh00 = b.size() >= 32 && std::string(b.begin() + 8, b.begin() + 12) == "eh00";
    const uint64_t length = eh00 ? (b[12] | b[13] << 8 | b[14] << 16 | uint64_t{b[15]} << 24) : 0;
    const uint64_t program = eh00 ? U64At(b, 16) : b.size();
    const uint64_t header = 8 + length, flatbuffer = program - header;
    // inspect, text and JSON.
    json j = Parse(RunCli({"inspect", f, "--json"}).out);
    EXPECT_EQ(j["header"]["program_size"], program);
    EXPECT_EQ(j["header"]["header_size"], header);
    EXPECT_EQ(j["header"]["flatbuffer_size"], flatbuffer);
    EXPECT_TRUE(Contains(RunCli({"inspect", f}).out, "program size " + std::to_string(program) + " (header " +
                                                         std::to_string(header) + " + flatbuffer " +
                                                         std::to_string(flatbuffer) + ")"));
    // size: its header and flatbuffer groups.
    std::vector<std::string> ptd;
    const std::string ptd_name = name.substr(0, name.size() - 4) + ".ptd";
    if (std::filesystem::exists(testing::FixturesDir() + "/" + ptd_name)) ptd = {"--ptd", FixturePath(ptd_name)};
    std::vector<std::string> args = {"size", f, "--json", "--allow-legacy-ptd"};
    args.insert(args.end(), ptd.begin(), ptd.end());
    j = Parse(RunCli(args).out);
    uint64_t fb = 0, hd = 0;
    for (const auto& p : j["parts"]) {
      if (p["group"] == "flatbuffer") fb += p["bytes"].get<uint64_t>();
      if (p["group"] == "header") hd += p["bytes"].get<uint64_t>();
    }
    EXPECT_EQ(fb, flatbuffer);
    EXPECT_EQ(hd, header);
    // repack --json (the input reproduced) and diff.
    args = {"repack", f, "-o", d + "/" + name, "--json", "--force"};
    args.insert(args.end(), ptd.begin(), ptd.end());
    j = Parse(RunCli(args).out);
    EXPECT_EQ(j["flatbuffer_size"], flatbuffer) << j.dump();
    j = Parse(RunCli({"diff", f, f, "--json"}).out);
    EXPECT_EQ(j["a"]["sizes"]["flatbuffer"], flatbuffer);
  }
  // A program without eh00 that lists an (empty) segment: no "no segments" next to a list of
  // segments. linear.pte: segments = [{offset 0, size 0}] (flatc --json).
  RunResult r = RunCli({"inspect", FixturePath("linear.pte")});
  EXPECT_FALSE(Contains(r.out, "no segments")) << r.out;
  EXPECT_TRUE(Contains(r.out, "no extended header, so no segment data")) << r.out;
  EXPECT_TRUE(Contains(r.out, "segments (1):\n  [0] empty: constants\n")) << r.out;
  // An empty constant_buffer (every current file has one) is not "legacy constants";
  // module_linear_no_constant_segment.pte's 84 bytes of them are (size_test.cpp).
  r = RunCli({"size", FixturePath("add.pte")});
  EXPECT_FALSE(Contains(r.out, "constant buffers")) << r.out;
  EXPECT_FALSE(Contains(r.out, "inline constants")) << r.out;
  EXPECT_TRUE(Contains(RunCli({"size", FixturePath("module_linear_no_constant_segment.pte")}).out,
                       "inline constants (constant_buffer)"));
}

// ---------------------------------------------------------------------------
// Item 11: the settings a file cannot tell are said once; --verbose and --json list them.

TEST(CliEdges, Item11AmbiguousSettingsSaidOnce) {
  // add.pte: no eh00, no constants, no delegates (reader_test.cpp): its segment, constant
  // and delegate alignments, delegate extraction and flatc/flatc-legacy cannot be told.
  const std::string add = FixturePath("add.pte");
  const json cfg = Parse(RunCli({"inspect", add, "--json"}).out)["config"];
  const size_t n = cfg["ambiguous"].size();
  ASSERT_GE(n, 5u) << cfg.dump();
  RunResult r = RunCli({"inspect", add});
  EXPECT_FALSE(Contains(r.out, "ambiguous")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\n  " + std::to_string(n) +
                                  " settings cannot be told from this file (any value shown writes the same bytes); "
                                  "--verbose lists them\n"))
      << r.out;
  r = RunCli({"inspect", add, "--verbose"});
  for (const auto& a : cfg["ambiguous"]) {
    const std::string line = "\n    " + a["field"].get<std::string>() + ": " + a["fits"]["text"].get<std::string>() +
                             " (" + a["chosen"].get<std::string>() + " chosen); " + a["why"].get<std::string>() + "\n";
    EXPECT_TRUE(Contains(r.out, line)) << line << r.out;
  }
}

// ---------------------------------------------------------------------------
// Item 12: tables that keep their columns, no rows of nothing, no silence, "1 segment", and a
// count before a long list.

TEST(CliEdges, Item12TablesCountsAndSilence) {
  const std::string d = TempDir("edges_item12");
  // A method name longer than the old 28-character column, with 16 bytes of planned memory.
  ProgramBuilder b;
  const std::string long_name = std::string(40, 'x') + "_forward";
  for (const std::string& name : {long_name, std::string("f")}) {
    auto& m = b.AddMethod(name);
    const int32_t x = static_cast<int32_t>(m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}}));
    m.Inputs({x});
    m.Outputs({x});
    m.PlannedBufferSizes({0, 16});
  }
  WritePackage(b.Build(), BackendConfig{}, d + "/long.pte");
  RunResult r = RunCli({"size", d + "/long.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string table = r.out.substr(r.out.find("runtime memory"));
  // The table's rows; under each method and the total, its plan against the lower bound (one
  // tensor of 16 bytes per method, alive throughout: the bound is the size).
  std::vector<std::string> lines, plan_lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    (line.rfind("    planned ", 0) == 0 ? plan_lines : lines).push_back(line);
  }
  EXPECT_EQ(plan_lines, (std::vector<std::string>{"    planned 16 B, lower bound 16 B (0.0 % above)",
                                                  "    planned 16 B, lower bound 16 B (0.0 % above)",
                                                  "    planned 32 B, lower bound 32 B (0.0 % above)"}))
      << table;
  ASSERT_EQ(lines.size(), 5u) << table;  // title, header, 2 methods, (all methods)
  for (size_t i = 2; i < lines.size(); ++i) EXPECT_EQ(lines[i].size(), lines[1].size()) << table;
  EXPECT_TRUE(Contains(table, "\n  " + long_name + " ")) << table;
  // stories260k_qnn.pte: kv_forward and prefill_forward hold the two delegates; every other
  // method is a metadata method (flatc --json: no inputs, no instructions, no planned memory).
  const std::string qnn = FixturePath("stories260k_qnn.pte");
  const size_t methods = Parse(RunCli({"inspect", qnn, "--json"}).out)["methods"].size();
  ASSERT_EQ(methods, 29u);
  r = RunCli({"size", qnn});
  EXPECT_TRUE(Contains(r.out, "\n  kv_forward ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\n  prefill_forward ")) << r.out;
  EXPECT_FALSE(Contains(r.out, "\n  get_max_seq_len ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\n  27 methods need no memory of their own")) << r.out;
  r = RunCli({"size", qnn, "--top", "1"});
  EXPECT_TRUE(Contains(r.out, "), 1 of 2 methods (--top)\n")) << r.out;
  EXPECT_FALSE(Contains(r.out, "\n  prefill_forward ")) << r.out;
  // inspect --tensor with no match says so.
  r = RunCli({"inspect", FixturePath("xor.pte"), "--tensor", "no-such-name"});
  EXPECT_TRUE(Contains(r.out, "no stored tensor's name contains \"no-such-name\"")) << r.out;
  EXPECT_FALSE(Contains(RunCli({"inspect", FixturePath("xor.pte"), "--tensor", "linear"}).out, "no stored tensor"));
  // One segment (add.pte lists one, empty: reader_test.cpp).
  r = RunCli({"repack", FixturePath("add.pte"), "-o", d + "/a.pte"});
  EXPECT_TRUE(Contains(r.err, "(728 bytes, 1 segment)")) << r.err;
  // diff of a split file: the count first. conv2d_quantized.pte's 2 constants move to w.ptd.
  std::filesystem::create_directory(d + "/s");
  ASSERT_EQ(
      RunCli({"split", FixturePath("conv2d_quantized.pte"), "--external-constants", "w", "-o", d + "/s/c.pte", "-q"})
          .exit_code,
      0);
  r = RunCli({"diff", FixturePath("conv2d_quantized.pte"), d + "/s/c.pte", "--ptd-b", d + "/s/w.ptd"});
  const size_t count = r.out.find("\nchanges: "), list = r.out.find("\nconstant (layout only):");
  ASSERT_NE(count, std::string::npos) << r.out;
  EXPECT_LT(count, list) << r.out;
  EXPECT_TRUE(Contains(r.out, "constant 2 moved")) << r.out;
  json j = Parse(
      RunCli({"diff", FixturePath("conv2d_quantized.pte"), d + "/s/c.pte", "--ptd-b", d + "/s/w.ptd", "--json"}).out);
  EXPECT_EQ(j["summary"]["constant"]["moved"], 2);
}

// ---------------------------------------------------------------------------
// Item 21: docs and help that agree with the tool.

// The options a command's help lists: {"-o", "--output", "--json", ...}.
std::set<std::string> HelpOptions(const std::string& command) {
  std::vector<std::string> args = {"help"};
  std::istringstream words(command);
  for (std::string w; words >> w;) args.push_back(w);
  std::set<std::string> out;
  std::istringstream in(RunCli(args).out);
  static const std::regex kOption(R"(^  (-[a-zA-Z]),?(--[a-z][a-z0-9-]*)?|^  (--[a-z][a-z0-9-]*))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, kOption)) continue;
    for (int i = 1; i <= 3; ++i) {
      if (m[i].matched) out.insert(m[i]);
    }
  }
  return out;
}

// `text` without its [optional] groups; `( A | B )` as A; `x|y` as x.
std::string FirstForm(const std::string& text) {
  std::string out;
  int bracket = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[') ++bracket;
    if (bracket == 0) out += c;
    if (c == ']') --bracket;
  }
  std::string no_paren;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '(') {
      const size_t close = out.find(')', i), bar = out.find(" | ", i);
      no_paren += out.substr(i + 1, std::min(close, bar) - i - 1);
      i = close;
    } else {
      no_paren += out[i];
    }
  }
  std::istringstream words(no_paren);
  std::string result;
  for (std::string w; words >> w;) result += (result.empty() ? "" : " ") + w.substr(0, w.find('|'));
  return result;
}

TEST(CliEdges, Item21ReadmeExamplesRunAsWritten) {
  // Every line of a README code block that runs ptepack: a usage synopsis ([optional],
  // (a | b), x|y) must name only options its command's help lists, and its first form, like
  // every plain example, runs (exit 0) in a directory holding the files it names: FILE,
  // IN.pte, A.pte, B.pte (add.pte), CONFIG.json, SPEC.json (testdata/pack), B (a bundle),
  // X.bpte (the real BundledProgram), P.pte/prog.pte (its program), TESTS.json and DIR/ (its
  // tests, and an extract of add.pte).
  const std::string src = std::string(PTEPACK_SOURCE_DIR);
  std::ifstream in(src + "/README.md");
  std::vector<std::pair<int, std::string>> lines;  // README line number, command text
  bool fence = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("```", 0) == 0) {
      fence = !fence;
      continue;
    }
    if (!fence && line.rfind("    ", 0) != 0) continue;
    std::string t = line.substr(line.find_first_not_of(' ') == std::string::npos ? 0 : line.find_first_not_of(' '));
    if (t.rfind("ptepack ", 0) == 0) {
      lines.push_back({n, t});
    } else if (!lines.empty() && lines.back().first == n - 1 && (t[0] == '[' || t[0] == '(')) {
      lines.back().second += " " + t;  // a synopsis continued on the next line
      lines.back().first = n;
    }
  }
  ASSERT_GE(lines.size(), 20u);
  const std::string d = TempDir("edges_readme");
  const std::string add = FixturePath("add.pte"), bpte = FixturePath("bundled_program.bpte");
  ASSERT_EQ(RunCli({"bundle", "create", add, "-o", d + "/B", "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"bpte", "extract-program", bpte, "-o", d + "/P.pte", "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"bpte", "extract-tests", bpte, "-o", d + "/tests", "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"extract", add, "-o", d + "/DIR", "-q"}).exit_code, 0);
  for (const auto& e : std::filesystem::directory_iterator(d + "/tests")) {
    std::filesystem::copy(e.path(), d + "/DIR/" + e.path().filename().string());
  }
  const std::map<std::string, std::string> files = {{"FILE", add},
                                                    {"IN.pte", add},
                                                    {"A.pte", add},
                                                    {"B.pte", add},
                                                    {"FILE.pte", add},
                                                    {"X.bpte", bpte},
                                                    {"P.pte", d + "/P.pte"},
                                                    {"prog.pte", d + "/P.pte"},
                                                    {"B", d + "/B"},
                                                    {"CONFIG.json", Testdata("pack/config.json")},
                                                    {"SPEC.json", Testdata("pack/add_spec.json")},
                                                    {"TESTS.json", d + "/tests/tests.json"}};
  int synopses = 0, runs = 0;
  for (const auto& [at, raw] : lines) {
    std::string text = raw.substr(0, raw.find(" #"));
    // A synopsis's description after it ("  what changed (exit 0 same, 1 different)").
    static const std::regex kDescription(R"(\s{2,}[a-zX][a-zA-Z0-9]* [a-z].*$)");
    text = std::regex_replace(text, kDescription, "");
    const std::string where = "README.md:" + std::to_string(at) + ": " + text;
    // `bundle create ... | list B | extract B -o DIR`: one command per alternative.
    std::vector<std::string> alternatives;
    int depth = 0;
    size_t from = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      depth += text[i] == '[' || text[i] == '(' ? 1 : text[i] == ']' || text[i] == ')' ? -1 : 0;
      if (depth == 0 && text.compare(i, 3, " | ") == 0) {
        alternatives.push_back(text.substr(from, i - from));
        from = i + 3;
      }
    }
    alternatives.push_back(text.substr(from));
    std::istringstream head(alternatives[0]);
    std::string word, top;
    head >> word >> top;  // "ptepack", the command
    for (size_t k = 0; k < alternatives.size(); ++k) {
      std::string cmd = k == 0 ? alternatives[k] : "ptepack " + top + " " + alternatives[k];
      const bool synopsis = cmd.find_first_of("[(|") != std::string::npos || Contains(cmd, "...");
      const std::string first = FirstForm(cmd);
      std::istringstream words(first);
      std::vector<std::string> argv;
      for (std::string w; words >> w;) argv.push_back(w);
      ASSERT_GE(argv.size(), 2u) << where;
      std::string path = argv[1];
      if (LeafCommands().count(path + " " + (argv.size() > 2 ? argv[2] : ""))) path += " " + argv[2];
      ASSERT_TRUE(LeafCommands().count(path)) << where << ": no command \"" << path << "\"";
      if (synopsis) {
        ++synopses;
        const std::set<std::string> known = HelpOptions(path);
        static const std::regex kFlag(R"((^|[\s\[(|])(--?[a-z][a-z0-9-]*))");
        for (std::sregex_iterator it(cmd.begin(), cmd.end(), kFlag), end; it != end; ++it) {
          EXPECT_TRUE(known.count((*it)[2])) << where << ": " << path << " has no " << (*it)[2];
        }
      }
      // Run the first form where the files it names are.
      const std::string sandbox = TempDir("edges_readme_run");
      std::vector<std::string> args;
      for (size_t i = 1; i < argv.size(); ++i) {
        std::string a = argv[i];
        const bool output = i > 1 && (argv[i - 1] == "-o" || argv[i - 1] == "--output");
        if (!output && files.count(a)) {
          std::filesystem::copy(files.at(a), sandbox + "/" + a);
        } else if (!output && a.rfind("DIR/", 0) == 0 && !std::filesystem::exists(sandbox + "/DIR")) {
          std::filesystem::copy(d + "/DIR", sandbox + "/DIR");
        }
        args.push_back(a);
      }
      if (args[0] == "bpte" && args[1] == "build" && std::find(args.begin(), args.end(), "TESTS.json") != args.end()) {
        for (const auto& e : std::filesystem::directory_iterator(d + "/tests")) {  // its data files beside it
          if (e.path().filename() != "tests.json")
            std::filesystem::copy(e.path(), sandbox + "/" + e.path().filename().string());
        }
      }
      const char* other = std::getenv("PTEPACK_TEST_CLI");  // as RunCli: another ptepack to test
      std::string line =
          "cd " + testing::ShellQuote(sandbox) + " && " + testing::ShellQuote(other && *other ? other : PTEPACK_CLI);
      for (const auto& a : args) line += " " + testing::ShellQuote(a);
      const int rc = std::system((line + " >/dev/null 2>" + testing::ShellQuote(sandbox + "/.err")).c_str());
      ++runs;
      std::ifstream err(sandbox + "/.err");
      std::stringstream es;
      es << err.rdbuf();
      EXPECT_EQ(rc, 0) << where << "\n  ran: " << first << "\n" << es.str();
    }
  }
  EXPECT_GE(synopses, 15);
  EXPECT_GE(runs, 25);
}

TEST(CliEdges, Item21HelpManPageAndCompletion) {
  // Flags take no value in the man page; values are named (N, FILE, flatc|...).
  const std::string man = RunCli({"--man"}).out;
  EXPECT_FALSE(Contains(man, "VALUE")) << man.substr(0, 2000);
  EXPECT_TRUE(Contains(man, "\\fB\\-\\-json\\fR\n")) << man.substr(0, 2000);
  EXPECT_TRUE(Contains(man, "\\fB\\-\\-segment\\-alignment\\fR \\fIN\\fR")) << man.substr(0, 2000);
  // --help names help, completion and --man.
  const std::string help = RunCli({"--help"}).out;
  for (const char* s : {"ptepack help CMD", "ptepack completion bash|zsh", "ptepack --man"}) {
    EXPECT_TRUE(Contains(help, s)) << s << "\n" << help;
  }
  // help of a nested command is that command's.
  RunResult r = RunCli({"help", "bundle", "create"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.out, "Usage: ptepack bundle create [OPTIONS] FILE...")) << r.out;
  EXPECT_FALSE(Contains(r.out, "Subcommands:")) << r.out;
  // pack: -o is required, and the README section it names exists.
  r = RunCli({"help", "pack"});
  EXPECT_TRUE(Contains(r.out, "-o,--output OUT.pte REQUIRED")) << r.out;
  EXPECT_FALSE(Contains(r.out, "in-place")) << r.out;
  std::ifstream readme(std::string(PTEPACK_SOURCE_DIR) + "/README.md");
  std::stringstream rs;
  rs << readme.rdbuf();
  EXPECT_TRUE(Contains(r.out, "see README, \"Pack specs\"")) << r.out;
  EXPECT_TRUE(Contains(rs.str(), "\n### Pack specs\n"));
  EXPECT_FALSE(Contains(rs.str(), "not supported")) << "README: .bpte files are supported";
  // bash completion of an option's value: its choices, nothing for a number, files for a path.
  const std::string dir = TempDir("edges_bash");
  const std::string script = RunCli({"completion", "bash"}).out;
  WriteFile(dir + "/c.bash", std::vector<uint8_t>(script.begin(), script.end()));
  WriteFile(dir + "/model.pte", {1});
  auto complete = [&](const std::string& words) {
    const std::string cmd = "cd " + testing::ShellQuote(dir) + " && bash -c " +
                            testing::ShellQuote("source ./c.bash; COMP_WORDS=(" + words +
                                                "); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _ptepack; printf '%s\\n' "
                                                "\"${COMPREPLY[@]}\"") +
                            " > " + testing::ShellQuote(dir + "/out");
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    std::set<std::string> out;
    std::ifstream f(dir + "/out");
    for (std::string line; std::getline(f, line);) {
      if (!line.empty()) out.insert(line);
    }
    return out;
  };
  EXPECT_EQ(complete("ptepack repack m.pte --flatbuffer-order ''"),
            (std::set<std::string>{"flatc", "flatc-legacy", "python", "python-2026"}));
  EXPECT_EQ(complete("ptepack repack m.pte --flatbuffer-order py"), (std::set<std::string>{"python", "python-2026"}));
  EXPECT_EQ(complete("ptepack size m.pte --sort ''"), (std::set<std::string>{"bytes", "name"}));
  EXPECT_EQ(complete("ptepack plan m.pte --algorithm ''"),
            (std::set<std::string>{"executorch-greedy", "best-fit", "exact", "best"}));
  EXPECT_EQ(complete("ptepack plan m.pte --algorithm b"), (std::set<std::string>{"best-fit", "best"}));
  EXPECT_EQ(complete("ptepack plan m.pte --alignment ''"), (std::set<std::string>{}));
  EXPECT_EQ(complete("ptepack repack m.pte --segment-alignment ''"), (std::set<std::string>{}));
  EXPECT_EQ(complete("ptepack repack m.pte --config mod"), (std::set<std::string>{"model.pte"}));
}

// ---------------------------------------------------------------------------
// Every command on inputs it cannot use (README, "Exit status").

enum class Slot { kProgram, kJson, kBundle, kBpte };

struct Row {
  std::string command;            // as the man page names it
  std::vector<std::string> args;  // "@" stands for the bad input
  Slot slot;
  bool json;    // the command has --json
  bool judges;  // verify/inspect/checksum: an invalid file is their answer (exit 1), not an error
};

TEST(CliEdges, EveryCommandOnInputsItCannotUse) {
  const std::string d = TempDir("edges_matrix");
  const std::string add = FixturePath("add.pte");
  const std::string bpte = FixturePath("bundled_program.bpte");
  const std::string config = Testdata("pack/config.json"), spec = Testdata("pack/add_spec.json");
  // A valid bundle and tests.json to truncate or to stand beside a bad input.
  ASSERT_EQ(RunCli({"bundle", "create", add, "-o", d + "/good.ptebundle", "-q"}).exit_code, 0);
  ASSERT_EQ(RunCli({"bpte", "extract-tests", bpte, "-o", d + "/tests"}).exit_code, 0);
  const std::string tests = d + "/tests/tests.json";

  const std::vector<Row> rows = {
      {"inspect", {"inspect", "@"}, Slot::kProgram, true, true},
      {"verify", {"verify", "@"}, Slot::kProgram, true, true},
      {"checksum", {"checksum", "@"}, Slot::kProgram, true, true},
      {"size", {"size", "@"}, Slot::kProgram, true, false},
      {"diff", {"diff", "@", add}, Slot::kProgram, true, false},
      {"diff", {"diff", add, "@"}, Slot::kProgram, true, false},
      {"map", {"map", "@", "-o", d + "/m.svg"}, Slot::kProgram, false, false},
      {"map", {"map", "--memory", "@", "-o", d + "/mm.svg"}, Slot::kProgram, false, false},
      {"plan", {"plan", "@"}, Slot::kProgram, true, false},
      {"plan", {"plan", "@", "-o", d + "/pl.pte"}, Slot::kProgram, true, false},
      {"graph", {"graph", "@"}, Slot::kProgram, false, false},
      {"repack", {"repack", "@", "-o", d + "/r.pte"}, Slot::kProgram, true, false},
      {"split", {"split", "@", "--external-constants", "w", "-o", d + "/s.pte"}, Slot::kProgram, true, false},
      {"extract", {"extract", "@", "-o", d + "/x"}, Slot::kProgram, true, false},
      {"pack", {"pack", "@", spec, "-o", d + "/p.pte"}, Slot::kJson, true, false},
      {"pack", {"pack", config, "@", "-o", d + "/p.pte"}, Slot::kJson, true, false},
      {"bundle create", {"bundle", "create", "@", "-o", d + "/b.ptebundle"}, Slot::kProgram, false, false},
      {"bundle list", {"bundle", "list", "@"}, Slot::kBundle, true, false},
      {"bundle extract", {"bundle", "extract", "@", "-o", d + "/bx"}, Slot::kBundle, false, false},
      {"bpte extract-program", {"bpte", "extract-program", "@", "-o", d + "/bp.pte"}, Slot::kBpte, false, false},
      {"bpte extract-tests", {"bpte", "extract-tests", "@", "-o", d + "/bt"}, Slot::kBpte, false, false},
      {"bpte build", {"bpte", "build", "@", tests, "-o", d + "/b.bpte"}, Slot::kProgram, false, false},
      {"bpte build", {"bpte", "build", add, "@", "-o", d + "/b.bpte"}, Slot::kJson, false, false},
  };
  // A new command must join the table.
  std::set<std::string> covered;
  for (const auto& r : rows) covered.insert(r.command);
  EXPECT_EQ(covered, LeafCommands());

  // The bad inputs: missing, a directory, empty, random bytes, a valid file cut in half.
  std::mt19937 rng(24);
  std::vector<uint8_t> noise(1000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  WriteFile(d + "/empty.in", {});
  WriteFile(d + "/random.in", noise);
  std::filesystem::create_directory(d + "/dir.in");
  auto cut = [&](const std::string& from, const std::string& to) {
    std::vector<uint8_t> bytes = ReadFile(from);
    bytes.resize(bytes.size() / 2);
    WriteFile(to, bytes);
    return to;
  };
  const std::string cut_of[] = {cut(add, d + "/cut.pte"), cut(config, d + "/cut.json"),
                                cut(d + "/good.ptebundle", d + "/cut.ptebundle"), cut(bpte, d + "/cut.bpte")};
  struct Bad {
    std::string what, path;
    int unreadable;  // 1: the file cannot be opened or is not a regular file
    std::string code;
  };

  int runs = 0;
  for (const Row& row : rows) {
    const std::vector<Bad> bad = {{"missing", d + "/missing.in", 1, "open-failed"},
                                  {"directory", d + "/dir.in", 1, "not-regular-file"},
                                  {"empty", d + "/empty.in", 0, ""},
                                  {"random", d + "/random.in", 0, ""},
                                  {"truncated", cut_of[static_cast<int>(row.slot)], 0, ""}};
    for (const Bad& b : bad) {
      for (bool with_json : {false, true}) {
        if (with_json && !row.json) continue;
        std::vector<std::string> args;
        for (const auto& a : row.args) args.push_back(a == "@" ? b.path : a);
        if (with_json) args.push_back("--json");
        RunResult r = RunCli(args);
        ++runs;
        std::string what = row.command + " on " + b.what + (with_json ? " --json" : "");
        const int want = b.unreadable || !row.judges ? 2 : 1;
        EXPECT_EQ(r.exit_code, want) << what << "\n" << r.out << r.err;
        EXPECT_TRUE(Contains(want == 2 ? r.err : r.out + r.err, b.path)) << what << ": names the file\n" << r.err;
        if (!b.code.empty()) {
          EXPECT_TRUE(Contains(r.err, "[" + b.code + "]")) << what << "\n" << r.err;
        }
        EXPECT_FALSE(Contains(r.err, "Run with --help")) << what << ": CLI11's message\n" << r.err;
        if (want == 2) {  // one located line, printed once
          EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
          EXPECT_EQ(r.err.rfind("ptepack: " + b.path + ": ", 0), 0u) << what << "\n" << r.err;
        }
        if (!with_json) continue;
        json j = Parse(r.out);
        ASSERT_FALSE(j.is_discarded()) << what << ": not JSON\n" << r.out;
        if (want == 2) {
          ASSERT_TRUE(j.contains("error")) << what << "\n" << r.out;
          EXPECT_EQ(j["error"]["file"], b.path) << what << "\n" << r.out;
          EXPECT_EQ(j["error"]["exit_code"], 2) << what;
          if (!b.code.empty()) {
            EXPECT_EQ(j["error"]["code"], b.code) << what;
          }
        } else {
          EXPECT_EQ(j["valid"], false) << what << "\n" << r.out;
          EXPECT_TRUE(Contains(j.dump(), b.path)) << what << "\n" << r.out;
        }
      }
    }
  }
  EXPECT_GT(runs, 150);
}

}  // namespace
}  // namespace ptepack
