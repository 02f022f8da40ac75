#include "tests/test_util.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace ptepack::testing {

const std::string& FixturesDir() {
  static const std::string dir = [] {
    const char* env = std::getenv("PTEPACK_FIXTURES_DIR");
    return std::string(env && *env ? env : PTEPACK_FIXTURES_DIR);
  }();
  return dir;
}

const std::string& OraclesDir() {
  static const std::string dir = [] {
    const char* env = std::getenv("PTEPACK_ORACLES_DIR");
    return std::string(env && *env ? env : PTEPACK_ORACLES_DIR);
  }();
  return dir;
}

bool HaveFixtures() {
  static const bool have = [] {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(FixturesDir(), ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".pte") return true;
    }
    return false;
  }();
  return have;
}

namespace {

bool InTest() { return ::testing::UnitTest::GetInstance()->current_test_info() != nullptr; }

std::string NoFixturesReason() {
  return "no real ExecuTorch files in " + FixturesDir() +
         " (set PTEPACK_FIXTURES_DIR, or fetch them with scripts/fetch-fixtures.sh)";
}

void RecordSkip(const std::string& why) { GTEST_SKIP() << why; }

// One line at the end of a run: how many tests skipped, grouped by reason.
class SkipSummary : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& t) override {
    current_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  // Called with GoogleTest's lock held: must not call back into UnitTest.
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.skipped() || current_.empty() || !tests_.insert(current_).second) return;
    std::string why = r.message();
    why = why.substr(0, why.find('\n'));
    ++reasons_[why];
  }
  void OnTestEnd(const ::testing::TestInfo&) override { current_.clear(); }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (tests_.empty()) return;
    std::string line = "ptepack tests: " + std::to_string(tests_.size()) + " skipped:";
    const char* sep = " ";
    for (const auto& [why, n] : reasons_) {
      line += sep + std::to_string(n) + " because " + why;
      sep = "; ";
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  std::string current_;
  std::set<std::string> tests_;
  std::map<std::string, size_t> reasons_;
};

const bool kSkipSummaryInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new SkipSummary);
  return true;
}();

}  // namespace

void SkipWithoutFixtures() {
  const std::string why = NoFixturesReason();
  RecordSkip(why);
  // Already reported as a skip: GoogleTest catches this exception type silently, so the
  // test ends here as skipped rather than failing on the file it cannot open.
  throw ::testing::AssertionException(
      ::testing::TestPartResult(::testing::TestPartResult::kSkip, __FILE__, __LINE__, why.c_str()));
}

namespace {

// A directory filled by scripts/fetch-fixtures.sh, which cannot fetch the files whose
// upstream path is not recorded: tests that need one of those skip there (elsewhere, in the
// project's own fixture directory, a missing file is an error).
bool FetchedFixtures() {
  static const bool fetched = [] {
    std::ifstream in(FixturesDir() + "/SOURCES.md");
    std::string first;
    std::getline(in, first);
    return first.find("fetched by scripts/fetch-fixtures.sh") != std::string::npos;
  }();
  return fetched;
}

}  // namespace

std::string FixturePath(const std::string& name) {
  const std::string path = FixturesDir() + "/" + name;
  if (!InTest()) return path;
  if (!HaveFixtures()) SkipWithoutFixtures();
  if (!name.empty() && FetchedFixtures() && !std::filesystem::exists(path)) {
    const std::string why = name + " is not in " + FixturesDir() +
                            " (scripts/fetch-fixtures.sh cannot fetch it: its upstream path is not recorded)";
    RecordSkip(why);
    throw ::testing::AssertionException(
        ::testing::TestPartResult(::testing::TestPartResult::kSkip, __FILE__, __LINE__, why.c_str()));
  }
  return path;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

namespace {

// Every directory TempDir made, removed when the test process exits, so runs
// leave nothing (not even the perf tests' sparse multi-GiB files) behind.
struct TempDirs {
  std::vector<std::filesystem::path> paths;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& p : paths) std::filesystem::remove_all(p, ec);
  }
};
TempDirs& Created() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  // The process id keeps concurrent runs (two checkouts, parallel ctest) out of each other's files.
  std::filesystem::path p =
      std::filesystem::path(base ? base : "/tmp") / ("ptepack_test_" + name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  auto& dirs = Created().paths;
  if (std::find(dirs.begin(), dirs.end(), p) == dirs.end()) dirs.push_back(p);
  return p.string();
}

std::vector<std::string> PteFixtures() {
  std::vector<std::string> out;
  if (!HaveFixtures()) {
    if (InTest()) SkipWithoutFixtures();
    return out;
  }
  for (const auto& e : std::filesystem::directory_iterator(FixturesDir())) {
    if (e.path().extension() == ".pte") out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

RunResult RunCli(const std::vector<std::string>& args) {
  static int counter = 0;
  // The pid keeps parallel test processes (ctest -j) out of each other's way.
  std::string err_path =
      TempDir("cli_stderr_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)) + "/stderr";
  const char* other = std::getenv("PTEPACK_TEST_CLI");
  std::string cmd = ShellQuote(other && *other ? other : PTEPACK_CLI);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " 2>" + ShellQuote(err_path);
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream ef(err_path);
  std::stringstream ss;
  ss << ef.rdbuf();
  r.err = ss.str();
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(err_path).parent_path(), ec);
  return r;
}

}  // namespace ptepack::testing
