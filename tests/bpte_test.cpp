// BundledProgram (.bpte) files: the real sample from ExecuTorch's repository, bytes written by
// flatc (ExecuTorch's own JSON -> binary path) from ExecuTorch's schema, and ExecuTorch's
// bundled_program.cpp running every test case of what we write (tests/oracle/bpte_harness.cpp).
#include "serialize/bpte/bpte.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace ptepack {
namespace {

using namespace ptepack::testing;
namespace fs = std::filesystem;

const std::string kOracles = testing::OraclesDir();
const std::string kOracleSchemaDir = kOracles + "/executorch/devtools/bundled_program/schema";

std::string Sample() { return FixturePath("bundled_program.bpte"); }

#define NEED_SAMPLE()                                                                    \
  if (!fs::exists(Sample())) {                                                           \
    GTEST_SKIP() << "ExecuTorch fixture bundled_program.bpte not found at " << Sample(); \
  }

uint32_t U32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}

Bytes Own(std::vector<uint8_t> v) { return Bytes::Own(std::move(v)); }

std::unique_ptr<bpte::BpteFile> Read(const std::vector<uint8_t>& b, const std::string& name = "t.bpte") {
  return bpte::BpteFile::FromBytes(Bytes::Copy(b.data(), b.size()), name);
}

const Finding* FindCode(const Report& r, const std::string& code) {
  for (const auto& f : r.findings()) {
    if (f.code == code) return &f;
  }
  return nullptr;
}

// The real sample: outside facts read off its bytes (root table at 0x2c, version 2, program
// vector length 0x6a0 at 0x3c, so the program starts at 0x40; ET12 at 0x44).
TEST(Bpte, ReadsTheRealSample) {
  NEED_SAMPLE();
  const auto raw = ReadFile(Sample());
  ASSERT_EQ(raw.size(), 4608u);
  ASSERT_EQ(U32(raw, 0), 0x2cu);
  ASSERT_EQ(std::string(raw.begin() + 4, raw.begin() + 8), "BP08");
  ASSERT_EQ(U32(raw, 0x3c), 1696u);
  auto f = bpte::BpteFile::Open(Sample());
  for (const auto& x : f->report().findings()) ADD_FAILURE() << x.ToString();
  EXPECT_TRUE(f->ok());
  EXPECT_EQ(f->content().version, 2u);
  EXPECT_EQ(f->program_offset(), 0x40u);
  ASSERT_EQ(f->content().program.size, 1696u);
  EXPECT_EQ(0, std::memcmp(f->content().program.data, raw.data() + 0x40, 1696));
  ASSERT_NE(f->program(), nullptr);
  EXPECT_TRUE(f->program()->ok());
  ASSERT_EQ(f->content().suites.size(), 1u);
  const auto& s = f->content().suites[0];
  EXPECT_EQ(s.method_name, "forward");
  ASSERT_EQ(s.test_cases.size(), 10u);
  for (const auto& c : s.test_cases) {
    ASSERT_EQ(c.inputs.size(), 2u);
    ASSERT_EQ(c.expected_outputs.size(), 1u);
    for (const auto* v : {&c.inputs[0], &c.inputs[1], &c.expected_outputs[0]}) {
      EXPECT_EQ(v->kind, bpte::ValueKind::kTensor);
      EXPECT_EQ(v->tensor.scalar_type, 3);  // INT
      EXPECT_EQ(v->tensor.sizes, (std::vector<int32_t>{2, 2}));
      EXPECT_EQ(v->tensor.dim_order, (std::vector<uint8_t>{0, 1}));
      EXPECT_EQ(v->tensor.data.size, 16u);
      EXPECT_EQ((v->tensor.data.data - raw.data()) % 16, 0);  // force_align: 16
    }
  }
}

