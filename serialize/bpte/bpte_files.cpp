// Output files of the bpte commands (see bpte.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "serialize/bpte/bpte.h"
#include "serialize/write/output_files.h"

namespace ptepack::bpte {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void Fail(const std::string& code, const std::string& message, const std::string& file) {
  throw Error(code, message, file);
}

// Removes a temporary directory on every error path.
struct RemoveOnExit {
  fs::path p;
  ~RemoveOnExit() {
    std::error_code e;
    if (!p.empty()) fs::remove_all(p, e);
  }
};

}  // namespace

void WriteOutputFile(const std::string& out, const Bytes& data, const std::vector<std::string>& inputs) {
  (void)WriteOneFile(out, data, inputs);
}

void WriteTestsDirectory(const std::string& dir, const BundledProgramData& data, bool force,
                         const std::string& source) {
  const fs::path target(dir);
  std::error_code ec;
  const auto st = fs::symlink_status(target, ec);
  const bool exists = fs::exists(st);
  if (fs::is_symlink(st))
    Fail("output-symlink", "output is a symbolic link; ptepack does not write through links", dir);
  if (exists && !fs::is_directory(st)) Fail("output-not-directory", "output exists and is not a directory", dir);
  const bool non_empty = exists && !fs::is_empty(target, ec);
  if (non_empty && !force) {
    Fail("output-exists", "output directory is not empty; pass --force to replace it, or choose a new directory", dir);
  }
  if (non_empty && !fs::exists(target / "tests.json")) {
    Fail("output-exists",
         "output directory is not empty and holds no tests.json (it is not an earlier extract-tests); refusing to "
         "replace it even with --force",
         dir);
  }
  const auto files = TestsToFiles(data, source);
  WritingScope writing;
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  const fs::path tmp = parent / (target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  RemoveOnExit cleanup;
  fs::remove_all(tmp, ec);
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    Fail("create-failed", std::string("cannot create temporary directory: ") + std::strerror(errno), tmp.string());
  }
  cleanup.p = tmp;
  AtomicFile::Options unsynced;
  unsynced.sync = false;
  for (const auto& [name, bytes] : files) {
    ThrowIfInterrupted();
    AtomicFile f((tmp / name).string(), unsynced);
    f.Write(bytes);
    f.Commit();
  }
  ThrowIfInterrupted();
  SyncTree(tmp.string());
  fs::path old;
  if (exists) {
    old = parent / (target.filename().string() + ".old-" + std::to_string(::getpid()));
    if (::rename(target.c_str(), old.c_str()) != 0) {
      Fail("write-failed", std::string("cannot move the old directory aside: ") + std::strerror(errno), dir);
    }
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    if (!old.empty()) ::rename(old.c_str(), target.c_str());
    Fail("write-failed", std::string("cannot rename the temporary directory into place: ") + std::strerror(e), dir);
  }
  cleanup.p = old;  // the replaced directory goes
}

}  // namespace ptepack::bpte
