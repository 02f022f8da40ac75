// libFuzzer target: the .ptebundle reader (index, members, zstd frames) on
// arbitrary bytes: ReadBundle, then ExtractBundle into a scratch directory.
// Every input must end in a ptepack::Error (or be accepted), never a crash or
// another exception. Run with scripts/fuzz.sh fuzz_bundle_reader.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ptepack/error.h"
#include "serialize/bundle/bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string scratch = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("ptepack_fuzz_bundle_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    static std::string to_remove = d;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return d;
  }();
  const std::string path = scratch + "/in.ptebundle";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    ptepack::ReadBundle(path);
    std::error_code ec;
    std::filesystem::remove_all(scratch + "/out", ec);
    ptepack::ExtractBundle(path, scratch + "/out", true);
  } catch (const ptepack::Error&) {
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch + "/out", ec);
  return 0;
}
