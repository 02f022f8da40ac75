#include "tests/test_util.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace ptepack::testing {

std::string FixturePath(const std::string& name) { return std::string(PTEPACK_FIXTURES_DIR) + "/" + name; }

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
  for (const auto& e : std::filesystem::directory_iterator(PTEPACK_FIXTURES_DIR)) {
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
  std::string cmd = ShellQuote(PTEPACK_CLI);
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
