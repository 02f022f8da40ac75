// The description `inspect` renders (serialize/read/file_description.h) and
// OperatorName (serialize/format/pte_format.h).
//
// Where the expected numbers come from (F = the fixtures directory): flatc decoding
// each program with ExecuTorch's schema,
//   flatc --json --strict-json --raw-binary --defaults-json serialize/format/schema/program.fbs -- FILE
// and the eh00 header read with `od -A d -t x1 -N 48 F/stories260k_qnn.pte` (length 0x20,
// program_size 0x4900, segment_base_offset 0x4900, segment_data_size 0x145100).
// testdata/inspect/mutable_buffer_named{,_empty}.pte: xor.pte's program packed with
// emit_mutable_buffer_names and its planned weight (value 0) made non-external; flatc
// shows extra_tensor_info.fully_qualified_name "net.linear.weight", resp. "" (present, empty).
#include "serialize/read/file_description.h"

#include <gtest/gtest.h>

#include "program_generated.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;

std::string Testdata(const std::string& name) { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/" + name; }

const MethodDescription& MethodNamed(const FileDescription& d, const std::string& name) {
  for (const auto& m : d.methods) {
    if (m.info.name == name) return m;
  }
  ADD_FAILURE() << "no method " << name;
  return d.methods.at(0);
}

TEST(FileDescription, OperatorNameIsNameDotOverloadOrTheNameAlone) {
  namespace efb = executorch_flatbuffer;
  flatbuffers::FlatBufferBuilder b;
  auto with = efb::CreateOperatorDirect(b, "aten::add", "out");
  auto empty = efb::CreateOperatorDirect(b, "aten::relu", "");
  auto none = efb::CreateOperatorDirect(b, "aten::mm", nullptr);
  auto nameless = efb::CreateOperatorDirect(b, nullptr, "Scalar_out");
  b.Finish(b.CreateVector(std::vector<flatbuffers::Offset<efb::Operator>>{with, empty, none, nameless}));
  const auto* ops = flatbuffers::GetRoot<flatbuffers::Vector<flatbuffers::Offset<efb::Operator>>>(b.GetBufferPointer());
  EXPECT_EQ(OperatorName(*ops->Get(0)), "aten::add.out");
  EXPECT_EQ(OperatorName(*ops->Get(1)), "aten::relu");  // an empty overload is no overload
  EXPECT_EQ(OperatorName(*ops->Get(2)), "aten::mm");
  EXPECT_EQ(OperatorName(*ops->Get(3)), ".Scalar_out");
  EXPECT_EQ(OperatorName(*ops->Get(3), "?"), "?.Scalar_out");
}

TEST(FileDescription, QnnDelegatesMetadataMethodsAndHeaderAsFlatcReadsThem) {
  auto pte = PteFile::Open(FixturePath("stories260k_qnn.pte"));
  const FileDescription d = DescribeFile(*pte, {});
  ASSERT_TRUE(d.has_program);
  EXPECT_EQ(d.file_identifier, "ET12");
  ASSERT_TRUE(d.extended_header.has_value());
  EXPECT_EQ(d.extended_header->length, 32u);
  EXPECT_EQ(d.extended_header->program_size, 18688u);
  EXPECT_EQ(d.extended_header->segment_base_offset, 18688u);
  EXPECT_EQ(d.extended_header->segment_data_size, 1331456u);
  ASSERT_EQ(d.segments.size(), 2u);
  EXPECT_EQ(d.segments[1].size, 1331456u);
  for (const char* name : {"kv_forward", "prefill_forward"}) {
    const MethodDescription& m = MethodNamed(d, name);
    EXPECT_EQ(m.num_chains, 1u);
    ASSERT_EQ(m.delegates.size(), 1u) << name;
    const DelegateDescription& dl = m.delegates[0];
    EXPECT_EQ(dl.info.backend_id, "QnnBackend");
    EXPECT_TRUE(dl.has_processed);
    EXPECT_TRUE(dl.info.in_segment);
    EXPECT_EQ(dl.info.index, 1u);
    EXPECT_EQ(dl.size, 1331456u);
    EXPECT_EQ(dl.file_offset, 18688u);  // segment_base_offset + the segment's offset 0
    ASSERT_EQ(dl.compile_specs.size(), 1u);
    EXPECT_EQ(dl.compile_specs[0].key, "qnn_compile_spec");
    EXPECT_EQ(dl.compile_specs[0].value.size(), 200u);
    EXPECT_FALSE(m.returns.has_value());  // it has inputs and an instruction
  }
  const MethodDescription& seq = MethodNamed(d, "get_max_seq_len");
  ASSERT_TRUE(seq.returns.has_value());
  ASSERT_EQ(seq.returns->size(), 1u);
  EXPECT_EQ((*seq.returns)[0].kind, ValueKind::kInt);
  EXPECT_EQ((*seq.returns)[0].int_val, 128);
  const MethodDescription& q = MethodNamed(d, "get_kv_output_0_quant_attr");
  ASSERT_TRUE(q.returns.has_value());
  ASSERT_EQ(q.returns->size(), 5u);
  EXPECT_EQ((*q.returns)[0].kind, ValueKind::kDouble);
  EXPECT_NEAR((*q.returns)[0].double_val, 0.012077862397, 1e-12);  // flatc prints 12 digits
  EXPECT_EQ((*q.returns)[3].int_val, 255);
  EXPECT_EQ((*q.returns)[4].kind, ValueKind::kString);
  EXPECT_EQ((*q.returns)[4].string_val, "torch.uint8");
  EXPECT_TRUE(MethodNamed(d, "get_use_kv_cache").returns->at(0).bool_val);
  // The public description is a copy of this one's public part.
  const ProgramInfo info = PublicView(d);
  ASSERT_EQ(info.methods.size(), d.methods.size());
  EXPECT_EQ(info.methods[0].delegates.at(0).size, 1331456u);
  EXPECT_EQ(info.segment_base_offset, 18688u);
}

TEST(FileDescription, AMutableBufferNameThatIsEmptyIsKeptAndNoNameIsNotAName) {
  auto named = PteFile::Open(Testdata("inspect/mutable_buffer_named.pte"));
  auto empty = PteFile::Open(Testdata("inspect/mutable_buffer_named_empty.pte"));
  const FileDescription a = DescribeFile(*named, {}), b = DescribeFile(*empty, {});
  // Value 0 is the one planned tensor with a stored name and no EXTERNAL location; the
  // other planned tensors have no extra_tensor_info, the external ones are not buffers.
  EXPECT_EQ(MethodNamed(a, "forward").mutable_buffer_names, (std::vector<std::string>{"net.linear.weight"}));
  EXPECT_EQ(MethodNamed(b, "forward").mutable_buffer_names, (std::vector<std::string>{""}));
  // The typed key cannot tell "" from none; the description can.
  EXPECT_EQ(MethodNamed(b, "forward").info.values.at(0).tensor->key, "");
  EXPECT_TRUE(MethodNamed(b, "__et_training_fqn_forward").mutable_buffer_names.empty());
}

// linear.ptd's first entry: as tests/program_info_test.cpp gives it (and `od -c -N 8`: "FT01").
TEST(FileDescription, APtdHeadAndItsEntries) {
  auto ptd = PtdFile::Open(FixturePath("linear.ptd"));
  const PtdDescription d = DescribePtdFile(*ptd);
  EXPECT_EQ(d.file_identifier, "FT01");
  ASSERT_EQ(d.entries.size(), PtdEntryCount(*ptd));
  EXPECT_EQ(d.entries[0].key, "linear.weight");
  EXPECT_TRUE(d.entries[0].has_layout);
  EXPECT_EQ(d.entries[0].sizes, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(d.entries[0].size, 36u);
  EXPECT_TRUE(DescribePtdHead(*ptd).entries.empty());
}

}  // namespace
}  // namespace ptepack
