// Inline delegate data stored once (issue 12, part 3): stories260k_qnn.pte's
// two QNN delegates share one segment; repacked with the payloads inline they
// share one backend_delegate_data entry. The runtime must load it and hand
// both delegates the same bytes as from the original.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "conformance/oracle_runner.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

TEST(DelegateDedup, RuntimeSeesTheSamePayloadsFromOneInlineCopy) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const std::string dir = TempDir("delegate_dedup");
  const std::string original = FixturePath("stories260k_qnn.pte");
  auto r = RunCli({"repack", original, "--extract-delegate-segments", "false", "-o", dir + "/inline.pte", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  OracleResult before = RunRuntimeOracle(OracleBuild::kOss, original);
  OracleResult after = RunRuntimeOracle(OracleBuild::kOss, dir + "/inline.pte");
  ASSERT_TRUE(before.loaded()) << before.Describe();
  ASSERT_TRUE(after.loaded()) << after.Describe();
  EXPECT_EQ(RuntimeView(after.out), RuntimeView(before.out));
  // Both delegates get the full payload (the same hash), from one stored copy.
  std::vector<std::string> hashes;
  for (const auto& m : after.out["methods"]) {
    for (const auto& d : m["delegate_inits"]) {
      EXPECT_GT(d["processed_size"].get<size_t>(), 1000000u);
      hashes.push_back(d["processed_xxh64"].get<std::string>());
    }
  }
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_LT(std::filesystem::file_size(dir + "/inline.pte"), std::filesystem::file_size(original) + 1000000u);
}

}  // namespace
}  // namespace ptepack::testing