// extract-program + extract-tests + build reproduce the sample byte for byte: the outer
// flatbuffer is re-encoded from the decoded test cases (only the program is copied).
TEST(Bpte, RoundTripIsByteIdentical) {
  NEED_SAMPLE();
  const auto raw = ReadFile(Sample());
  auto f = bpte::BpteFile::Open(Sample());
  // Through the tests directory form, in memory.
  const std::string dir = TempDir("bpte_rt");
  for (const auto& [name, b] : bpte::TestsToFiles(f->content())) {
    WriteFile(dir + "/" + name, std::vector<uint8_t>(b.data, b.data + b.size));
  }
  bpte::BundledProgramData d = bpte::LoadTests(dir + "/tests.json");
  d.program = Bytes::Copy(f->content().program.data, f->content().program.size);
  EXPECT_EQ(bpte::EncodeBpte(d), raw);

  // Through the CLI.
  const std::string out = TempDir("bpte_cli");
  auto r = RunCli({"bpte", "extract-program", Sample(), "-o", out + "/prog.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(out + "/prog.pte"), std::vector<uint8_t>(raw.begin() + 0x40, raw.begin() + 0x40 + 1696));
  r = RunCli({"bpte", "extract-tests", Sample(), "-o", out + "/tests"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"bpte", "build", out + "/prog.pte", out + "/tests/tests.json", "-o", out + "/re.bpte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(out + "/re.bpte"), raw);
}

// A JSON value in the form ExecuTorch's _DataclassEncoder writes for flatc: keys in the
// dataclasses' field order (the schema's), which is the order flatc creates the children in.
nlohmann::ordered_json FlatcValue(const bpte::TestValue& v) {
  nlohmann::ordered_json j;
  switch (v.kind) {
    case bpte::ValueKind::kTensor: {
      std::vector<int> data(v.tensor.data.data, v.tensor.data.data + v.tensor.data.size);
      j = {{"val_type", "Tensor"},
           {"val",
            {{"scalar_type", v.tensor.scalar_type},
             {"sizes", v.tensor.sizes},
             {"data", data},
             {"dim_order", v.tensor.dim_order}}}};
      break;
    }
    case bpte::ValueKind::kInt:
      j = {{"val_type", "Int"}, {"val", {{"int_val", v.int_val}}}};
      break;
    case bpte::ValueKind::kBool:
      j = {{"val_type", "Bool"}, {"val", {{"bool_val", v.bool_val}}}};
      break;
    default:
      j = {{"val_type", "Double"}, {"val", {{"double_val", v.double_val}}}};
      break;
  }
  return j;
}

// flatc (ExecuTorch's JSON -> binary producer) on ExecuTorch's own schema.
std::vector<uint8_t> FlatcBytes(const bpte::BundledProgramData& d, const std::string& dir) {
  nlohmann::ordered_json j;
  j["version"] = d.version;
  j["method_test_suites"] = nlohmann::ordered_json::array();
  for (const auto& s : d.suites) {
    nlohmann::ordered_json js{{"method_name", s.method_name}, {"test_cases", nlohmann::ordered_json::array()}};
    for (const auto& c : s.test_cases) {
      nlohmann::ordered_json jc{{"inputs", nlohmann::ordered_json::array()},
                                {"expected_outputs", nlohmann::ordered_json::array()}};
      for (const auto& v : c.inputs) jc["inputs"].push_back(FlatcValue(v));
      for (const auto& v : c.expected_outputs) jc["expected_outputs"].push_back(FlatcValue(v));
      js["test_cases"].push_back(jc);
    }
    j["method_test_suites"].push_back(js);
  }
  j["program"] = std::vector<int>(d.program.data, d.program.data + d.program.size);
  std::ofstream(dir + "/bp.json") << j.dump();
  const std::string cmd = "flatc -b -o " + ShellQuote(dir) + " " +
                          ShellQuote(kOracleSchemaDir + "/bundled_program_schema.fbs") + " " +
                          ShellQuote(dir + "/bp.json") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return ReadFile(dir + "/bp.bpte");
}

bpte::TestValue TensorOf(int8_t dtype, std::vector<int32_t> sizes, std::vector<uint8_t> data) {
  bpte::TestValue v;
  v.kind = bpte::ValueKind::kTensor;
  v.tensor.scalar_type = dtype;
  for (size_t i = 0; i < sizes.size(); ++i) v.tensor.dim_order.push_back(static_cast<uint8_t>(i));
  v.tensor.sizes = std::move(sizes);
  v.tensor.data = Own(std::move(data));
  return v;
}

// Every value kind, defaults (0, false, 0.0: left out by both producers), empty vectors, odd
// sizes that need padding, several suites: our encoder's bytes are flatc's.
TEST(Bpte, EncoderMatchesFlatcOnExecuTorchsSchema) {
  if (!fs::exists(kOracleSchemaDir + "/bundled_program_schema.fbs")) {
    GTEST_SKIP() << "ExecuTorch oracle not found at " << kOracles << " (its bundled_program_schema.fbs)";
  }
  if (std::system("command -v flatc >/dev/null 2>&1") != 0) GTEST_SKIP() << "flatc not installed";
  std::vector<bpte::BundledProgramData> cases;
  {
    bpte::BundledProgramData d;  // no suites, odd program size
    d.program = Own({'x', 'y', 'z'});
    cases.push_back(d);
  }
  {
    bpte::BundledProgramData d;
    d.version = 7;
    d.program = Own(std::vector<uint8_t>(101, 0xab));
    bpte::TestCase c;
    c.inputs.push_back(TensorOf(6, {3}, std::vector<uint8_t>(12, 1)));
    c.inputs.push_back(TensorOf(1, {}, {5}));
    bpte::TestValue i64;
    i64.kind = bpte::ValueKind::kInt;
    i64.int_val = -1234567890123;
    c.inputs.push_back(i64);
    bpte::TestValue zero = i64;
    zero.int_val = 0;
    c.inputs.push_back(zero);
    bpte::TestValue b;
    b.kind = bpte::ValueKind::kBool;
    b.bool_val = true;
    c.inputs.push_back(b);
    b.bool_val = false;
    c.inputs.push_back(b);
    bpte::TestValue dbl;
    dbl.kind = bpte::ValueKind::kDouble;
    dbl.double_val = 0.1;
    c.expected_outputs.push_back(dbl);
    c.expected_outputs.push_back(TensorOf(0, {0, 2}, {}));
    bpte::TestCase empty;
    d.suites.push_back({"forward", {c, empty, c}, 0});
    d.suites.push_back({"other_method", {}, 0});
    d.suites.push_back({"m", {empty}, 0});
    cases.push_back(d);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string dir = TempDir("bpte_flatc_" + std::to_string(i));
    const auto ours = bpte::EncodeBpte(cases[i]);
    const auto theirs = FlatcBytes(cases[i], dir);
    if (ours != theirs) WriteFile(dir + "/ours.bpte", ours);  // compare with flatc --annotate
    EXPECT_EQ(ours, theirs) << "case " << i << " (both in " << dir << ")";
  }
}

// The smallest bundle (version 2, no suites, a 1-byte program), read with flatbuffers' rules by
// hand: root offset -> table -> vtable; the program's data at a multiple of 32 (force_align).
TEST(Bpte, SmallestBundleLayout) {
  bpte::BundledProgramData d;
  d.program = Own({0x7f});
  const std::vector<uint8_t> got = bpte::EncodeBpte(d);
  ASSERT_GE(got.size(), 8u);
  EXPECT_EQ(std::string(got.begin() + 4, got.begin() + 8), "BP08");
  const uint32_t root = U32(got, 0);
  const int32_t vt_back = static_cast<int32_t>(U32(got, root));
  const size_t vt = root - vt_back;
  EXPECT_EQ(got[vt], 10);             // vtable size: 3 fields
  EXPECT_EQ(U32(got, root + 4), 2u);  // version at field offset 4
  const size_t prog_len_at = root + 12 + U32(got, root + 12);
  EXPECT_EQ(U32(got, prog_len_at), 1u);   // program length
  EXPECT_EQ(got[prog_len_at + 4], 0x7f);  // program data
  EXPECT_EQ((prog_len_at + 4) % 32, 0u);  // force_align 32
  const size_t suites_at = root + 8 + U32(got, root + 8);
  EXPECT_EQ(U32(got, suites_at), 0u);  // empty, present
}

// Test cases that do not fit the program: each a located error.
class BpteChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(Sample())) GTEST_SKIP() << "ExecuTorch fixture bundled_program.bpte not found at " << Sample();
    f_ = bpte::BpteFile::Open(Sample());
    d_ = f_->content();
  }
  std::unique_ptr<bpte::BpteFile> Rebuilt() { return Read(bpte::EncodeBpte(d_)); }
  std::unique_ptr<bpte::BpteFile> f_;
  bpte::BundledProgramData d_;
};

TEST_F(BpteChecks, UnknownMethod) {
  d_.suites[0].method_name = "backward";
  auto g = Rebuilt();
  const Finding* x = FindCode(g->report(), "bpte-unknown-method");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->expected, "one of: forward");
  EXPECT_EQ(x->found, "\"backward\"");
  EXPECT_EQ(*x->offset, g->content().suites[0].offset);
}

