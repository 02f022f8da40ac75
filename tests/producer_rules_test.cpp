// ExecuTorch's Python serializer (../shared/oracles) re-serializing the real
// fixtures, as a byte oracle for two producer rules (issue 12, parts 2 and 3):
//
//  - inline delegate data: ExecuTorch's emitter stores identical payloads
//    once (exir/emit/_emitter.py keys backend_delegate_data by sha256), so
//    `repack --extract-delegate-segments false` of stories260k_qnn.pte, whose
//    two delegates share one segment, must store the 2.68 MB blob once and
//    equal what serialize_pte_binary(extract_delegate_segments=False) writes;
//  - vtable sharing of the Python flatbuffers package: before 25.12.19 it
//    reuses a vtable whose field offsets match even when the object size
//    differs ("python"); from 25.12.19 on the size must match too
//    ("python-2026"). Every fixture serialized both ways must be reproduced
//    byte for byte by repack's inference and encoder, with the rule named.
//
// tests/oracle/py_reserialize.py runs the serializer; it skips with a message
// when the oracle, python3-flatbuffers or flatc is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace fs = std::filesystem;
using testing::FixturePath;
using testing::ReadFile;
using testing::RunCli;
using testing::TempDir;

const std::string kOracles = testing::OraclesDir();
const std::string kScript = std::string(PTEPACK_SOURCE_DIR) + "/tests/oracle/py_reserialize.py";
const char* kPython = "/usr/bin/python3";

int Sh(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string OracleMissing() {
  if (!fs::exists(kOracles + "/executorch/exir/_serialize/_program.py")) {
    return "ExecuTorch's Python serializer not found at " + kOracles + " (../shared/oracles beside the checkout)";
  }
  if (!fs::is_directory(FixturePath(""))) return "no ExecuTorch fixtures beside the checkout";
  if (!fs::exists(kPython)) return std::string(kPython) + " not found";
  if (Sh(std::string(kPython) + " -c 'import flatbuffers' >/dev/null 2>&1") != 0) {
    return "python3-flatbuffers is not installed (scripts/install-deps.sh installs it)";
  }
  return "";
}

// Runs the serializer over `jobs` (see py_reserialize.py) in one process.
void Reserialize(const nlohmann::json& jobs, const std::string& dir) {
  std::ofstream(dir + "/jobs.json") << nlohmann::json{{"jobs", jobs}}.dump(1);
  const std::string cmd = "PYSER_SRC='" + kOracles + "/executorch' PYTHONPATH='" + kOracles +
                          "/py-stubs' PYTHONDONTWRITEBYTECODE=1 " + kPython + " '" + kScript + "' '" + dir +
                          "/jobs.json' >'" + dir + "/python.log' 2>&1";
  ASSERT_EQ(Sh(cmd), 0) << "python oracle failed; see " << dir << "/python.log";
}

std::string FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return "sizes " + std::to_string(a.size()) + " (ptepack) vs " + std::to_string(b.size()) +
         " (ExecuTorch), first difference at offset " + std::to_string(i);
}

class ProducerRules : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = OracleMissing();
    if (!why.empty()) GTEST_SKIP() << "Python serializer oracle unavailable: " << why;
  }
};

