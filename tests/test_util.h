#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptepack::testing {

// The directory of real ExecuTorch files: $PTEPACK_FIXTURES_DIR when set, else the
// directory CMake was configured with (PTEPACK_FIXTURES_DIR, default ../shared/fixtures/executorch).
const std::string& FixturesDir();
// ExecuTorch's oracles: $PTEPACK_ORACLES_DIR when set, else the directory CMake was configured with.
const std::string& OraclesDir();
// True when FixturesDir() holds at least one .pte file.
bool HaveFixtures();
// Skips the running test (records a GoogleTest skip and unwinds out of the test body)
// because the real ExecuTorch files are absent. Every test that needs them ends here.
[[noreturn]] void SkipWithoutFixtures();
// FixturesDir()/name. Inside a test, skips it (SkipWithoutFixtures) when there are no fixtures.
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
// popen, stderr through a file. $PTEPACK_TEST_CLI, when set, names another ptepack
// binary to run (e.g. one built from an older commit, to see a test fail there).
RunResult RunCli(const std::vector<std::string>& args);

// Names of the .pte fixtures (inside a test, skips it when there are none; outside a
// test, e.g. while instantiating parameters, returns an empty list).
std::vector<std::string> PteFixtures();

}  // namespace ptepack::testing
