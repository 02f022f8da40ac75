// `ptepack diff`: the same content in another layout is "layout only" (exit
// 0); a program changed in known ways gives exactly those changes (exit 1).
#include "serialize/insight/diff.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::RunCli;

nlohmann::json DiffCli(const std::vector<std::string>& args, int* code) {
  std::vector<std::string> all = {"diff", "--json"};
  all.insert(all.end(), args.begin(), args.end());
  auto r = RunCli(all);
  *code = r.exit_code;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// Content changes as (category, subject, kind).
std::set<std::tuple<std::string, std::string, std::string>> ContentChanges(const nlohmann::json& d) {
  std::set<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& c : d["changes"]) {
    if (!c["layout"].get<bool>()) {
      out.insert({c["category"].get<std::string>(), c["subject"].get<std::string>(), c["kind"].get<std::string>()});
    }
  }
  return out;
}

const nlohmann::json* FindChange(const nlohmann::json& d, const std::string& category, const std::string& subject) {
  for (const auto& c : d["changes"]) {
    if (c["category"] == category && c["subject"] == subject) return &c;
  }
  return nullptr;
}

TEST(Diff, AFileAgainstItselfIsIdentical) {
  int code = -1;
  auto d = DiffCli({FixturePath("keyword_spotting.pte"), FixturePath("keyword_spotting.pte")}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(d["verdict"], "identical");
  EXPECT_TRUE(d["changes"].empty()) << d["changes"].dump();
}

// Repacked at another segment alignment: every fixture with segments is the
// same content, and the config diff names the alignment.
TEST(Diff, RepackAtAnotherAlignmentIsLayoutOnly) {
  const std::string dir = testing::TempDir("diff_layout");
  for (const char* name : {"arduino_add.pte", "keyword_spotting.pte", "stories260k_qnn.pte", "conv2d_quantized.pte"}) {
    SCOPED_TRACE(name);
    const std::string out = dir + "/" + name;
    auto rp = RunCli({"repack", FixturePath(name), "-o", out, "--segment-alignment", "4096"});
    ASSERT_EQ(rp.exit_code, 0) << rp.err;
    int code = -1;
    auto d = DiffCli({FixturePath(name), out}, &code);
    EXPECT_EQ(code, 0);
    EXPECT_EQ(d["verdict"], "layout only");
    EXPECT_EQ(d["content_changes"], 0);
    EXPECT_TRUE(ContentChanges(d).empty()) << d["changes"].dump();
    const auto* c = FindChange(d, "config", "segment_alignment");
    ASSERT_NE(c, nullptr) << d["changes"].dump();
    // What fits the output: 4096, the value asked for, alone or inside a range "lo..hi".
    const std::string b = (*c)["b"].get<std::string>();
    const size_t dots = b.find("..");
    const uint64_t lo = std::stoull(b), hi = dots == std::string::npos ? lo : std::stoull(b.substr(dots + 2));
    EXPECT_LE(lo, 4096u) << b;
    EXPECT_GE(hi, 4096u) << b;
    EXPECT_TRUE((*c)["layout"].get<bool>());
    // The text form says so too.
    auto t = RunCli({"diff", FixturePath(name), out});
    EXPECT_EQ(t.exit_code, 0);
    EXPECT_NE(t.out.find("layout only"), std::string::npos) << t.out;
  }
}

// Another flatbuffer order and inline constants: still layout only.
TEST(Diff, AnotherFlatbufferOrderIsLayoutOnly) {
  const std::string dir = testing::TempDir("diff_order");
  const std::string out = dir + "/kws.pte";
  auto rp = RunCli({"repack", FixturePath("keyword_spotting.pte"), "-o", out, "--flatbuffer-order", "flatc",
                    "--constant-tensor-alignment", "64"});
  ASSERT_EQ(rp.exit_code, 0) << rp.err;
  int code = -1;
  auto d = DiffCli({FixturePath("keyword_spotting.pte"), out}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(d["verdict"], "layout only") << d["changes"].dump();
}

// Every fixture rewritten in each flatbuffer order, and with delegates
// inline: never "different" (the flatbuffer bytes change; the content does not).
TEST(Diff, EveryFixtureInEveryFlatbufferOrderIsTheSameContent) {
  const std::string dir = testing::TempDir("diff_grid");
  for (const std::string& name : testing::PteFixtures()) {
    if (name == "linear.pte" || name == "xor.pte" || name == "bundled_program.bpte")
      continue;  // need a .ptd / no program
    for (std::vector<std::string> flags : {std::vector<std::string>{"--flatbuffer-order", "flatc"},
                                           std::vector<std::string>{"--flatbuffer-order", "python"},
                                           std::vector<std::string>{"--extract-delegate-segments", "false"}}) {
      SCOPED_TRACE(name + " " + flags[0] + " " + flags[1]);
      std::vector<std::string> args = {"repack", FixturePath(name), "-o", dir + "/out.pte", "--force"};
      args.insert(args.end(), flags.begin(), flags.end());
      auto rp = RunCli(args);
      ASSERT_EQ(rp.exit_code, 0) << rp.err;
      int code = -1;
      auto d = DiffCli({FixturePath(name), dir + "/out.pte"}, &code);
      EXPECT_EQ(code, 0);
      EXPECT_NE(d["verdict"], "different") << d["changes"].dump(1);
    }
  }
}

std::vector<uint8_t> Floats(std::initializer_list<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

// forward: y = op(x, w); `variant` changes w's bytes, the operator, and adds a method.
Package Program(bool variant) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
  uint32_t w = m.ConstantTensor({ScalarType::kFloat, {2}}, Bytes::Own(Floats({1.0f, variant ? 2.5f : 2.0f})), "w");
  uint32_t bias = m.ConstantTensor({ScalarType::kFloat, {2}}, Bytes::Own(Floats({3.0f, 4.0f})), "b");
  uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
  uint32_t alpha = m.Int(1);
  m.KernelCall(m.Operator(variant ? "aten::mul" : "aten::add", "out"), {int(x), int(w), int(alpha), int(y), int(y)});
  m.KernelCall(m.Operator("aten::sub", "out"), {int(y), int(bias), int(alpha), int(y), int(y)});
  m.Inputs({int(x)});
  m.Outputs({int(y)});
  m.PlannedBufferSizes({0, 32});
  if (variant) {
    auto& g = b.AddMethod("get_max_seq_len");
    uint32_t v = g.Int(128);
    g.Outputs({int(v)});
  }
  return b.Build();
}

TEST(Diff, AModifiedProgramGivesExactlyItsChanges) {
  const std::string dir = testing::TempDir("diff_modified");
  BackendConfig config;
  WritePackage(Program(false), config, dir + "/a.pte");
  WritePackage(Program(true), config, dir + "/b.pte");
  auto a = PteFile::Open(dir + "/a.pte");
  auto b = PteFile::Open(dir + "/b.pte");
  DiffResult r = DiffPrograms(*a, {}, *b, {});
  EXPECT_EQ(r.verdict, DiffVerdict::kDifferent);
  nlohmann::json d = DiffJson(r);
  using C = std::tuple<std::string, std::string, std::string>;
  // Constants without a name in the file are named by method and value index (w is value 1).
  std::set<C> want = {C{"constant", "forward/value 1", "changed"}, C{"operators", "forward", "removed"},
                      C{"operators", "forward", "added"}, C{"method", "get_max_seq_len", "added"}};
  EXPECT_EQ(ContentChanges(d), want) << d["changes"].dump(1);
  const auto* c = FindChange(d, "constant", "forward/value 1");
  ASSERT_NE(c, nullptr);
  EXPECT_NE((*c)["a"], (*c)["b"]);
  for (const auto& ch : d["changes"]) {
    if (ch["category"] == "operators" && ch["kind"] == "removed") {
      EXPECT_EQ(ch["a"], "aten::add.out");
    }
    if (ch["category"] == "operators" && ch["kind"] == "added") {
      EXPECT_EQ(ch["b"], "aten::mul.out");
    }
  }
  // The other way round: the method is removed; the CLI exits 1.
  int code = -1;
  auto back = DiffCli({dir + "/b.pte", dir + "/a.pte"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(back["verdict"], "different");
  EXPECT_EQ(ContentChanges(back).count(C{"method", "get_max_seq_len", "removed"}), 1u);
}

// An Int argument changed, nothing else: the method's content differs.
TEST(Diff, AChangedValueIsFoundEvenWhenNoSummaryFieldDiffers) {
  const std::string dir = testing::TempDir("diff_value");
  auto make = [](int64_t alpha_value) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
    uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
    uint32_t alpha = m.Int(alpha_value);
    m.KernelCall(m.Operator("aten::add", "out"), {int(x), int(x), int(alpha), int(y), int(y)});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes({0, 32});
    return b.Build();
  };
  WritePackage(make(1), BackendConfig{}, dir + "/a.pte");
  WritePackage(make(2), BackendConfig{}, dir + "/b.pte");
  int code = -1;
  auto d = DiffCli({dir + "/a.pte", dir + "/b.pte"}, &code);
  EXPECT_EQ(code, 1);
  using C = std::tuple<std::string, std::string, std::string>;
  EXPECT_EQ(ContentChanges(d), (std::set<C>{C{"method", "forward", "changed"}})) << d["changes"].dump(1);
}

// A delegate's payload and one compile spec changed; its backend id kept.
TEST(Diff, DelegatePayloadAndCompileSpecChanges) {
  const std::string dir = testing::TempDir("diff_delegate");
  auto make = [](bool variant) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
    uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
    std::vector<uint8_t> payload(100, 7);
    if (variant) payload[50] = 8;
    uint32_t d =
        m.Delegate("XnnpackBackend", Bytes::Own(payload),
                   {{"threads", Bytes::Own({variant ? uint8_t{4} : uint8_t{2}})}, {"mode", Bytes::Own({1, 2, 3})}});
    m.DelegateCall(d, {int(x), int(y)});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes({0, 32});
    return b.Build();
  };
  WritePackage(make(false), BackendConfig{}, dir + "/a.pte");
  WritePackage(make(true), BackendConfig{}, dir + "/b.pte");
  int code = -1;
  auto d = DiffCli({dir + "/a.pte", dir + "/b.pte"}, &code);
  EXPECT_EQ(code, 1);
  using C = std::tuple<std::string, std::string, std::string>;
  EXPECT_EQ(ContentChanges(d), (std::set<C>{C{"delegate", "forward delegate 0 payload", "changed"},
                                            C{"delegate", "forward delegate 0 compile spec threads", "changed"}}))
      << d["changes"].dump(1);
  const auto* c = FindChange(d, "delegate", "forward delegate 0 compile spec threads");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["a"], "0x02");
  EXPECT_EQ((*c)["b"], "0x04");
}

// linear.pte keeps its weights in linear.ptd; written again with another tag
// (ExecuTorch's external_constants="weights"), the same tensors live in
// weights.ptd: layout only, each constant "moved".
TEST(Diff, PtdBackedFixtureAgainstASplitWithAnotherTag) {
  const std::string dir = testing::TempDir("diff_ptd");
  auto pte = PteFile::Open(FixturePath("linear.pte"));
  auto ptd = PtdFile::Open(FixturePath("linear.ptd"));
  PackageParts pkg = PackageFromPte(*pte, {ptd.get()});
  InferredConfig inf = InferConfig(*pte, pkg, {ptd.get()});
  inf.ApplyBlobAlignments(pkg);
  BackendConfig config = inf.config;
  ASSERT_EQ(pkg.external.size(), 1u);
  ASSERT_EQ(pkg.external[0].tag, "linear");
  pkg.external[0].tag = "weights";
  WritePackage(PackageOf(pkg), config, dir + "/linear.pte");
  int code = -1;
  auto d = DiffCli({FixturePath("linear.pte"), dir + "/linear.pte", "--ptd-a", FixturePath("linear.ptd"), "--ptd-b",
                    dir + "/weights.ptd"},
                   &code);
  EXPECT_EQ(code, 0) << d.dump(1);
  EXPECT_EQ(d["verdict"], "layout only");
  EXPECT_TRUE(ContentChanges(d).empty()) << d["changes"].dump(1);
  size_t moved = 0;
  for (const auto& c : d["changes"]) {
    if (c["category"] == "constant" && c["kind"] == "moved") {
      ++moved;
      EXPECT_EQ(c["a"], "linear.ptd");
      EXPECT_EQ(c["b"], "weights.ptd");
    }
  }
  // linear.pte has two external tensors (weight and bias).
  EXPECT_EQ(moved, 2u) << d["changes"].dump(1);
  // Changing one weight byte in the new .ptd is a content change of exactly that tensor.
  std::vector<uint8_t> bytes = testing::ReadFile(dir + "/weights.ptd");
  auto wptd = PtdFile::Open(dir + "/weights.ptd");
  ASSERT_FALSE(wptd->entries().empty());
  const PtdEntry& e = wptd->entries()[0];
  bytes[wptd->segments()[e.segment_index].file_offset + e.offset] ^= 0x01;
  testing::WriteFile(dir + "/weights.ptd", bytes);
  d = DiffCli({FixturePath("linear.pte"), dir + "/linear.pte", "--ptd-a", FixturePath("linear.ptd"), "--ptd-b",
               dir + "/weights.ptd"},
              &code);
  EXPECT_EQ(code, 1);
  auto changed = ContentChanges(d);
  ASSERT_EQ(changed.size(), 1u) << d["changes"].dump(1);
  EXPECT_EQ(std::get<0>(*changed.begin()), "constant");
  EXPECT_NE(d["changes"].dump().find(e.key), std::string::npos) << e.key;
}

// External tensors whose .ptd was given for one side only cannot be
// compared: a content change (exit 1), never silently the same.
TEST(Diff, AMissingPtdOnOneSideIsNotTheSame) {
  int code = -1;
  auto d = DiffCli({FixturePath("linear.pte"), FixturePath("linear.pte"), "--ptd-a", FixturePath("linear.ptd")}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(d["verdict"], "different");
  size_t constants = 0;
  for (const auto& c : d["changes"]) {
    if (c["category"] == "constant") {
      ++constants;
      EXPECT_EQ(c["kind"], "changed");
      EXPECT_NE(c["b"].get<std::string>().find("data not given"), std::string::npos) << c;
    }
  }
  EXPECT_EQ(constants, 2u) << d["changes"].dump(1);
}

// A CPU program with its constants in the .pte against its split into a .ptd:
// the same tensors, now stored outside; layout only.
TEST(Diff, SplitIntoAPtdIsLayoutOnly) {
  const std::string dir = testing::TempDir("diff_split");
  auto sp =
      RunCli({"split", FixturePath("keyword_spotting.pte"), "--external-constants", "weights", "-o", dir + "/kws.pte"});
  ASSERT_EQ(sp.exit_code, 0) << sp.err;
  int code = -1;
  auto d = DiffCli({FixturePath("keyword_spotting.pte"), dir + "/kws.pte", "--ptd-b", dir + "/weights.ptd"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(d["verdict"], "layout only");
  EXPECT_TRUE(ContentChanges(d).empty()) << d["changes"].dump(1);
  size_t moved = 0;
  for (const auto& c : d["changes"]) moved += c["kind"] == "moved";
  EXPECT_GT(moved, 0u);
  EXPECT_EQ(moved, d["a"]["constants"].get<size_t>());
}

TEST(Diff, BadInputsExit2) {
  auto r = RunCli({"diff", FixturePath("keyword_spotting.pte"), FixturePath("linear.ptd")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("linear.ptd"), std::string::npos) << r.err;
  r = RunCli({"diff", FixturePath("keyword_spotting.pte"), FixturePath("bundled_program.bpte")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bundled_program.bpte"), std::string::npos) << r.err;
}

// The memory plan alone (what `ptepack plan -o` changes): planned tensors at other offsets of
// the same buffers, and planned buffers of other sizes, are "memory plan only" (exit 0); a
// tensor moved to another buffer (memory_id) is a change of content.
TEST(Diff, TheMemoryPlanAloneIsMemoryPlanOnly) {
  const std::string dir = testing::TempDir("diff_plan");
  // x input [0, 0], t [0, 1], y output [1, 1]: y may share x's bytes.
  auto make = [](uint64_t y_offset, uint32_t y_buffer, int64_t size) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    uint32_t x = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}});
    uint32_t t = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 16}});
    uint32_t y = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{y_buffer, y_offset}});
    m.KernelCall(m.Operator("aten::exp", "out"), {int(x), int(t), int(t)});
    m.KernelCall(m.Operator("aten::neg", "out"), {int(t), int(y), int(y)});
    m.Inputs({int(x)});
    m.Outputs({int(y)});
    m.PlannedBufferSizes(y_buffer == 1 ? std::vector<int64_t>{0, size} : std::vector<int64_t>{0, size, 16});
    return b.Build();
  };
  WritePackage(make(32, 1, 48), BackendConfig{}, dir + "/a.pte");
  WritePackage(make(0, 1, 48), BackendConfig{}, dir + "/moved.pte");    // y over x: offsets only
  WritePackage(make(32, 1, 64), BackendConfig{}, dir + "/larger.pte");  // the buffer size only
  WritePackage(make(0, 1, 32), BackendConfig{}, dir + "/replanned.pte");
  WritePackage(make(0, 2, 32), BackendConfig{}, dir + "/buffer2.pte");  // y in another buffer
  int code = -1;
  for (const char* b : {"moved", "larger", "replanned"}) {
    auto d = DiffCli({dir + "/a.pte", dir + "/" + b + ".pte"}, &code);
    EXPECT_EQ(code, 0) << b;
    EXPECT_EQ(d["verdict"], "memory plan only") << b << ": " << d["changes"].dump(1);
    EXPECT_EQ(d["content_changes"], 0) << b;
    EXPECT_GT(d["plan_changes"].get<size_t>(), 0u) << b;
    for (const auto& c : d["changes"]) {
      if (!c["layout"].get<bool>()) {
        EXPECT_TRUE(c["plan"].get<bool>()) << b << ": " << c.dump();
      }
    }
  }
  auto moved = DiffCli({dir + "/a.pte", dir + "/moved.pte"}, &code);
  const auto* c = FindChange(moved, "memory", "forward planned tensor offsets");
  ASSERT_NE(c, nullptr) << moved["changes"].dump(1);
  EXPECT_EQ((*c)["a"], "1 of 3 planned tensors moved (first: values[2] at 32 -> 0 in buffer 1)");
  auto larger = DiffCli({dir + "/a.pte", dir + "/larger.pte"}, &code);
  c = FindChange(larger, "memory", "forward planned buffers");
  ASSERT_NE(c, nullptr) << larger["changes"].dump(1);
  EXPECT_EQ((*c)["a"], "[0, 48]");
  EXPECT_EQ((*c)["b"], "[0, 64]");
  auto text = RunCli({"diff", dir + "/a.pte", dir + "/replanned.pte"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("memory plan only: the same content"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("memory (memory plan only):"), std::string::npos) << text.out;
  auto other = DiffCli({dir + "/a.pte", dir + "/buffer2.pte"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(other["verdict"], "different") << other["changes"].dump(1);
  using C = std::tuple<std::string, std::string, std::string>;
  EXPECT_EQ(ContentChanges(other).count(C{"method", "forward", "changed"}), 1u) << other["changes"].dump(1);
}

}  // namespace
}  // namespace ptepack