TEST_F(ProducerRules, InlineDelegateDataIsStoredOnceAsExecuTorchDoes) {
  const std::string dir = TempDir("producer_inline_" + std::to_string(::getpid()));
  const std::string original = FixturePath("stories260k_qnn.pte");
  Reserialize({{{"in", original}, {"out", dir + "/oracle.pte"}, {"extract_delegate_segments", false}}}, dir);
  ASSERT_FALSE(fs::exists(dir + "/oracle.pte.error")) << "see " << dir << "/oracle.pte.error";
  auto r = RunCli({"repack", original, "--extract-delegate-segments", "false", "-o", dir + "/ours.pte", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<uint8_t> ours = ReadFile(dir + "/ours.pte"), oracle = ReadFile(dir + "/oracle.pte");
  EXPECT_TRUE(ours == oracle) << FirstDifference(ours, oracle);

  // Two delegates, one inline entry holding the one payload the original
  // kept in its single delegate segment.
  auto in = PteFile::Open(original);
  ASSERT_TRUE(in->ok());
  uint64_t delegate_segment = 0;
  for (size_t i = 0; i < in->segments().size(); ++i)
    delegate_segment = std::max(delegate_segment, in->segments()[i].size);
  auto out = PteFile::Open(dir + "/ours.pte");
  ASSERT_TRUE(out->ok()) << out->report().findings().front().ToString();
  const auto* program = out->program();
  ASSERT_NE(program->backend_delegate_data(), nullptr);
  EXPECT_EQ(program->backend_delegate_data()->size(), 1u);
  EXPECT_EQ(program->backend_delegate_data()->Get(0)->data()->size(), delegate_segment);
  size_t delegates = 0;
  for (const auto* plan : *program->execution_plan()) {
    for (const auto* d : *plan->delegates()) {
      ++delegates;
      EXPECT_EQ(d->processed()->location(), executorch_flatbuffer::DataLocation::INLINE);
      EXPECT_EQ(d->processed()->index(), 0u);
    }
  }
  EXPECT_EQ(delegates, 2u);
  // Not larger than the original by a second copy of the blob.
  EXPECT_LT(ours.size(), ReadFile(original).size() + delegate_segment / 2);
}

// The vtable rules of both Python flatbuffers generations, on every fixture.
TEST_F(ProducerRules, PythonVtableRulesOfBothGenerationsAreReproduced) {
  const std::string dir = TempDir("producer_vtables_" + std::to_string(::getpid()));
  struct Made {
    std::string fixture, rule, out;
  };
  std::vector<Made> made;
  nlohmann::json jobs = nlohmann::json::array();
  for (const std::string& name : testing::PteFixtures()) {
    for (const char* rule : {"by-offsets", "by-offsets-and-size"}) {
      made.push_back({name, rule, dir + "/" + rule + "_" + name});
      jobs.push_back({{"in", FixturePath(name)},
                      {"out", made.back().out},
                      {"extract_delegate_segments", true},
                      {"vtables", rule}});
    }
  }
  Reserialize(jobs, dir);
  size_t differ_by_rule = 0;
  for (size_t i = 0; i < made.size(); ++i) {
    const Made& m = made[i];
    SCOPED_TRACE(m.rule + " " + m.fixture);
    ASSERT_FALSE(fs::exists(m.out + ".error")) << m.out << ".error";
    auto pte = PteFile::Open(m.out);
    ASSERT_TRUE(pte->ok()) << pte->report().findings().front().ToString();
    const std::string stem = m.fixture.substr(0, m.fixture.size() - 4);
    std::vector<std::unique_ptr<PtdFile>> ptd_files;
    std::vector<const PtdFile*> ptds;
    if (fs::exists(FixturePath(stem + ".ptd"))) {
      ptd_files.push_back(PtdFile::Open(FixturePath(stem + ".ptd")));
      ptds.push_back(ptd_files.back().get());
    }
    PackageParts pkg = PackageFromPte(*pte, ptds);
    InferredConfig inf = InferConfig(*pte, pkg, ptds);
    inf.ApplyBlobAlignments(pkg);
    ASSERT_TRUE(inf.exact) << inf.note;
    std::vector<uint8_t> written = RenderPte(LayoutPte(pkg, inf.config)), oracle = ReadFile(m.out);
    EXPECT_TRUE(written == oracle) << FirstDifference(written, oracle);
    // Where the two rules give different bytes, the inference names the rule.
    const bool same_both_ways = i % 2 == 1 && ReadFile(made[i - 1].out) == oracle;
    if (i % 2 == 0 || same_both_ways) {
      EXPECT_STREQ(FlatbufferOrderName(inf.config.flatbuffer_order), "python");
    } else {
      ++differ_by_rule;
      EXPECT_STREQ(FlatbufferOrderName(inf.config.flatbuffer_order), "python-2026");
    }
  }
  // The rule matters on most fixtures (stories260k: 18688 vs 18696 bytes).
  EXPECT_GE(differ_by_rule, 5u);
}

}  // namespace
}  // namespace ptepack
