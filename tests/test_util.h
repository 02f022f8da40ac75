#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptepack::testing {

std::string FixturePath(const std::string& name);
std::vector<uint8_t> ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::vector<uint8_t>& data);
// A fresh empty directory under the test temp dir.
std::string TempDir(const std::string& name);
// s in single quotes for /bin/sh.
std::string ShellQuote(const std::string& s);
// What a run of the ptepack CLI printed and returned.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs `ptepack ARGS` (each argument shell-quoted); stdout is captured through
// popen, stderr through a file.
RunResult RunCli(const std::vector<std::string>& args);

// Names of the .pte fixtures.
std::vector<std::string> PteFixtures();

}  // namespace ptepack::testing
