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

// A fresh empty directory for one test's files, named with the process id (worktrees and
// parallel ctest runs share the temp dir).
std::string ScratchDir(const std::string& name);

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

// `harness PTE [--ptd P]... FLAGS...`, for flags the functions above do not cover.
OracleResult RunRuntimeOracleWith(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds,
                                  const std::vector<std::string>& flags);

// `harness PTE [--ptd P]... --clobber [--share-buffer ID]...` (tests/oracle/clobber.h): every
// method loaded, then run in program order with clobbering stub kernels and delegates, each
// call traced. `share_buffers`: memory_ids every method shares (mutable state shared between
// methods).
OracleResult RunClobberOracle(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds = {},
                              const std::vector<uint32_t>& share_buffers = {});

// What a --clobber run computed, per method: the run's status, its inputs, the trace (one
// entry per stub call: instruction, operator or delegate, each read argument's hash, each
// output's hash after the call) and the outputs' hashes. Two plans of one program that the
// runtime executes identically have equal views.
nlohmann::ordered_json ClobberView(const nlohmann::ordered_json& oracle_out);

// The first difference between two ClobberViews, in words ("" when equal): the method, the
// call and what differs.
std::string FirstClobberDifference(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

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
