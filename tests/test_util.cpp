#include "tests/test_util.h"

#include <dirent.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
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

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path p = std::filesystem::path(base ? base : "/tmp") / ("ptepack_test_" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
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

}  // namespace ptepack::testing
