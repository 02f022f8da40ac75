// Runs ExecuTorch's runtime (tests/oracle/runtime_harness.cpp, built from the oracle extract) on
// a file as a subprocess and parses what it printed. Shared by every conformance test.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ptepack::testing {

// Which runtime build judges: the one that still accepts Program.constant_buffer
// (ET_ENABLE_DEPRECATED_CONSTANT_BUFFER=1) or the one upstream's CMake builds (=0).
enum class OracleBuild { kDeprecatedConstantBuffer, kOss };

bool RuntimeOracleAvailable();

struct OracleResult {
  int exit_code = -1;          // 0 loaded, 1 the runtime refused something, else a crash or usage error
  nlohmann::ordered_json out;  // the harness's JSON (null if it printed none)
  std::string err;             // the runtime's log (stderr)
  bool loaded() const { return exit_code == 0; }
  // A one-paragraph account for assertion messages: exit code, statuses, the log's tail.
  std::string Describe() const;
};

// `harness PTE [--ptd P]... [--run]`. Fails the calling test (ADD_FAILURE) on a crash or on
// output that is not one JSON object.
OracleResult RunRuntimeOracle(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds = {},
                              bool run = false);

// What the runtime saw, minus what legitimately differs between two layouts of the same program
// (file names): load statuses, method meta, delegate inits (backend, processed bytes, compile
// specs), constants (value index, dtype, nbytes, hash), initial mutable state, named-data keys
// (sorted), and run outputs. Equal views = the runtime cannot tell the two files apart.
nlohmann::ordered_json RuntimeView(const nlohmann::ordered_json& oracle_out);

// Keys of every tensor the program resolved by name (external constants, external mutable
// state), sorted, without duplicates.
nlohmann::ordered_json ExternalKeys(const nlohmann::ordered_json& oracle_out);

}  // namespace ptepack::testing

// Skips the test when the oracle was not built (its sources are absent).
#define PTEPACK_REQUIRE_RUNTIME_ORACLE()                                                      \
  do {                                                                                        \
    if (!::ptepack::testing::RuntimeOracleAvailable()) {                                      \
      GTEST_SKIP() << "ExecuTorch runtime oracle not built (no executorch/ under "            \
                      "PTEPACK_ORACLES_DIR, default ../shared/oracles): conformance skipped"; \
    }                                                                                         \
  } while (0)
