// ptepack::Describe (ptepack/program_info.h) on ExecuTorch's own files.
//
// Where the expected numbers come from (F = the fixtures directory): flatc, the
// FlatBuffers compiler, decoding each program with ExecuTorch's schema,
//   flatc --json --strict-json --raw-binary --defaults-json serialize/format/schema/program.fbs -- F/add.pte
// (execution_plan[0].values[i].val: scalar_type, sizes, dim_order, data_buffer_idx,
// allocation_info.memory_offset_low, extra_tensor_info), and the .ptd's identifier at bytes
// 4..8 (`od -c -N 8 F/linear.ptd`: "FT01"). The locations follow the runtime's rule
// (runtime/executor/tensor_parser_exec_aten.cpp, getTensorDataPtr).
//
// Every fixture is also described twice, by Describe and by InspectJson (serialize/read/describe.cpp,
// its own walk of the program): the fields both give must agree.
#include "ptepack/program_info.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serialize/format/pte_format.h"
#include "test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;

const TensorInfo& TensorAt(const MethodInfo& m, size_t i) {
  EXPECT_LT(i, m.values.size());
  EXPECT_TRUE(m.values.at(i).tensor.has_value()) << "value " << i;
  return *m.values.at(i).tensor;
}

TEST(ProgramInfo, AddPlansItsThreeTensorsInOneBuffer) {
  const ProgramInfo info = Describe(FixturePath("add.pte"));
  EXPECT_EQ(info.format, "pte");
  EXPECT_EQ(info.file_identifier, "ET12");
  EXPECT_TRUE(info.valid);
  ASSERT_EQ(info.methods.size(), 1u);
  const MethodInfo& m = info.methods[0];
  EXPECT_EQ(m.name, "forward");
  EXPECT_EQ(m.inputs, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.outputs, (std::vector<int32_t>{2}));
  EXPECT_EQ(m.operators, (std::vector<std::string>{"aten::add.out"}));
  ASSERT_EQ(m.values.size(), 4u);
  EXPECT_EQ(m.values[3].kind, ValueKind::kInt);
  const uint64_t offsets[] = {0, 16, 32};  // allocation_info.memory_offset_low
  for (size_t i = 0; i < 3; ++i) {
    const TensorInfo& t = TensorAt(m, i);
    EXPECT_EQ(t.dtype, ScalarType::kFloat);
    EXPECT_EQ(t.shape, (std::vector<int32_t>{1}));
    EXPECT_EQ(t.nbytes, 4u);
    EXPECT_EQ(t.location, TensorLocation::kPlanned);
    ASSERT_TRUE(t.planned);
    EXPECT_EQ(t.planned->memory_id, 1u);
    EXPECT_EQ(t.planned->offset, offsets[i]);
  }
  // non_const_buffer_sizes [0, 48]: one buffer (id 1) of 48 bytes holding values 0, 1, 2.
  ASSERT_EQ(m.memory_plan.size(), 1u);
  EXPECT_EQ(m.memory_plan[0].memory_id, 1u);
  EXPECT_EQ(m.memory_plan[0].size, 48u);
  EXPECT_EQ(m.memory_plan[0].tensors, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(ProgramInfo, LinearKeepsItsWeightsInTheDataFile) {
  VerifyOptions o;
  o.ptd = {FixturePath("linear.ptd")};
  o.allow_legacy_ptd = true;
  const ProgramInfo info = Describe(FixturePath("linear.pte"), o);
  ASSERT_EQ(info.methods.size(), 1u);
  const MethodInfo& m = info.methods[0];
  ASSERT_EQ(m.values.size(), 10u);
  const TensorInfo& w = TensorAt(m, 0);  // sizes [3, 3], EXTERNAL "linear.weight", no allocation_info
  EXPECT_EQ(w.location, TensorLocation::kExternal);
  EXPECT_EQ(w.key, "linear.weight");
  EXPECT_EQ(w.shape, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(w.dim_order, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(w.nbytes, 36u);
  const TensorInfo& b = TensorAt(m, 1);  // sizes [3], EXTERNAL "linear.bias", data_buffer_idx 1
  EXPECT_EQ(b.location, TensorLocation::kExternal);
  EXPECT_EQ(b.key, "linear.bias");
  EXPECT_EQ(b.data_buffer, 1u);
  EXPECT_EQ(TensorAt(m, 2).planned->offset, 96u);
  EXPECT_EQ(TensorAt(m, 7).planned->offset, 0u);
  EXPECT_EQ(m.memory_plan.at(0).size, 144u);
  EXPECT_EQ(m.memory_plan.at(0).tensors, (std::vector<uint32_t>{2, 3, 7}));
  EXPECT_EQ(m.operators, (std::vector<std::string>{"aten::permute_copy.out", "aten::addmm.out"}));

  VerifyOptions legacy;
  legacy.allow_legacy_ptd = true;
  const ProgramInfo ptd = Describe(FixturePath("linear.ptd"), legacy);
  EXPECT_EQ(ptd.format, "ptd");
  EXPECT_EQ(ptd.file_identifier, "FT01");
  EXPECT_TRUE(ptd.methods.empty());
  ASSERT_EQ(ptd.named_data.size(), 2u);
  EXPECT_EQ(ptd.named_data[0].key, "linear.weight");
  EXPECT_EQ(ptd.named_data[0].dtype, ScalarType::kFloat);
  EXPECT_EQ(ptd.named_data[0].shape, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(ptd.named_data[0].size, 36u);
}

TEST(ProgramInfo, XorTrainsWeightsPlannedWithAnExternalInitialState) {
  const ProgramInfo info = Describe(FixturePath("xor.pte"));
  ASSERT_EQ(info.methods.size(), 4u);
  const MethodInfo& m = info.methods[0];
  EXPECT_EQ(m.name, "forward");
  ASSERT_EQ(m.values.size(), 155u);
  const TensorInfo& w = TensorAt(m, 0);  // [10, 2], memory_offset_low 320, EXTERNAL "net.linear.weight"
  EXPECT_EQ(w.location, TensorLocation::kPlanned);
  EXPECT_TRUE(w.external_initial_state);
  EXPECT_EQ(w.key, "net.linear.weight");
  EXPECT_EQ(w.planned->offset, 320u);
  const TensorInfo& c = TensorAt(m, 4);  // LONG [], data_buffer_idx 1, no allocation_info
  EXPECT_EQ(c.dtype, ScalarType::kLong);
  EXPECT_TRUE(c.shape.empty());
  EXPECT_EQ(c.location, TensorLocation::kConstant);
  EXPECT_EQ(c.data_buffer, 1u);
  EXPECT_EQ(m.memory_plan.at(0).size, 624u);
  EXPECT_EQ(info.methods[1].name, "__et_training_gradients_index_forward");
  EXPECT_TRUE(info.methods[1].memory_plan.empty());  // non_const_buffer_sizes [0]
}

TEST(ProgramInfo, ABundledProgramIsRefusedWithALocatedError) {
  const std::string path = FixturePath("bundled_program.bpte");
  try {
    Describe(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "bpte-not-described");
    EXPECT_EQ(e.finding().file, path);
  }
}

std::string StoredLocation(const TensorInfo& t, bool constant_segment) {
  if (!t.key.empty() && (t.location == TensorLocation::kExternal || t.external_initial_state)) return "external";
  if (t.location == TensorLocation::kPlanned) return "mutable data";
  return constant_segment ? "constant segment" : "constant_buffer";
}

void ExpectPteAgrees(const ProgramInfo& info, const json& d) {
  EXPECT_EQ(info.file_identifier, d["header"]["file_identifier"].get<std::string>());
  EXPECT_EQ(info.size, d["size"].get<uint64_t>());
  EXPECT_EQ(info.valid, d["valid"].get<bool>());
  ASSERT_EQ(info.segments.size(), d["segments"].size());
  for (size_t i = 0; i < info.segments.size(); ++i) {
    EXPECT_EQ(info.segments[i].offset, d["segments"][i]["offset"].get<uint64_t>());
    EXPECT_EQ(info.segments[i].file_offset, d["segments"][i]["file_offset"].get<uint64_t>());
    EXPECT_EQ(info.segments[i].size, d["segments"][i]["size"].get<uint64_t>());
  }
  ASSERT_EQ(info.named_data.size(), d["named_data"].size());
  for (size_t i = 0; i < info.named_data.size(); ++i) {
    EXPECT_EQ(info.named_data[i].key, d["named_data"][i]["key"].get<std::string>());
    EXPECT_EQ(info.named_data[i].segment, d["named_data"][i]["segment"].get<uint32_t>());
  }
  const bool constant_segment = d["constants"].value("storage", "") == "segment";
  ASSERT_EQ(info.methods.size(), d["methods"].size());
  for (size_t mi = 0; mi < info.methods.size(); ++mi) {
    const MethodInfo& m = info.methods[mi];
    const json& j = d["methods"][mi];
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.name, j["name"].get<std::string>());
    EXPECT_EQ(m.values.size(), j["num_values"].get<size_t>());
    EXPECT_EQ(m.num_instructions, j["num_instructions"].get<size_t>());
    EXPECT_EQ(m.operators, j["operators"].get<std::vector<std::string>>());
    ASSERT_EQ(m.inputs.size(), j["inputs"].size());
    for (size_t i = 0; i < m.inputs.size(); ++i) EXPECT_EQ(m.inputs[i], j["inputs"][i]["index"].get<int32_t>());
    ASSERT_EQ(m.outputs.size(), j["outputs"].size());
    for (size_t i = 0; i < m.outputs.size(); ++i) EXPECT_EQ(m.outputs[i], j["outputs"][i]["index"].get<int32_t>());
    const auto ncbs = j["non_const_buffer_sizes"].get<std::vector<uint64_t>>();
    ASSERT_EQ(m.memory_plan.size(), ncbs.empty() ? 0 : ncbs.size() - 1);
    for (size_t b = 0; b < m.memory_plan.size(); ++b) EXPECT_EQ(m.memory_plan[b].size, ncbs[b + 1]);
    ASSERT_EQ(m.delegates.size(), j["delegates"].size());
    for (size_t i = 0; i < m.delegates.size(); ++i) {
      const json& dl = j["delegates"][i];
      EXPECT_EQ(m.delegates[i].backend_id, dl["backend_id"].get<std::string>());
      EXPECT_EQ(m.delegates[i].in_segment, dl["location"] == "segment");
      EXPECT_EQ(m.delegates[i].index, dl["index"].get<uint32_t>());
      EXPECT_EQ(m.delegates[i].size, dl.value("size", uint64_t{0}));
      EXPECT_EQ(m.delegates[i].compile_specs, dl["compile_specs"].get<size_t>());
    }
    // InspectJson lists the tensors with stored data: external, constant, or mutable with an initial state.
    size_t stored = 0;
    for (const ValueInfo& v : m.values) {
      if (!v.tensor || (v.tensor->data_buffer == 0 &&
                        !(v.tensor->location == TensorLocation::kExternal || v.tensor->external_initial_state))) {
        continue;
      }
      ASSERT_LT(stored, j["stored_tensors"].size());
      const json& s = j["stored_tensors"][stored++];
      const TensorInfo& t = *v.tensor;
      EXPECT_EQ(v.index, s["value"].get<uint32_t>());
      EXPECT_EQ(t.key, s["name"].get<std::string>());
      EXPECT_EQ(ScalarTypeName(static_cast<int>(t.dtype)), s["dtype"].get<std::string>());
      EXPECT_EQ(t.shape, s["sizes"].get<std::vector<int32_t>>());
      EXPECT_EQ(t.nbytes ? json(*t.nbytes) : json(nullptr), s["bytes"]);
      EXPECT_EQ(StoredLocation(t, constant_segment), s["location"].get<std::string>());
      EXPECT_EQ(t.data_buffer, s["buffer"].get<uint32_t>());
    }
    EXPECT_EQ(stored, j["stored_tensors"].size());
  }
}

void ExpectPtdAgrees(const ProgramInfo& info, const json& d) {
  EXPECT_EQ(info.size, d["size"].get<uint64_t>());
  EXPECT_EQ(info.valid, d["valid"].get<bool>());
  EXPECT_EQ(info.segment_base_offset, d["header"]["segment_base_offset"].get<uint64_t>());
  ASSERT_EQ(info.segments.size(), d["segments"].size());
  ASSERT_EQ(info.named_data.size(), d["entries"].size());
  for (size_t i = 0; i < info.named_data.size(); ++i) {
    const json& e = d["entries"][i];
    EXPECT_EQ(info.named_data[i].key, e["key"].get<std::string>());
    EXPECT_EQ(info.named_data[i].segment, e["segment"].get<uint32_t>());
    EXPECT_EQ(info.named_data[i].offset, e["offset"].get<uint64_t>());
    EXPECT_EQ(info.named_data[i].size, e["size"].get<uint64_t>());
    if (info.named_data[i].dtype) {
      EXPECT_EQ(ScalarTypeName(static_cast<int>(*info.named_data[i].dtype)), e["dtype"].get<std::string>());
      EXPECT_EQ(info.named_data[i].shape, e["sizes"].get<std::vector<int32_t>>());
    }
  }
}

TEST(ProgramInfo, AgreesWithInspectJsonOnEveryFixture) {
  size_t files = 0;
  for (const std::string& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    const std::string path = FixturePath(name);
    ExpectPteAgrees(Describe(path), json::parse(InspectJson(path)));
    ++files;
  }
  for (const std::string name : {"linear.ptd", "xor.ptd"}) {
    SCOPED_TRACE(name);
    VerifyOptions o;
    o.allow_legacy_ptd = true;
    const std::string path = FixturePath(name);
    ExpectPtdAgrees(Describe(path, o), json::parse(InspectJson(path, o)));
    ++files;
  }
  EXPECT_GE(files, 12u);  // the 10 .pte and 2 .ptd files of ExecuTorch's fixtures
}

}  // namespace
}  // namespace ptepack
