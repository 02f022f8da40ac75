// fb::MeasureTree (serialize/format/fbtree.h): one walk gives the bytes the
// format limits count (strings and scalar vectors with their length fields)
// and the encoder's first buffer size. The numbers are derived by hand from
// program.fbs and the FlatBuffers layout; the size hint must never change
// the encoded bytes, only how the buffer grows.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "serialize/format/fbtree.h"

namespace ptepack {
namespace {

const fb::Schema& S() { return fb::ProgramSchema(); }

// Tensor { scalar_type: FLOAT (6), sizes: [1, 64], dim_order: [0, 1] }.
std::shared_ptr<fb::Table> SmallTensor() {
  auto t = fb::NewTable(S(), "executorch_flatbuffer.Tensor");
  fb::Field(S(), *t, "scalar_type") = fb::ScalarValue(reflection::Byte, 6);
  fb::Field(S(), *t, "sizes") = fb::ScalarVectorOf<int32_t>(reflection::Int, {1, 64});
  fb::Field(S(), *t, "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, {0, 1});
  return t;
}

TEST(FbTreeMeasure, PayloadAndEstimateOfATensorByHand) {
  const fb::TreeSize s = fb::MeasureTree(*SmallTensor());
  // Payload: sizes 4 (length) + 2 x 4 bytes, dim_order 4 + 2 x 1 byte.
  EXPECT_EQ(s.payload, (4u + 8u) + (4u + 2u));
  // Estimate: the table's 8 (vtable offset, room to align), scalar_type's 1
  // byte, and per vector its 4-byte offset, 8 (length, alignment) and its
  // bytes padded to 4: 8 + 1 + (4 + 8 + 8) + (4 + 8 + 4).
  EXPECT_EQ(s.estimate, 8u + 1u + 20u + 16u);
}

TEST(FbTreeMeasure, NestedTablesAndOffsetVectorsAddUp) {
  auto ev = fb::NewTable(S(), "executorch_flatbuffer.EValue");
  fb::Field(S(), *ev, "val_type") = fb::ScalarValue(reflection::UType, 5);  // KernelTypes::Tensor
  fb::Field(S(), *ev, "val") = fb::TableValue(SmallTensor());
  auto plan = fb::NewTable(S(), "executorch_flatbuffer.ExecutionPlan");
  fb::Field(S(), *plan, "name") = fb::StringValue("forward");
  std::vector<fb::Value> values;
  values.push_back(fb::TableValue(ev));
  values.push_back(fb::TableValue(ev));
  fb::Field(S(), *plan, "values") = fb::OffsetVector(std::move(values), reflection::Obj);
  const fb::TreeSize s = fb::MeasureTree(*plan);
  // Payload: "forward" 4 + 7 + 1 (its NUL), the values vector 4 + 2 x 4
  // offsets, and twice the tensor's 18.
  EXPECT_EQ(s.payload, 12u + 12u + 2u * 18u);
  // Estimate: the plan's 8; the string's 4-byte offset and 4 + 7 + 1 padded
  // to 4 (12); the vector's 4 + 8 and per element 4 and an EValue: its 8,
  // val_type's 1, val's 4 and the tensor's 45.
  EXPECT_EQ(s.estimate, 8u + (4u + 12u) + (4u + 8u) + 2u * (4u + 8u + 1u + 4u + 45u));
}

TEST(FbTreeMeasure, TheSizeHintNeverChangesTheBytes) {
  auto ev = fb::NewTable(S(), "executorch_flatbuffer.EValue");
  fb::Field(S(), *ev, "val_type") = fb::ScalarValue(reflection::UType, 5);
  fb::Field(S(), *ev, "val") = fb::TableValue(SmallTensor());
  auto plan = fb::NewTable(S(), "executorch_flatbuffer.ExecutionPlan");
  fb::Field(S(), *plan, "name") = fb::StringValue("forward");
  std::vector<fb::Value> values;
  for (int i = 0; i < 300; ++i) values.push_back(fb::TableValue(ev));  // past the first 4 KiB
  fb::Field(S(), *plan, "values") = fb::OffsetVector(std::move(values), reflection::Obj);
  auto program = fb::NewTable(S(), "executorch_flatbuffer.Program");
  fb::Field(S(), *program, "version") = fb::ScalarValue(reflection::UInt, 0);
  fb::Field(S(), *program, "execution_plan") = fb::OffsetVector({fb::TableValue(plan)}, reflection::Obj);
  const uint64_t estimate = fb::MeasureTree(*program).estimate;
  for (fb::Order order :
       {fb::Order::kFlatc, fb::Order::kFlatcLegacy, fb::Order::kPythonObjectApi, fb::Order::kPythonObjectApi2026}) {
    fb::EncodeOptions o;
    o.order = order;
    const std::vector<uint8_t> grown = fb::Encode(S(), *program, o).data;
    ASSERT_GT(grown.size(), 4096u);
    for (size_t hint : {size_t{1}, size_t{4096}, static_cast<size_t>(estimate), size_t{1} << 20}) {
      o.size_hint = hint;
      EXPECT_EQ(fb::Encode(S(), *program, o).data, grown) << "order " << static_cast<int>(order) << ", hint " << hint;
    }
  }
}

}  // namespace
}  // namespace ptepack
