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
// Names of the .pte fixtures.
std::vector<std::string> PteFixtures();

}  // namespace ptepack::testing