TEST_F(BpteChecks, ShortTensorData) {
  auto& t = d_.suites[0].test_cases[3].inputs[1].tensor;
  t.data = t.data.Sub(0, 12);
  auto g = Rebuilt();
  const Finding* x = FindCode(g->report(), "bpte-tensor-data-size");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->severity, Finding::Severity::kError);
  EXPECT_NE(x->message.find("test case 3 input 1"), std::string::npos) << x->message;
  EXPECT_EQ(x->expected, "16 bytes (INT [2, 2])");
  EXPECT_EQ(x->found, "12 bytes");
  EXPECT_EQ(*x->offset, static_cast<uint64_t>(g->content().suites[0].test_cases[3].inputs[1].tensor.data.data -
                                              (g->content().program.data - g->program_offset())));
}

TEST_F(BpteChecks, TooFewInputsWrongDtypeShapeAndDimOrder) {
  d_.suites[0].test_cases[0].inputs.pop_back();
  d_.suites[0].test_cases[1].inputs[0].tensor.scalar_type = 6;  // FLOAT, 4 bytes as INT
  d_.suites[0].test_cases[2].inputs[0].tensor.sizes = {4, 1};
  d_.suites[0].test_cases[4].expected_outputs[0].tensor.dim_order = {1, 1};
  auto g = Rebuilt();
  ASSERT_NE(FindCode(g->report(), "bpte-value-count"), nullptr);
  EXPECT_EQ(FindCode(g->report(), "bpte-value-count")->expected, "2");
  const Finding* dt = FindCode(g->report(), "bpte-tensor-dtype");
  ASSERT_NE(dt, nullptr);
  EXPECT_EQ(dt->expected, "INT");
  EXPECT_EQ(dt->found, "FLOAT");
  const Finding* sh = FindCode(g->report(), "bpte-tensor-shape");
  ASSERT_NE(sh, nullptr);
  EXPECT_EQ(sh->expected, "[2, 2]");
  EXPECT_EQ(sh->found, "[4, 1]");
  ASSERT_NE(FindCode(g->report(), "bpte-tensor-dim-order"), nullptr);
  EXPECT_FALSE(g->ok());
}

