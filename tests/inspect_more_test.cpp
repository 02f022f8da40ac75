// `inspect` additions of issue 13 part 6: values returned by metadata methods, compile-spec keys
// and small values, planned buffers in human units, a stack trace sample, stored tensors, and
// the --method / --tensor filters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::RunCli;

const json& Method(const json& d, const std::string& name) {
  for (const auto& m : d["methods"]) {
    if (m["name"] == name) return m;
  }
  static const json none;
  ADD_FAILURE() << "no method " << name;
  return none;
}

// stories260k_qnn.pte, by hand from `flatc --json`: get_max_seq_len has no inputs, no
// instructions and returns values[0] = Int 128; get_use_kv_cache returns Bool true;
// get_kv_output_0_quant_attr returns (Double 0.012077862397, Int 128, Int 0 (default), Int 255,
// String "torch.uint8"); kv_forward's QnnBackend delegate has one compile spec
// "qnn_compile_spec" of 200 bytes (too long to print).
TEST(InspectMore, MetadataMethodsAndCompileSpecs) {
  auto r = RunCli({"inspect", FixturePath("stories260k_qnn.pte"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_EQ(Method(d, "get_max_seq_len")["returns"], json::array({128}));
  EXPECT_EQ(Method(d, "get_use_kv_cache")["returns"], json::array({true}));
  const json& q = Method(d, "get_kv_output_0_quant_attr")["returns"];
  ASSERT_EQ(q.size(), 5u);
  EXPECT_NEAR(q[0].get<double>(), 0.012077862397, 1e-12);
  EXPECT_EQ(q[1], 128);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 255);
  EXPECT_EQ(q[4], "torch.uint8");
  EXPECT_FALSE(Method(d, "kv_forward").contains("returns"));
  const json& specs = Method(d, "kv_forward")["delegates"][0]["compile_spec_values"];
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0]["key"], "qnn_compile_spec");
  EXPECT_EQ(specs[0]["size"], 200);
  EXPECT_FALSE(specs[0].contains("hex"));

  auto text = RunCli({"inspect", FixturePath("stories260k_qnn.pte"), "--method", "get_max_seq_len"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("method \"get_max_seq_len\" (constant): returns 128\n"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("kv_forward"), std::string::npos) << text.out;
  auto bad = RunCli({"inspect", FixturePath("stories260k_qnn.pte"), "--method", "nope"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("get_max_seq_len"), std::string::npos) << bad.err;
}

// conv2d_quantized.pte: non_const_buffer_sizes [0, 4014080] (flatc --json) -> planned buffer #0 of
// 4014080 bytes = 3.8 MiB; values[0] CHAR[64,3,7,7] (9408 bytes) and values[1] INT[64] (256 bytes)
// are its constants, unnamed.
TEST(InspectMore, PlannedBuffersInHumanUnitsAndTensorFilter) {
  auto r = RunCli({"inspect", FixturePath("conv2d_quantized.pte"), "--tensor", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("planned buffers: #0 3.8 MiB\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensor #0 (unnamed): CHAR[64,3,7,7], 9.2 KiB, constant segment buffer 1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tensor #1 (unnamed): INT[64], 256 B, constant segment buffer 2"), std::string::npos) << r.out;
  // xor.pte's external tensors by name (flatc --json: net.linear.weight/bias, net.linear2.weight/bias).
  auto x = RunCli({"inspect", FixturePath("xor.pte"), "--tensor", "linear2", "--json"});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  json d = json::parse(x.out);
  const json& ts = Method(d, "forward")["stored_tensors"];
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0]["name"], "net.linear2.weight");
  EXPECT_EQ(ts[0]["sizes"], json::array({2, 10}));
  EXPECT_EQ(ts[0]["bytes"], 80);
  EXPECT_EQ(ts[1]["name"], "net.linear2.bias");
}

// A program written with emit_stacktrace: the sample is the first instruction's frames.
TEST(InspectMore, StackTraceSampleAndSmallCompileSpecs) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
  uint32_t y = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 16}});
  uint32_t alpha = m.Int(1);
  m.KernelCall(m.Operator("aten::add", "out"), {int(x), int(x), int(alpha), int(y), int(y)},
               {{"model.py", 7, "forward", "x + x"}});
  std::vector<uint8_t> payload(100, 7);
  m.Delegate("XnnpackBackend", Bytes::Copy(payload.data(), payload.size()),
             {{"dtype", Bytes::Copy("fp32", 4)}, {"flags", Bytes::Copy("\x01\x00\xff", 3)}});
  m.Inputs({int(x)});
  m.Outputs({int(y)});
  m.PlannedBufferSizes({0, 32});
  BackendConfig config;
  config.emit_stacktrace = true;
  std::string dir = testing::TempDir("inspect_more");
  WritePackage(b.Build(), config, dir + "/st.pte");
  auto r = RunCli({"inspect", dir + "/st.pte", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json d = json::parse(r.out);
  const json& st = Method(d, "forward")["stacktrace_sample"];
  EXPECT_EQ(st["instruction"], 0);
  ASSERT_EQ(st["frames"].size(), 1u);
  EXPECT_EQ(st["frames"][0]["filename"], "model.py");
  EXPECT_EQ(st["frames"][0]["lineno"], 7);
  EXPECT_EQ(st["frames"][0]["context"], "x + x");
  const json& specs = Method(d, "forward")["delegates"][0]["compile_spec_values"];
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0], json({{"key", "dtype"}, {"size", 4}, {"text", "fp32"}}));
  EXPECT_EQ(specs[1], json({{"key", "flags"}, {"size", 3}, {"hex", "0100ff"}}));
  auto text = RunCli({"inspect", dir + "/st.pte"});
  EXPECT_NE(text.out.find("    compile specs: dtype=\"fp32\" flags=0x0100ff\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("    model.py:7 in forward: x + x\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("planned buffers: #0 32 B\n"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace ptepack
