// Where a tree's tables and field values live (serialize/format/fbtree.h):
// MakeTable puts a table's fields in the table's own allocation, and a list
// that grows past that room moves to the heap. These check that values
// survive every move between the two, that tables outlive what made them,
// and (under ASan, with leak checking) that nothing is freed twice or kept.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/format/fbtree.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {
namespace {

const reflection::Object& Obj(const char* name) { return *fb::ProgramSchema().FindObject(name); }

TEST(FbTreeMemory, MakeTableHoldsTheSchemaFieldCountAbsent) {
  // executorch_flatbuffer.Tensor has 10 fields in program.fbs (scalar_type ...
  // extra_tensor_info); EValue 2 (val_type, val).
  auto t = fb::MakeTable(&Obj("executorch_flatbuffer.Tensor"), 10);
  ASSERT_EQ(t->fields.size(), 10u);
  for (const fb::Value& v : t->fields) EXPECT_FALSE(v.present());
  EXPECT_EQ(fb::NewTable(fb::ProgramSchema(), "executorch_flatbuffer.EValue")->fields.size(), 2u);
  EXPECT_EQ(fb::NewTable(fb::ProgramSchema(), "executorch_flatbuffer.Tensor")->fields.size(), 10u);
}

TEST(FbTreeMemory, ValuesSurviveGrowingPastTheTablesRoom) {
  auto t = fb::MakeTable(&Obj("executorch_flatbuffer.Int"), 1);
  t->fields[0] = fb::ScalarValue(reflection::Long, 41);
  // A string and a child table: payloads with owners, moved to the heap block.
  t->fields.push_back(fb::StringValue(std::string(100, 'x')));
  auto child = fb::MakeTable(&Obj("executorch_flatbuffer.Int"), 1);
  child->fields[0] = fb::ScalarValue(reflection::Long, 7);
  t->fields.push_back(fb::TableValue(child));
  t->fields.resize(40);
  ASSERT_EQ(t->fields.size(), 40u);
  EXPECT_EQ(t->fields[0].bits(), 41u);
  EXPECT_EQ(t->fields[1].str(), std::string(100, 'x'));
  EXPECT_EQ(t->fields[2].table(), child);
  EXPECT_EQ(child.use_count(), 2);
  EXPECT_FALSE(t->fields[39].present());
  t->fields.resize(2);
  EXPECT_EQ(child.use_count(), 1);  // the shrink destroyed the value that held it
  EXPECT_EQ(t->fields[1].str(), std::string(100, 'x'));
}

TEST(FbTreeMemory, CopiesAndAssignmentsKeepEveryValue) {
  auto a = fb::MakeTable(&Obj("executorch_flatbuffer.EValue"), 2);
  auto inner = fb::MakeTable(&Obj("executorch_flatbuffer.Int"), 1);
  inner->fields[0] = fb::ScalarValue(reflection::Long, 5);
  a->fields[0] = fb::ScalarValue(reflection::UByte, 1);
  a->fields[1] = fb::TableValue(inner);

  fb::Table copy = *a;  // a stack table: its fields on the heap
  EXPECT_EQ(copy.def, a->def);
  EXPECT_EQ(copy.fields[0].bits(), 1u);
  EXPECT_EQ(copy.fields[1].table(), inner);  // shared, not copied

  auto shallow = fb::ShallowClone(*a);
  EXPECT_EQ(shallow->fields[1].table(), inner);
  EXPECT_EQ(inner.use_count(), 4);
  auto deep = fb::Clone(*a);
  EXPECT_NE(deep->fields[1].table(), inner);
  EXPECT_EQ(deep->fields[1].table()->fields[0].bits(), 5u);

  // Assigning into a table's room, from a list on the heap.
  auto b = fb::MakeTable(&Obj("executorch_flatbuffer.EValue"), 2);
  *b = copy;
  EXPECT_EQ(b->fields[1].table(), inner);
  // Assigning the fields of a table that only the target holds.
  auto holder = fb::MakeTable(&Obj("executorch_flatbuffer.EValue"), 2);
  holder->fields[1] = fb::TableValue(fb::Clone(*a));
  const fb::Table* held = holder->fields[1].table().get();
  holder->fields = held->fields;  // `held` dies in this assignment
  EXPECT_EQ(holder->fields[0].bits(), 1u);
  EXPECT_EQ(holder->fields[1].table()->fields[0].bits(), 5u);
}

TEST(FbTreeMemory, ArenaTablesAndBytesOutliveTheArena) {
  std::shared_ptr<fb::Table> kept;
  fb::Value word;
  {
    fb::TableArena arena;
    kept = arena.NewTable(&Obj("executorch_flatbuffer.Int"), 1);
    kept->fields[0] = fb::ScalarValue(reflection::Long, 9);
    uint8_t* p = arena.AllocBytes(5);
    std::memcpy(p, "hello", 5);
    word.kind = fb::Value::Kind::kString;
    word.set_view(p, 5, arena.owner());
    // Enough tables for several blocks (the first is 16 KiB), dropped at once.
    for (int i = 0; i < 2000; ++i) arena.NewTable(&Obj("executorch_flatbuffer.Tensor"), 10);
    // A table of the arena whose fields outgrow its room (to the heap).
    auto grown = arena.NewTable(&Obj("executorch_flatbuffer.Int"), 1);
    grown->fields.resize(20);
    grown->fields[19] = fb::StringValue("x");
    kept->fields.push_back(fb::TableValue(grown));
  }
  EXPECT_EQ(kept->fields[0].bits(), 9u);
  EXPECT_EQ(word.str_view(), "hello");
  EXPECT_EQ(kept->fields[1].table()->fields[19].str(), "x");
  // The last table of the arena freed on another thread, then the last view.
  std::thread([t = std::move(kept)]() mutable { t.reset(); }).join();
  EXPECT_FALSE(kept);
  word = fb::Value();
}

TEST(FbTreeMemory, TablesOutliveTheBuilderAndItsPackage) {
  std::shared_ptr<fb::Table> program;
  std::vector<uint8_t> bytes;
  {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    int32_t x = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 0}});
    int32_t y = m.Tensor({ScalarType::kFloat, {2, 3}, PlannedLocation{1, 32}});
    m.KernelCall(m.Operator("aten::relu", "out"), {x, y});
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes({0, 64});
    Package pkg = b.Build();
    program = PartsOf(pkg).program;
    bytes = RenderPte(LayoutPte(PartsOf(pkg), BackendConfig{}));
  }
  // Builder and package gone: the tree is whole, and encodes as before.
  ASSERT_TRUE(program);
  const auto& plans = fb::Field(fb::ProgramSchema(), *program, "execution_plan").elems();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(fb::Field(fb::ProgramSchema(), *plans[0].table(), "values").elems().size(), 2u);
  auto f = PteFile::FromBytes(Bytes::Copy(bytes.data(), bytes.size()), "built.pte");
  EXPECT_EQ(f->program()->execution_plan()->Get(0)->values()->size(), 2u);
  EXPECT_EQ(f->program()->execution_plan()->Get(0)->values()->Get(1)->val_as_Tensor()->sizes()->Get(1), 3);
}

}  // namespace
}  // namespace ptepack
