// The typed views scripts/gen_views.py generates from the binary schemas,
// checked against the schemas' own reflection data, against the field slots
// flatc's generated C++ uses, and against flatc's accessors on real files.
#include <gtest/gtest.h>

#include <set>

#include "flat_tensor_legacy_views_generated.h"
#include "flat_tensor_views_generated.h"
#include "program_generated.h"
#include "program_views_generated.h"
#include "ptepack/error.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

template <size_t N>
void CheckAgainstSchema(const fb::Schema& schema, const fb::ViewInfo (&views)[N]) {
  std::set<std::string> tables;
  for (const fb::ViewInfo& v : views) {
    SCOPED_TRACE(v.qualified_name);
    tables.insert(v.qualified_name);
    const reflection::Object* obj = schema.FindObject(v.qualified_name);
    ASSERT_NE(obj, nullptr);
    EXPECT_EQ(obj, &schema.ObjectAt(v.object_index));
    size_t live_fields = 0;
    for (const auto* f : *obj->fields()) live_fields += f->deprecated() ? 0 : 1;
    EXPECT_EQ(v.num_fields, live_fields);
    EXPECT_EQ(v.slots, schema.FieldsById(*obj).size()) << "a new table's field count";
    for (size_t i = 0; i < v.num_fields; ++i) {
      EXPECT_EQ(v.fields[i].id, schema.FieldOf(*obj, v.fields[i].name).id()) << v.fields[i].name;
    }
  }
  size_t schema_tables = 0;
  for (const auto* o : *schema.raw().objects()) schema_tables += o->is_struct() ? 0 : 1;
  EXPECT_EQ(tables.size(), schema_tables);
}

TEST(ViewsTest, FieldIdsMatchTheSchemas) {
  CheckAgainstSchema(fb::ProgramSchema(), prog::kAllViews);
  CheckAgainstSchema(fb::FlatTensorSchema(), ptd::kAllViews);
  CheckAgainstSchema(fb::FlatTensorLegacySchema(), ptd_legacy::kAllViews);
}

// flatc's generated code addresses field id i at vtable slot 4 + 2 i.
constexpr int Slot(uint16_t id) { return 4 + 2 * id; }

TEST(ViewsTest, FieldIdsMatchFlatcVtableSlots) {
  namespace et = executorch_flatbuffer;
  EXPECT_EQ(Slot(prog::Tensor<>::Id::sizes), et::Tensor::VT_SIZES);
  EXPECT_EQ(Slot(prog::Tensor<>::Id::data_buffer_idx), et::Tensor::VT_DATA_BUFFER_IDX);
  EXPECT_EQ(Slot(prog::Tensor<>::Id::extra_tensor_info), et::Tensor::VT_EXTRA_TENSOR_INFO);
  EXPECT_EQ(Slot(prog::EValue<>::Id::val_type), et::EValue::VT_VAL_TYPE);
  EXPECT_EQ(Slot(prog::EValue<>::Id::val), et::EValue::VT_VAL);
  EXPECT_EQ(Slot(prog::Program<>::Id::named_data), et::Program::VT_NAMED_DATA);
  EXPECT_EQ(Slot(prog::ExtraTensorInfo<>::Id::location), et::ExtraTensorInfo::VT_LOCATION);
  EXPECT_EQ(Slot(prog::Instruction<>::Id::instr_args), et::Instruction::VT_INSTR_ARGS);
}

TEST(ViewsTest, ViewRefusesATableOfAnotherType) {
  auto buffer = prog::Buffer<>::New();
  EXPECT_THROW(prog::Tensor{*buffer}, Error);
  const fb::Table& cbuffer = *buffer;
  EXPECT_THROW(prog::Tensor{cbuffer}, Error);
  EXPECT_NO_THROW(prog::Buffer{cbuffer});
  // Same short name, other schema.
  auto ptd_named = ptd::NamedData<>::New();
  EXPECT_THROW(prog::NamedData{*ptd_named}, Error);
  EXPECT_THROW(ptd_legacy::NamedData{*ptd_named}, Error);
  fb::Table typeless;
  EXPECT_THROW(prog::Tensor{typeless}, Error);
}