TEST_F(BpteChecks, WrongIdentifierAndTruncation) {
  auto raw = ReadFile(Sample());
  raw[7] = '9';
  auto g = Read(raw);
  const Finding* x = FindCode(g->report(), "bpte-identifier");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(*x->offset, 4u);
  EXPECT_EQ(x->found, "\"BP09\"");
  raw = ReadFile(Sample());
  raw.resize(2000);
  EXPECT_NE(FindCode(Read(raw)->report(), "flatbuffer-invalid"), nullptr);
}

// A broken wrapped program: PteFile's findings, at their offsets in the .bpte.
TEST_F(BpteChecks, WrappedProgramFindingsAreLocatedInTheBpte) {
  auto raw = ReadFile(Sample());
  raw[0x40 + 4] = 'X';  // the program's ET12 identifier
  auto g = Read(raw);
  EXPECT_FALSE(g->ok());
  EXPECT_FALSE(g->program_ok());
  bool found = false;
  for (const auto& x : g->report().findings()) {
    if (x.message.rfind("wrapped program: ", 0) == 0 && x.offset && *x.offset >= 0x40) found = true;
  }
  EXPECT_TRUE(found);
}

TEST(BpteCli, InspectVerifyRecogniseByIdentifier) {
  NEED_SAMPLE();
  const std::string dir = TempDir("bpte_cli_id");
  fs::copy_file(Sample(), dir + "/renamed.pte");
  auto r = RunCli({"inspect", dir + "/renamed.pte"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("BundledProgram"), std::string::npos);
  EXPECT_NE(r.out.find("method \"forward\": 10 test case(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input 1: tensor INT [2, 2] 16 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("operators (2): aten::mul.out aten::add.out"), std::string::npos) << r.out;
  r = RunCli({"inspect", Sample(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "bpte");
  EXPECT_EQ(j["program"]["offset"], 64);
  EXPECT_EQ(j["method_test_suites"][0]["test_cases"].size(), 10u);
  EXPECT_EQ(j["method_test_suites"][0]["test_cases"][9]["expected_outputs"][0]["dtype"], "INT");
  EXPECT_EQ(j["method_test_suites"][0]["test_cases"][9]["expected_outputs"][0]["bytes"], 16);
  r = RunCli({"verify", Sample()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"verify", Sample(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["valid"], true);

  auto raw = ReadFile(Sample());
  raw[0x40 + 4] = 'X';
  WriteFile(dir + "/bad.bpte", raw);
  r = RunCli({"verify", dir + "/bad.bpte"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.bpte: error at offset"), std::string::npos) << r.err;
  // Not a program verify would accept: the first error, exit 2 (README, "Exit status").
  r = RunCli({"bpte", "extract-program", dir + "/bad.bpte", "-o", dir + "/p.pte"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.bpte: error at offset"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/p.pte"));
}

TEST(BpteCli, BuildRejectsBadTestsWithALocatedError) {
  NEED_SAMPLE();
  const std::string dir = TempDir("bpte_cli_bad");
  ASSERT_EQ(RunCli({"bpte", "extract-program", Sample(), "-o", dir + "/p.pte"}).exit_code, 0);
  std::ofstream(dir + "/tests.json")
      << R"({"method_test_suites": [{"method_name": "forward", "test_cases": [{"inputs": [{"tensor": {"dtype": "NOPE", "sizes": [1], "data": "x.bin"}}], "expected_outputs": []}]}]})";
  auto r = RunCli({"bpte", "build", dir + "/p.pte", dir + "/tests.json", "-o", dir + "/o.bpte"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("method_test_suites[0].test_cases[0].inputs[0].tensor.dtype: unknown dtype \"NOPE\""),
            std::string::npos)
      << r.err;
  // Valid JSON, but the case does not fit the method: nothing is written.
  std::vector<uint8_t> four(16, 0);
  WriteFile(dir + "/x.bin", four);
  std::ofstream(dir + "/tests.json", std::ios::trunc)
      << R"({"method_test_suites": [{"method_name": "forward", "test_cases": [{"inputs": [{"tensor": {"dtype": "INT", "sizes": [2, 2], "data": "x.bin"}}], "expected_outputs": []}]}]})";
  r = RunCli({"bpte", "build", dir + "/p.pte", dir + "/tests.json", "-o", dir + "/o.bpte"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bpte-value-count"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/o.bpte"));
}

#ifdef PTEPACK_BPTE_ORACLE
nlohmann::json RunOracle(const std::string& path, int* rc) {
  std::string cmd = std::string(PTEPACK_BPTE_ORACLE) + " " + ShellQuote(path);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return nlohmann::json::parse(out);
}
#endif

// ExecuTorch's bundled_program.cpp loads what we write, feeds every test case's inputs to the
// method, runs it and checks the outputs against the expected ones.
TEST(BpteOracle, RuntimeRunsEveryTestCaseOfWhatWeWrite) {
#ifndef PTEPACK_BPTE_ORACLE
  GTEST_SKIP() << "ExecuTorch's bundled_program.cpp oracle not built (needs ../shared/oracles)";
#else
  NEED_SAMPLE();
  const std::string dir = TempDir("bpte_oracle");
  int rc = -1;
  // Control: the real file.
  auto j = RunOracle(Sample(), &rc);
  ASSERT_EQ(rc, 0) << j.dump();
  ASSERT_EQ(j["methods"][0]["cases"].size(), 10u);
  // Ours: the sample's test cases in a different arrangement (reversed, a second copy of
  // case 0 appended), so the bytes are ours, not the sample's.
  auto f = bpte::BpteFile::Open(Sample());
  bpte::BundledProgramData d = f->content();
  auto& cases = d.suites[0].test_cases;
  std::reverse(cases.begin(), cases.end());
  cases.push_back(cases.front());
  for (auto order : {FlatbufferOrder::kFlatc, FlatbufferOrder::kPythonObjectApi}) {
    WriteFile(dir + "/ours.bpte", bpte::EncodeBpte(d, order));
    j = RunOracle(dir + "/ours.bpte", &rc);
    EXPECT_EQ(rc, 0) << j.dump();
    ASSERT_EQ(j["methods"][0]["cases"].size(), 11u);
    for (const auto& c : j["methods"][0]["cases"])
      EXPECT_EQ(c["verify_method_outputs"]["name"], "Error::Ok") << j.dump();
  }
  // Negative control: a wrong expected output is caught by the runtime.
  auto& t = cases[2].expected_outputs[0].tensor;
  std::vector<uint8_t> changed(t.data.data, t.data.data + t.data.size);
  changed[0] ^= 1;
  t.data = Own(changed);
  WriteFile(dir + "/wrong.bpte", bpte::EncodeBpte(d));
  j = RunOracle(dir + "/wrong.bpte", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(j["methods"][0]["cases"][2]["verify_method_outputs"]["name"], "Error::Ok") << j.dump();
  EXPECT_EQ(j["methods"][0]["cases"][1]["verify_method_outputs"]["name"], "Error::Ok") << j.dump();
#endif
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// Inputs fuzz_bpte_reader crashed on (testdata/regressions/*.bpte): read, described and turned
// into a tests directory (or refused with an Error), with the finding the reader now reports.
TEST(BpteRegressions, FuzzerInputs) {
  const std::string dir = std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".bpte") continue;
    ++n;
    auto f = bpte::BpteFile::Open(e.path().string());
    (void)bpte::RenderBpteText(bpte::DescribeBpte(*f));
    try {
      (void)bpte::TestsToFiles(f->content(), e.path().string());
    } catch (const Error& x) {
      EXPECT_NE(x.finding().file, "") << x.what();
    }
  }
  EXPECT_GE(n, 1u);
  // Read constant_buffer[data_buffer_idx] past its end (fuzz_bpte_reader, seed
  // of 2026-12-05): the wrapped program has constant_segment offsets (3), a
  // constant_buffer (1) and an unusable segment; the runtime then reads
  // constant_buffer and refuses an index past its size, as the check now does.
  auto g = bpte::BpteFile::Open(dir + "/bpte-constant-index-past-constant-buffer.bpte");
  EXPECT_NE(FindCode(g->report(), "constants-in-both"), nullptr);
  const Finding* idx = FindCode(g->report(), "index-out-of-range");
  ASSERT_NE(idx, nullptr);
  EXPECT_NE(idx->message.find("is not a constant_buffer index"), std::string::npos) << idx->message;
  EXPECT_EQ(idx->expected, "< 1");
  // Crashed nlohmann::json's dump in TestsToFiles (a method name that is not UTF-8).
  auto f = bpte::BpteFile::Open(dir + "/bpte_method_name_not_utf8.bpte");
  ASSERT_NE(FindCode(f->report(), "bpte-method-name-utf8"), nullptr);
  EXPECT_THROW(bpte::TestsToFiles(f->content(), "x.bpte"), Error);
  auto r = RunCli({"bpte", "extract-tests", dir + "/bpte_method_name_not_utf8.bpte", "-o", TempDir("bpte_reg") + "/t"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bpte_method_name_not_utf8.bpte: error at offset"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ptepack
