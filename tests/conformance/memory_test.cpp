// Runtime memory (issue 13 part 4): the planned buffers `ptepack size` reports per method are
// the ones ExecuTorch's runtime reports (MethodMeta::memory_planned_buffer_size); the delegate
// bytes are the payload sizes the runtime hands to each backend's init; the constant bytes from
// the .pte and the .ptd are those of the tensors the runtime resolved (each stored buffer or key
// once); the mutable state is what the harness finds loaded into planned memory; for every
// fixture.
#include "serialize/insight/memory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "conformance/oracle_runner.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

const json* RuntimeMethod(const json& out, const std::string& name) {
  for (const auto& m : out["methods"]) {
    if (m.value("name", "") == name) return &m;
  }
  return nullptr;
}

// Constants as the runtime resolved them (parseTensor's nbytes), each stored buffer (program) or
// key (.ptd) once; compared only where the runtime resolved all of them.
// Returns the number of constant tensors compared.
size_t ExpectConstantsAsResolved(const MethodMemory& m, const json& rm, const std::string& file) {
  std::map<uint64_t, uint64_t> program;
  std::map<std::string, uint64_t> external;
  for (const auto& c : rm["constants"]) {
    if (c["status"]["code"] != 0) return 0;  // Error::Ok
    uint64_t nb = c["nbytes"].get<uint64_t>();
    if (c["source"] == "program") {
      uint64_t& b = program[c["buffer_index"].get<uint64_t>()];
      b = std::max(b, nb);
    } else {
      external[c["key"].get<std::string>()] = nb;
    }
  }
  uint64_t want_pte = 0, want_ptd = 0, ours_ptd = 0;
  for (const auto& [i, nb] : program) want_pte += nb;
  for (const auto& [k, nb] : external) want_ptd += nb;
  for (const auto& [f, nb] : m.constants_ptd) ours_ptd += nb;
  EXPECT_EQ(m.constants_pte, want_pte) << file << " " << m.name;
  EXPECT_EQ(ours_ptd, want_ptd) << file << " " << m.name;
  if (rm.contains("planned_initial_state")) {
    uint64_t state = 0;
    for (const auto& s : rm["planned_initial_state"]) state += s["nbytes"].get<uint64_t>();
    EXPECT_EQ(m.mutable_state, state) << file << " " << m.name;
  }
  return rm["constants"].size();
}

TEST(MemoryConformance, PlannedBuffersAndDelegatesMatchTheRuntime) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  size_t methods = 0, buffers = 0, delegates = 0, constants = 0;
  for (const auto& name : PteFixtures()) {
    std::string stem = name.substr(0, name.size() - 4);
    std::vector<std::string> ptd_paths;
    if (std::filesystem::exists(FixturePath(stem + ".ptd"))) ptd_paths.push_back(FixturePath(stem + ".ptd"));
    auto pte = PteFile::Open(FixturePath(name));
    std::vector<std::unique_ptr<PtdFile>> ptds;
    std::vector<const PtdFile*> ptrs;
    for (const auto& p : ptd_paths) ptds.push_back(PtdFile::Open(p)), ptrs.push_back(ptds.back().get());
    MemoryReport ours = AnalyzeMemory(*pte, ptrs);
    OracleResult r = RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, FixturePath(name), ptd_paths);
    ASSERT_TRUE(r.out.is_object() && r.out.contains("methods")) << name << ": " << r.Describe();
    ASSERT_EQ(ours.methods.size(), r.out["methods"].size()) << name;
    for (const MethodMemory& m : ours.methods) {
      const json* rm = RuntimeMethod(r.out, m.name);
      ASSERT_NE(rm, nullptr) << name << ": the runtime has no method " << m.name;
      ASSERT_TRUE(rm->contains("meta")) << name << " " << m.name << ": " << rm->dump();
      const json& sizes = (*rm)["meta"]["memory_planned_buffer_sizes"];
      ASSERT_EQ(m.planned.size(), sizes.size()) << name << " " << m.name;
      for (size_t i = 0; i < m.planned.size(); ++i) {
        EXPECT_EQ(m.planned[i], sizes[i].get<uint64_t>()) << name << " " << m.name << " buffer " << i;
      }
      ++methods, buffers += m.planned.size();
      constants += ExpectConstantsAsResolved(m, *rm, name);
      // Delegate payloads, each stored copy once (the same payload handed to two inits is one copy).
      if (!rm->contains("delegate_inits")) continue;
      std::set<std::string> seen;
      uint64_t runtime_bytes = 0;
      for (const auto& d : (*rm)["delegate_inits"]) {
        if (seen.insert(d["processed_xxh64"].get<std::string>()).second) {
          runtime_bytes += d["processed_size"].get<uint64_t>();
        }
        ++delegates;
      }
      EXPECT_EQ(m.delegates_segment + m.delegates_inline, runtime_bytes) << name << " " << m.name;
    }
  }
  std::printf("compared %zu methods, %zu planned buffers, %zu delegate inits, %zu constant tensors with the runtime\n",
              methods, buffers, delegates, constants);
  EXPECT_GE(constants, 50u);
  EXPECT_GE(methods, 30u);
}

}  // namespace
}  // namespace ptepack::testing