TEST(ViewsTest, TypedSettersWriteTheSchemaTypesAndFields) {
  auto t = prog::Tensor<>::New();
  prog::Tensor tensor{*t};
  tensor.set_data_buffer_idx(7);
  tensor.set_storage_offset(-2);
  tensor.set_scalar_type(executorch_flatbuffer::ScalarType::FLOAT);
  tensor.set_sizes({2, 3});
  const fb::Schema& s = fb::ProgramSchema();
  const fb::Value& idx = fb::Field(s, *t, "data_buffer_idx");
  EXPECT_EQ(idx.kind, fb::Value::Kind::kScalar);
  EXPECT_EQ(idx.type, reflection::UInt);
  EXPECT_EQ(idx.bits(), 7u);
  EXPECT_EQ(fb::AsInt(fb::Field(s, *t, "storage_offset")), -2);
  EXPECT_EQ(fb::Field(s, *t, "scalar_type").type, reflection::Byte);
  EXPECT_EQ(fb::Field(s, *t, "scalar_type").bits(), 6u);  // ScalarType.FLOAT in scalar_type.fbs
  EXPECT_EQ(fb::Field(s, *t, "sizes").scalars().size, 8u);
  EXPECT_EQ(tensor.get_storage_offset(), -2);
  EXPECT_EQ(tensor.get_sizes(), (std::vector<int32_t>{2, 3}));
  // Absent fields read as the schema's defaults (ExtraTensorInfo.device_type = CPU).
  auto eti = prog::ExtraTensorInfo<>::New();
  EXPECT_EQ(prog::ExtraTensorInfo{*eti}.get_device_type(), executorch_flatbuffer::DeviceType::CPU);
  EXPECT_FALSE(prog::ExtraTensorInfo{*eti}.location().present());
}

// Typed reads of a decoded real file agree with flatc's accessors on the same bytes.
TEST(ViewsTest, TypedReadsAgreeWithFlatcOnRealFiles) {
  namespace et = executorch_flatbuffer;
  size_t tensors = 0;
  for (const std::string& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    auto pte = PteFile::Open(testing::FixturePath(name));
    if (!pte->program()) continue;
    Bytes fbytes = pte->flatbuffer();
    auto root = fb::Decode(fb::ProgramSchema(), fbytes.data, fbytes.size, fbytes.owner);
    const fb::Table& croot = *root;
    prog::Program program{croot};
    const et::Program* p = pte->program();
    ASSERT_EQ(program.execution_plan().elems().size(), p->execution_plan() ? p->execution_plan()->size() : 0u);
    for (size_t pi = 0; pi < program.execution_plan().elems().size(); ++pi) {
      prog::ExecutionPlan plan{*program.execution_plan().elems()[pi].table()};
      const et::ExecutionPlan* fplan = p->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(pi));
      EXPECT_EQ(plan.get_name(), fplan->name()->str());
      for (size_t vi = 0; fplan->values() && vi < fplan->values()->size(); ++vi) {
        const et::EValue* fv = fplan->values()->Get(static_cast<flatbuffers::uoffset_t>(vi));
        prog::EValue value{*plan.values().elems().at(vi).table()};
        ASSERT_EQ(value.get_val_type(), fv->val_type());
        if (fv->val_type() != et::KernelTypes::Tensor) continue;
        ++tensors;
        const et::Tensor* ft = fv->val_as_Tensor();
        prog::Tensor tensor{*value.val().table()};
        EXPECT_EQ(tensor.get_scalar_type(), ft->scalar_type());
        EXPECT_EQ(tensor.get_data_buffer_idx(), ft->data_buffer_idx());
        EXPECT_EQ(tensor.get_shape_dynamism(), ft->shape_dynamism());
        std::vector<int32_t> sizes(ft->sizes()->begin(), ft->sizes()->end());
        EXPECT_EQ(tensor.get_sizes(), sizes);
        EXPECT_EQ(tensor.allocation_info().present(), ft->allocation_info() != nullptr);
        if (ft->extra_tensor_info()) {
          prog::ExtraTensorInfo eti{*tensor.extra_tensor_info().table()};
          EXPECT_EQ(eti.get_location(), ft->extra_tensor_info()->location());
        }
      }
    }
  }
  EXPECT_GT(tensors, 10u);
}

}  // namespace
}  // namespace ptepack
