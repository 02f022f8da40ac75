// The CLI's habits (issue 15 part 4) and clones without the fixtures (part 5), driven through
// the built `ptepack`: several files for verify/inspect (each --ptd belongs to the FILE before
// it), `-` for stdin and stdout, --quiet, --json on every read command, `help CMD`, the man
// page and the bash/zsh completion generated from the parser, `bundle create -o`, and
// scripts/fetch-fixtures.sh's checks. Facts about the fixtures are reader_test.cpp's
// hand-derived ones (xor.pte keeps its mutable weights in xor.ptd; add.pte and
// keyword_spotting.pte are self-contained and valid; linear.ptd is in the legacy layout).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::RunResult;
using testing::ShellQuote;
using testing::TempDir;
using testing::WriteFile;

bool Contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Runs a /bin/sh command line; stdout captured, stderr into a file.
RunResult Sh(const std::string& cmd) {
  static int counter = 0;
  const std::string err = TempDir("habits_sh_" + std::to_string(counter++)) + "/err";
  RunResult r;
  FILE* p = ::popen((cmd + " 2>" + ShellQuote(err)).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream ef(err);
  std::stringstream ss;
  ss << ef.rdbuf();
  r.err = ss.str();
  return r;
}

const std::string kCli = ShellQuote(PTEPACK_CLI);

// A copy of add.pte cut short: the reader finds it invalid (exit 1).
std::string TruncatedAdd(const std::string& dir) {
  std::vector<uint8_t> bytes = ReadFile(FixturePath("add.pte"));
  bytes.resize(bytes.size() / 2);
  WriteFile(dir + "/cut.pte", bytes);
  return dir + "/cut.pte";
}

// ---------------------------------------------------------------------------
// Several files

TEST(CliHabits, VerifyPtdBelongsToTheFileBeforeIt) {
  // The case of the brief: a repeatable --ptd must not swallow the next FILE.
  RunResult r = RunCli({"verify", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd"), FixturePath("add.pte")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "xor.pte: OK\n")) << r.out;  // with its .ptd: no "program only" note
  EXPECT_TRUE(Contains(r.out, "add.pte: OK\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "verify: 2 files: 2 valid, 0 invalid, 0 unreadable")) << r.out;

  // The .ptd after add.pte: xor.pte is judged alone, and says that its 4 external tensors
  // (net.linear.weight, net.linear.bias, net.linear2.weight, net.linear2.bias) were not checked.
  r = RunCli({"verify", FixturePath("xor.pte"), FixturePath("add.pte"), "--ptd", FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // a .ptd nothing refers to is not an error
  EXPECT_TRUE(Contains(r.out, "xor.pte: OK (program only: 4 tensor(s) live in a .ptd")) << r.out;
  EXPECT_TRUE(Contains(r.out, "add.pte: OK\n")) << r.out;

  // A --ptd before every FILE belongs to the first.
  r = RunCli({"verify", "--ptd", FixturePath("xor.ptd"), FixturePath("xor.pte"), FixturePath("keyword_spotting.pte")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "xor.pte: OK\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "keyword_spotting.pte: OK\n")) << r.out;
}

TEST(CliHabits, VerifySeveralExitsWithTheWorst) {
  const std::string dir = TempDir("habits_worst");
  const std::string cut = TruncatedAdd(dir);
  RunResult r = RunCli({"verify", FixturePath("add.pte"), cut, FixturePath("keyword_spotting.pte")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Count(r.out, ": OK"), 2u) << r.out;  // the files after the bad one are still judged
  EXPECT_TRUE(Contains(r.err, cut + ": INVALID")) << r.err;
  EXPECT_TRUE(Contains(r.err, "verify: 3 files: 2 valid, 1 invalid, 0 unreadable")) << r.err;

  // A FIFO cannot be read (inputs must be regular files): exit 2, the others still judged.
  const std::string fifo = dir + "/fifo.pte";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = RunCli({"verify", FixturePath("add.pte"), fifo, cut});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.out, "add.pte: OK")) << r.out;
  EXPECT_TRUE(Contains(r.err, fifo)) << r.err;
  EXPECT_TRUE(Contains(r.err, "verify: 3 files: 1 valid, 1 invalid, 1 unreadable")) << r.err;
}

TEST(CliHabits, VerifySeveralJson) {
  const std::string dir = TempDir("habits_json");
  const std::string cut = TruncatedAdd(dir);
  RunResult r = RunCli({"verify", "--json", FixturePath("add.pte"), cut});
  EXPECT_EQ(r.exit_code, 1);
  json j = json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 2u) << r.out;
  EXPECT_EQ(j["files"][0]["file"], FixturePath("add.pte"));
  EXPECT_EQ(j["files"][0]["valid"], true);
  EXPECT_EQ(j["files"][1]["file"], cut);
  EXPECT_EQ(j["files"][1]["valid"], false);
  EXPECT_EQ(j["valid"], false);
  // One file: the object of before, not a list.
  r = RunCli({"verify", "--json", FixturePath("add.pte")});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(json::parse(r.out)["valid"], true) << r.out;
}

TEST(CliHabits, InspectSeveralFiles) {
  RunResult one = RunCli({"inspect", FixturePath("add.pte")});
  ASSERT_EQ(one.exit_code, 0);
  RunResult r = RunCli({"inspect", FixturePath("add.pte"), FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("==> " + FixturePath("add.pte") + " <==\n" + one.out), 0u) << r.out;
  EXPECT_TRUE(Contains(r.out, "\n==> " + FixturePath("xor.pte") + " <==\n")) << r.out;

  r = RunCli({"inspect", "--json", FixturePath("add.pte"), FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["files"].size(), 2u);
  // Each description is the one-file document.
  EXPECT_EQ(j["files"][0]["description"], json::parse(RunCli({"inspect", "--json", FixturePath("add.pte")}).out));
  EXPECT_EQ(j["files"][1]["description"],
            json::parse(RunCli({"inspect", "--json", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")}).out));
}

// ---------------------------------------------------------------------------
// `-`: stdin and stdout

TEST(CliHabits, StdinForInspectAndVerify) {
  RunResult r = Sh(kCli + " verify - < " + ShellQuote(FixturePath("keyword_spotting.pte")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<stdin>: OK\n");
  // The same description as from the file, but for the name.
  json from_file =
      json::parse(RunCli({"inspect", "--json", FixturePath("xor.pte"), "--ptd", FixturePath("xor.ptd")}).out);
  r = Sh(kCli + " inspect --json - --ptd " + ShellQuote(FixturePath("xor.ptd")) + " < " +
         ShellQuote(FixturePath("xor.pte")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json from_stdin = json::parse(r.out);
  EXPECT_EQ(from_stdin["file"], "<stdin>");
  from_stdin["file"] = from_file["file"];
  EXPECT_EQ(from_stdin, from_file);
  // A .ptd on stdin is recognised by its FT01 identifier.
  r = Sh(kCli + " verify --allow-legacy-ptd - < " + ShellQuote(FixturePath("linear.ptd")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Bad bytes on stdin: findings name <stdin>.
  const std::string cut = TruncatedAdd(TempDir("habits_stdin"));
  r = Sh(kCli + " verify - < " + ShellQuote(cut));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "<stdin>")) << r.err;
  // Only once.
  r = Sh(kCli + " verify - - < " + ShellQuote(cut));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "stdin (`-`) can be given only once")) << r.err;
}

TEST(CliHabits, RepackToStdout) {
  // With no flags repack rewrites the same bytes (README): on stdout, byte for byte.
  const std::string dir = TempDir("habits_stdout");
  // The commands' TMPDIR is a directory of this test's own, so that what is
  // left behind is theirs (not another process's under /tmp).
  const std::string tmp = TempDir("habits_stdout_tmp");
  const std::string cli = "TMPDIR=" + ShellQuote(tmp) + " " + kCli;
  RunResult r = Sh(cli + " repack " + ShellQuote(FixturePath("keyword_spotting.pte")) + " -o - > " +
                   ShellQuote(dir + "/out.pte"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ReadFile(dir + "/out.pte") == ReadFile(FixturePath("keyword_spotting.pte")));
  EXPECT_TRUE(Contains(r.err, "wrote - (54192 bytes")) << r.err;  // [size] ls -l keyword_spotting.pte
  // -q: nothing on stderr.
  r = Sh(cli + " repack -q " + ShellQuote(FixturePath("add.pte")) + " -o - | cmp - " +
         ShellQuote(FixturePath("add.pte")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Two outputs (a .pte and its .ptd) do not fit one stream: refused, nothing on stdout.
  r = Sh(cli + " split " + ShellQuote(FixturePath("keyword_spotting.pte")) + " --external-constants w -o -");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "-o - writes one file")) << r.err;
  // No temporary directory left behind.
  for (const auto& e : std::filesystem::directory_iterator(tmp)) ADD_FAILURE() << "left behind: " << e.path();
}

// ---------------------------------------------------------------------------
// --quiet, --json

TEST(CliHabits, QuietVerify) {
  RunResult r = RunCli({"verify", "-q", FixturePath("add.pte"), FixturePath("keyword_spotting.pte")});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  const std::string cut = TruncatedAdd(TempDir("habits_quiet"));
  r = RunCli({"verify", "--quiet", cut});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, cut + ": INVALID")) << r.err;  // problems are still said
}

TEST(CliHabits, ProgressOnlyOnATerminal) {
  if (Sh("command -v script").exit_code != 0) GTEST_SKIP() << "script (util-linux) not installed: no terminal to test";
  const std::string dir = TempDir("habits_progress");
  const std::string in = ShellQuote(FixturePath("stories260k_qnn.pte"));
  // `script` runs the command on a pseudo-terminal: stderr is a TTY.
  auto on_tty = [&](const std::string& args) {
    return Sh("script -qec " + ShellQuote(kCli + " " + args) + " /dev/null");
  };
  RunResult r = on_tty("repack " + in + " -o " + ShellQuote(dir + "/a.pte"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "\rwriting segments: 100%")) << r.out;
  r = on_tty("repack -q " + in + " -o " + ShellQuote(dir + "/b.pte"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
  r = on_tty("extract " + in + " -o " + ShellQuote(dir + "/x"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "\rwriting files: 100%")) << r.out;
  r = on_tty("extract -q " + in + " -o " + ShellQuote(dir + "/y"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
  r = on_tty("bundle create " + in + " -o " + ShellQuote(dir + "/c.ptebundle"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "%")) << r.out;
  // Not a terminal: no progress line.
  r = RunCli({"repack", FixturePath("stories260k_qnn.pte"), "-o", dir + "/d.pte"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Contains(r.err, "writing segments")) << r.err;
  EXPECT_TRUE(Contains(r.err, "verified OK")) << r.err;
}

TEST(CliHabits, JsonOnEveryReadCommand) {
  const std::string add = FixturePath("add.pte"), xr = FixturePath("xor.pte"), xd = FixturePath("xor.ptd");
  const std::string dir = TempDir("habits_read_json");
  ASSERT_EQ(RunCli({"bundle", "create", xr, xd, "-q", "-o", dir + "/x.ptebundle"}).exit_code, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"inspect", add},
      {"verify", add},
      {"checksum", add},
      {"size", add},
      {"diff", add, add},
      {"bundle", "list", dir + "/x.ptebundle"},
      {"verify", xr, "--ptd", xd},
      {"inspect", xd},
      {"size", xr, "--ptd", xd},
  };
  for (auto args : commands) {
    args.push_back("--json");
    RunResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_TRUE(json::accept(r.out)) << args[0] << " --json printed: " << r.out.substr(0, 200);
  }
}

// ---------------------------------------------------------------------------
// help, man page, completion

TEST(CliHabits, HelpCmdIsCmdDashHelp) {
  for (const char* cmd : {"inspect", "verify", "repack", "bundle"}) {
    RunResult a = RunCli({"help", cmd}), b = RunCli({cmd, "--help"});
    EXPECT_EQ(a.exit_code, 0);
    EXPECT_EQ(a.out, b.out) << cmd;
    EXPECT_TRUE(Contains(a.out, cmd)) << a.out;
  }
}

// Every --long flag that `ptepack CMD --help` lists.
std::set<std::string> HelpFlags(const std::vector<std::string>& cmd) {
  std::vector<std::string> args = cmd;
  args.push_back("--help");
  const std::string help = RunCli(args).out;
  // Option lines: "  -o,--output TEXT   ..." (flags named in descriptions are not options).
  std::set<std::string> flags;
  std::regex re("^  (-[a-zA-Z],)?(--[a-z][a-z0-9-]*)");
  std::istringstream in(help);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, re)) flags.insert(m[2]);
  }
  return flags;
}

TEST(CliHabits, BashCompletionFromTheParser) {
  const std::string dir = TempDir("habits_bash");
  RunResult gen = RunCli({"completion", "bash"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  WriteFile(dir + "/ptepack.bash", std::vector<uint8_t>(gen.out.begin(), gen.out.end()));
  // Completes like bash would: COMP_WORDS/COMP_CWORD set, _ptepack called, COMPREPLY printed.
  auto complete = [&](const std::string& words) {
    RunResult r = Sh("cd " + ShellQuote(dir) + " && bash -c " +
                     ShellQuote("source ./ptepack.bash; COMP_WORDS=(" + words +
                                "); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); "
                                "_ptepack; printf '%s\\n' \"${COMPREPLY[@]}\""));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::set<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.insert(line);
    }
    return out;
  };
  EXPECT_EQ(complete("ptepack ve"), (std::set<std::string>{"verify"}));
  EXPECT_EQ(complete("ptepack bundle cr"), (std::set<std::string>{"create"}));
  EXPECT_EQ(complete("ptepack co"), (std::set<std::string>{}));  // `completion` is hidden
  std::set<std::string> top = complete("ptepack ''");
  for (const char* cmd : {"inspect", "verify", "pack", "repack", "split", "extract", "checksum", "bundle", "diff",
                          "graph", "size", "map", "help"}) {
    EXPECT_TRUE(top.count(cmd)) << cmd;
  }
  // Every flag a command's --help lists is offered after `--`.
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"verify"}, {"inspect"}, {"repack"}, {"split"}, {"checksum"}, {"bundle", "create"}, {"size"}}) {
    std::string words = "ptepack";
    for (const auto& w : cmd) words += " " + w;
    std::set<std::string> offered = complete(words + " --");
    const std::set<std::string> listed = HelpFlags(cmd);
    EXPECT_GE(listed.size(), 3u) << words;  // --help and at least two more
    for (const auto& f : listed) EXPECT_TRUE(offered.count(f)) << words << " " << f;
  }
  // Files are completed for FILE arguments.
  WriteFile(dir + "/model.pte", {1});
  EXPECT_EQ(complete("ptepack verify mod"), (std::set<std::string>{"model.pte"}));
}

TEST(CliHabits, ZshCompletionParses) {
  RunResult gen = RunCli({"completion", "zsh"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(gen.out.rfind("#compdef ptepack\n", 0), 0u);
  for (const char* f : {"--write-manifest", "--extract-delegate-segments", "--allow-legacy-ptd"}) {
    EXPECT_TRUE(Contains(gen.out, std::string("'") + f + "[")) << f;
  }
  if (Sh("command -v zsh").exit_code != 0) GTEST_SKIP() << "zsh not installed: the script's syntax is not checked";
  const std::string dir = TempDir("habits_zsh");
  WriteFile(dir + "/_ptepack", std::vector<uint8_t>(gen.out.begin(), gen.out.end()));
  RunResult r = Sh("zsh -n " + ShellQuote(dir + "/_ptepack"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliHabits, ManPageFromTheParser) {
  RunResult man = RunCli({"--man"});
  ASSERT_EQ(man.exit_code, 0) << man.err;
  EXPECT_EQ(man.out.rfind(".TH PTEPACK 1 ", 0), 0u);
  for (const char* s :
       {".SS \"ptepack verify\"", ".SS \"ptepack bundle create\"", "\\-\\-write\\-manifest", ".SH EXIT STATUS"}) {
    EXPECT_TRUE(Contains(man.out, s)) << s;
  }
  if (Sh("command -v groff").exit_code != 0) GTEST_SKIP() << "groff not installed: the page is not rendered";
  const std::string dir = TempDir("habits_man");
  WriteFile(dir + "/ptepack.1", std::vector<uint8_t>(man.out.begin(), man.out.end()));
  RunResult r = Sh("groff -man -Tutf8 -ww -z " + ShellQuote(dir + "/ptepack.1"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");  // no roff warnings
  r = Sh("groff -man -Tascii -P-bcu " + ShellQuote(dir + "/ptepack.1") + " ");
  EXPECT_TRUE(Contains(r.out, "--segment-alignment")) << r.out.substr(0, 400);
}

// ---------------------------------------------------------------------------
// bundle create -o

TEST(CliHabits, BundleCreateTakesDashO) {
  const std::string dir = TempDir("habits_bundle");
  RunResult r =
      RunCli({"bundle", "create", FixturePath("xor.pte"), FixturePath("xor.ptd"), "-o", dir + "/a.ptebundle", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json list = json::parse(RunCli({"bundle", "list", dir + "/a.ptebundle", "--json"}).out);
  ASSERT_EQ(list["files"].size(), 2u);
  EXPECT_EQ(list["files"][0]["name"], "xor.pte");
  EXPECT_EQ(list["files"][0]["size"], 13832u);  // [size] ls -l xor.pte
  EXPECT_EQ(list["files"][1]["name"], "xor.ptd");
  // The positional form of before still works, with a note.
  r = RunCli({"bundle", "create", dir + "/b.ptebundle", FixturePath("xor.pte"), FixturePath("xor.ptd")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "deprecated; use `bundle create IN... -o OUT`")) << r.err;
  EXPECT_TRUE(ReadFile(dir + "/a.ptebundle") == ReadFile(dir + "/b.ptebundle"));
  // One input and no -o: nothing to name the output.
  r = RunCli({"bundle", "create", FixturePath("add.pte")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "give it with -o")) << r.err;
}

// ---------------------------------------------------------------------------
// scripts/fetch-fixtures.sh (it cannot fetch here: no network; its checks can run)

const std::string kFetch = ShellQuote(std::string(PTEPACK_SOURCE_DIR) + "/scripts/fetch-fixtures.sh");

TEST(FetchFixtures, BlobIdsMatchTheFixtures) {
  RunResult r = Sh(kFetch + " --check " + ShellQuote(testing::FixturePath("")));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Count(r.out, ": ok "), 13u) << r.out;  // 10 .pte, 2 .ptd, 1 .bpte
}

TEST(FetchFixtures, ManifestAgreesWithSourcesMd) {
  // SOURCES.md (written when the fixtures were collected) gives each file's blob id, abbreviated.
  std::ifstream in(FixturePath("SOURCES.md"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string sources = ss.str();
  RunResult list = Sh(kFetch + " --list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::istringstream lines(list.out);
  size_t n = 0;
  for (std::string name, path, blob; lines >> name >> path >> blob; ++n) {
    EXPECT_EQ(blob.size(), 40u) << name;
    EXPECT_TRUE(Contains(sources, blob.substr(0, 8))) << name << " " << blob;
    EXPECT_TRUE(Contains(sources, name.substr(0, name.find('.')))) << name;
    if (path != "-") {
      EXPECT_TRUE(Contains(sources, path.substr(0, path.rfind('/')))) << name << " " << path;
    }
  }
  EXPECT_EQ(n, 13u);
}

TEST(FetchFixtures, CheckNamesAChangedOrMissingFile) {
  const std::string dir = TempDir("habits_fetch_check");
  for (const auto& e : std::filesystem::directory_iterator(FixturePath(""))) {
    std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string());
  }
  std::vector<uint8_t> add = ReadFile(dir + "/add.pte");
  std::filesystem::permissions(dir + "/add.pte", std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  add[100] ^= 1;
  WriteFile(dir + "/add.pte", add);
  std::filesystem::remove(dir + "/xor.ptd");
  RunResult r = Sh(kFetch + " --check " + ShellQuote(dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.out, dir + "/add.pte: blob ")) << r.out;
  EXPECT_TRUE(Contains(r.out, ", expected 43252ca7d3d05e8fe847e122c9c7de976e0e0096")) << r.out;
  EXPECT_TRUE(Contains(r.out, dir + "/xor.ptd: missing (expected blob 3351e75b")) << r.out;
  EXPECT_EQ(Count(r.out, ": ok "), 11u) << r.out;
}

TEST(FetchFixtures, Arguments) {
  RunResult r = Sh(kFetch + " --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "unknown argument \"--bogus\"")) << r.err;
  r = Sh(kFetch + " --ref main --dest /nonexistent");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--ref must be a full 40-digit commit id")) << r.err;
  r = Sh(kFetch + " --check");
  EXPECT_EQ(r.exit_code, 2);
  r = Sh(kFetch + " --check /nonexistent");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "/nonexistent: not a directory")) << r.err;
}

}  // namespace
}  // namespace ptepack
