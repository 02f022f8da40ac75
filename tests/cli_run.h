// Helpers for the CLI safety and fault-injection tests: run ptepack with an
// environment and a timeout (fork/exec, no shell), temp dirs that remove
// themselves, and recursive snapshots of a directory.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ptepack::testing {

struct Run {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that killed it
  bool timed_out = false;
  long max_rss_kb = 0;  // peak resident set of the process
  std::string out, err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory under the system temp dir, removed with everything in it when
// the object goes away.
class ScopedDir {
 public:
  explicit ScopedDir(const std::string& name) {
    const char* base = std::getenv("TEST_TMPDIR");
    path_ = (std::filesystem::path(base ? base : "/tmp") / ("ptepack_test_" + name + "_" + std::to_string(::getpid())))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Runs the ptepack CLI with extra environment variables; kills it after
// `timeout_s` seconds (then timed_out is set).
inline Run RunPtepack(const std::vector<std::string>& args,
                      const std::vector<std::pair<std::string, std::string>>& env = {}, int timeout_s = 60) {
  static int counter = 0;
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string stem = std::string(base ? base : "/tmp") + "/ptepack_run_" + std::to_string(::getpid()) + "_" +
                           std::to_string(counter++);
  const std::string out_path = stem + ".out", err_path = stem + ".err";
  Run r;
  pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = ::open("/dev/null", O_RDONLY);
    ::dup2(n, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    std::string exe = PTEPACK_CLI;
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  for (int waited = 0;; ++waited) {
    struct rusage ru {};
    pid_t w = ::wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) {
      r.max_rss_kb = ru.ru_maxrss;
      break;
    }
    if (waited >= timeout_s * 100) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    ::usleep(10000);
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = Slurp(out_path);
  r.err = Slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

// Every file (and directory) under `dir`: relative path -> mode and bytes.
using Snapshot = std::map<std::string, std::pair<unsigned, std::string>>;
inline Snapshot TakeSnapshot(const std::string& dir) {
  Snapshot s;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    std::string rel = std::filesystem::relative(e.path(), dir).string();
    s[rel] = {static_cast<unsigned>(st.st_mode), S_ISREG(st.st_mode) ? Slurp(e.path().string()) : std::string()};
  }
  return s;
}

inline void RestoreSnapshot(const std::string& dir, const Snapshot& s) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [rel, v] : s) {
    std::string p = dir + "/" + rel;
    if (S_ISDIR(v.first)) {
      std::filesystem::create_directories(p);
    } else {
      std::ofstream(p, std::ios::binary) << v.second;
    }
    ::chmod(p.c_str(), v.first & 07777);
  }
}

// Names in a snapshot, for readable failure messages.
inline std::string Names(const Snapshot& s) {
  std::string out;
  for (const auto& [rel, v] : s) out += rel + "(" + std::to_string(v.second.size()) + ") ";
  return out;
}

}  // namespace ptepack::testing
