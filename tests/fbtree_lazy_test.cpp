// Trees decoded on demand (fb::DecodeOnDemand), read without keeping (Peek),
// changed without decoding (EditTable), and vectors made as they are encoded
// (GeneratedVector): each must give the bytes the whole tree gives, on the
// real ExecuTorch files, and keep only what it says it keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptepack/error.h"
#include "serialize/format/fbtree.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

using prog::EValue;
using prog::ExecutionPlan;
using prog::Program;
using prog::Tensor;

fb::Encoded EncodeTree(const fb::Table& root) { return fb::Encode(fb::ProgramSchema(), root, fb::EncodeOptions{}); }

struct Loaded {
  std::unique_ptr<PteFile> pte;
  Bytes fb;
};

Loaded Load(const std::string& name) {
  Loaded l;
  l.pte = PteFile::Open(testing::FixturePath(name));
  l.fb = l.pte->flatbuffer();
  return l;
}

std::shared_ptr<fb::Table> Lazy(const Loaded& l) {
  return fb::DecodeOnDemand(fb::ProgramSchema(), l.fb.data, l.fb.size, l.fb.owner);
}

// The same program decoded whole: what every lazy tree is compared with.
std::shared_ptr<fb::Table> Whole(const Loaded& l) {
  return fb::Decode(fb::ProgramSchema(), l.fb.data, l.fb.size, l.fb.owner);
}

// The first plan's values (the plan decoded and kept, its values still lazy).
const std::vector<fb::Value>& ValuesOf(fb::Table& root) {
  const auto& plans = Program{root}.execution_plan().elems();
  return ExecutionPlan{*plans.at(0).table()}.values().elems();
}

size_t FirstTensor(const std::vector<fb::Value>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    auto ev = fb::Peek(values[i]);
    if (ev && fb::Peek(EValue{*ev}.val()) && fb::Peek(EValue{*ev}.val())->def == &Tensor<>::Def()) return i;
  }
  ADD_FAILURE() << "no tensor value";
  return 0;
}

// The decoder reads a schema's fields from Schema::DecodeOf and a union's
// member from UnionMemberIndex, both filled once when the schema loads; here
// they are checked against FlatBuffers' reflection API asked directly
// (LookupByKey on the enum's values, the fields' own entries), for every
// object, field, union and tag of the four schemas the library carries.
TEST(FbTreeLazy, SchemaDecodeTablesAreTheReflectionTables) {
  for (const fb::Schema* s :
       {&fb::ProgramSchema(), &fb::FlatTensorSchema(), &fb::FlatTensorLegacySchema(), &fb::BundledProgramSchema()}) {
    const auto* objects = s->raw().objects();
    EXPECT_EQ(&s->ObjectAt(s->RootIndex()), s->raw().root_table());
    for (uint32_t i = 0; i < objects->size(); ++i) {
      const reflection::Object* obj = objects->Get(i);
      SCOPED_TRACE(obj->name()->str());
      const fb::Schema::ObjectDecode& d = s->DecodeOf(static_cast<int>(i));
      EXPECT_EQ(d.object, obj);
      size_t live = 0, max_id = 0;
      for (const reflection::Field* f : *obj->fields()) {
        max_id = std::max<size_t>(max_id, f->id());
        if (f->deprecated()) continue;
        ++live;
        auto it = std::find_if(d.fields.begin(), d.fields.end(), [&](const auto& x) { return x.field == f; });
        ASSERT_NE(it, d.fields.end()) << f->name()->str();
        EXPECT_EQ(it->id, f->id());
        EXPECT_EQ(it->offset, f->offset());
        EXPECT_EQ(it->type, f->type()->base_type());
        EXPECT_EQ(it->element, f->type()->element());
        EXPECT_EQ(it->index, f->type()->index());
        if (f->type()->base_type() == reflection::Union) {
          const reflection::Field* tag = nullptr;
          for (const reflection::Field* g : *obj->fields()) {
            if (g->id() + 1 == f->id()) tag = g;
          }
          ASSERT_NE(tag, nullptr);
          EXPECT_EQ(it->tag_offset, tag->offset());
        }
      }
      EXPECT_EQ(d.fields.size(), live);
      EXPECT_EQ(d.field_count, obj->fields()->size() ? max_id + 1 : 0);
      for (size_t k = 1; k < d.fields.size(); ++k) EXPECT_LT(d.fields[k - 1].id, d.fields[k].id);
    }
    for (uint32_t e = 0; e < s->raw().enums()->size(); ++e) {
      const reflection::Enum* en = s->raw().enums()->Get(e);
      if (!en->is_union()) continue;
      for (int tag = 0; tag < 256; ++tag) {
        const reflection::EnumVal* ev = en->values()->LookupByKey(tag);
        const int want = tag != 0 && ev && ev->union_type() ? ev->union_type()->index() : -1;
        EXPECT_EQ(s->UnionMemberIndex(static_cast<int>(e), static_cast<uint8_t>(tag)), want)
            << en->name()->str() << " tag " << tag;
      }
    }
  }
}

TEST(FbTreeLazy, EncodesTheBytesOfTheWholeTreeAndKeepsNothing) {
  for (const std::string& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    const Loaded l = Load(name);
    if (!l.pte->program()) continue;
    auto whole = Whole(l);
    auto lazy = Lazy(l);
    const fb::Value& plans = Program{*lazy}.execution_plan();
    ASSERT_FALSE(plans.elems().empty());
    EXPECT_TRUE(plans.elems()[0].lazy());
    EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);
    const fb::TreeSize a = fb::MeasureTree(*lazy), b = fb::MeasureTree(*whole);
    EXPECT_EQ(a.payload, b.payload);
    EXPECT_EQ(a.estimate, b.estimate);
    // Encoding and measuring read each table through Peek: none was kept.
    EXPECT_TRUE(plans.elems()[0].lazy());
    // table() decodes and keeps: the same tree, read by the typed views.
    EXPECT_EQ(ExecutionPlan{*plans.elems()[0].table()}.get_name(),
              ExecutionPlan{*Program{*whole}.execution_plan().elems()[0].table()}.get_name());
    EXPECT_FALSE(plans.elems()[0].lazy());
    EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);
  }
}

// lazy_def() names, undecoded, the object every lazy value decodes to: the
// EValues and each one's val (a Tensor, an Int, a List, ... as its union tag
// says), on every fixture, against the whole tree's tables.
TEST(FbTreeLazy, LazyDefIsTheDecodedTablesObject) {
  for (const std::string& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    const Loaded l = Load(name);
    if (!l.pte->program()) continue;
    auto whole = Whole(l);
    auto lazy = Lazy(l);
    const std::vector<fb::Value>& values = ValuesOf(*lazy);
    const std::vector<fb::Value>& wvalues = ValuesOf(*whole);
    ASSERT_EQ(values.size(), wvalues.size());
    if (values.empty()) continue;
    size_t vals = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_TRUE(values[i].lazy());
      EXPECT_EQ(values[i].lazy_def(), wvalues[i].table()->def);
      const fb::PeekedTable ev = fb::Peek(values[i]);
      const fb::Value& val = EValue{*ev}.val();
      const fb::Value& wval = EValue{*wvalues[i].table()}.val();
      if (!wval.table()) continue;
      ASSERT_TRUE(val.lazy());
      EXPECT_EQ(val.lazy_def(), wval.table()->def) << "value " << i;
      ++vals;
    }
    EXPECT_EQ(wvalues[0].lazy_def(), nullptr);  // decoded: no lazy def
    EXPECT_GT(vals, 0u);
  }
}

// A TableEdits that adds `add` to a tensor value's data_buffer_idx, once a
// decode, for the EValue tables it was given the place of.
class AddToIndex final : public fb::TableEdits {
 public:
  void Give(const uint8_t* at, uint32_t add) { adds_.emplace_back(at, add); }
  void Apply(const uint8_t* at, fb::Table& ev) const override {
    for (const auto& [where, add] : adds_) {
      if (where != at) continue;
      Tensor t{fb::Own(EValue{ev}.val().mutable_table())};
      t.set_data_buffer_idx(t.get_data_buffer_idx() + add);
    }
  }

 private:
  std::vector<std::pair<const uint8_t*, uint32_t>> adds_;
};

// EditTableWith: the changes of many values in one TableEdits, asked at every
// later decode, after the changes a value had (EditTable's, in order) and
// before later ones; once a decode however often a value is given to it;
// copies made before keep their table; the encoded bytes are the whole tree's
// with the same changes made directly.
TEST(FbTreeLazy, EditTableWithKeepsAWalksChangesInOnePlace) {
  const Loaded l = Load("add.pte");
  auto lazy = Lazy(l);
  auto whole = Whole(l);
  fb::Table& plan = fb::Own(Program{*lazy}.execution_plan().mutable_elems().at(0).mutable_table());
  auto& values = ExecutionPlan{plan}.values().mutable_elems();
  const size_t i = FirstTensor(values);
  auto idx_of = [](const fb::Value& v) { return Tensor{*fb::Peek(EValue{*fb::Peek(v)}.val())}.get_data_buffer_idx(); };
  const uint32_t was = idx_of(values[i]);
  const fb::Value before = values[i];

  auto set_idx = [](uint32_t idx) {
    return [idx](fb::Table& ev) { Tensor{fb::Own(EValue{ev}.val().mutable_table())}.set_data_buffer_idx(idx); };
  };
  fb::EditTable(values[i], set_idx(40));  // first: 40
  auto edits = std::make_shared<AddToIndex>();
  const uint8_t* at = fb::EditTableWith(values[i], edits);
  edits->Give(at, 2);                                  // then + 2
  EXPECT_EQ(fb::EditTableWith(values[i], edits), at);  // again: still once a decode
  EXPECT_TRUE(values[i].lazy());
  EXPECT_EQ(idx_of(values[i]), 42u);
  fb::EditTable(values[i], [](fb::Table& ev) {  // last: * 10
    Tensor t{fb::Own(EValue{ev}.val().mutable_table())};
    t.set_data_buffer_idx(t.get_data_buffer_idx() * 10);
  });
  EXPECT_EQ(idx_of(values[i]), 420u);
  EXPECT_EQ(idx_of(before), was);

  // The same result made directly on the whole tree encodes to the same bytes.
  fb::Table& wplan = fb::Own(Program{*whole}.execution_plan().mutable_elems().at(0).mutable_table());
  auto& wvalues = ExecutionPlan{wplan}.values().mutable_elems();
  fb::EditTable(wvalues[i], set_idx(420));
  EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);

  // A decoded value is changed directly, not through TableEdits.
  fb::Value decoded = values[i];
  ASSERT_TRUE(decoded.table());
  EXPECT_THROW(fb::EditTableWith(decoded, edits), Error);
}

TEST(FbTreeLazy, EditTableChangesEveryLaterDecodeButNotCopiesMadeBefore) {
  const Loaded l = Load("add.pte");
  auto lazy = Lazy(l);
  auto whole = Whole(l);
  fb::Table& plan = fb::Own(Program{*lazy}.execution_plan().mutable_elems().at(0).mutable_table());
  auto& values = ExecutionPlan{plan}.values().mutable_elems();
  const size_t i = FirstTensor(values);
  ASSERT_TRUE(values[i].lazy());
  const fb::Value before = values[i];  // a copy, made before the changes

  auto set_idx = [](uint32_t idx) {
    return [idx](fb::Table& ev) { Tensor{fb::Own(EValue{ev}.val().mutable_table())}.set_data_buffer_idx(idx); };
  };
  fb::EditTable(values[i], set_idx(7));
  fb::EditTable(values[i], set_idx(9));  // in order: the last one stands
  EXPECT_TRUE(values[i].lazy());
  auto idx_of = [](const fb::Value& v) { return Tensor{*fb::Peek(EValue{*fb::Peek(v)}.val())}.get_data_buffer_idx(); };
  EXPECT_EQ(idx_of(values[i]), 9u);
  EXPECT_EQ(idx_of(before), Tensor{*EValue{*ValuesOf(*whole)[i].table()}.val().table()}.get_data_buffer_idx());
  EXPECT_TRUE(values[i].lazy());

  // The same change made to the whole tree gives the same bytes; kept by
  // table(), it still does.
  fb::Table& wplan = fb::Own(Program{*whole}.execution_plan().mutable_elems().at(0).mutable_table());
  auto& wvalues = ExecutionPlan{wplan}.values().mutable_elems();
  fb::EditTable(wvalues[i], set_idx(9));  // not lazy: changed now
  EXPECT_EQ(Tensor{*EValue{*wvalues[i].table()}.val().table()}.get_data_buffer_idx(), 9u);
  EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);
  ASSERT_TRUE(values[i].table());
  EXPECT_FALSE(values[i].lazy());
  EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);
  EXPECT_EQ(idx_of(before), Tensor{*EValue{*ValuesOf(*Lazy(l))[i].table()}.val().table()}.get_data_buffer_idx());
}

// MeasureTree reads a lazy table no change reaches from its flatbuffer; it
// must count what it counts of the decoded tree (the whole tree is the
// reference), on every fixture, and with a change that makes a tensor's
// sizes longer (that table is decoded to be measured).
TEST(FbTreeLazy, MeasureOfALazyTreeIsTheWholeTreesWithAndWithoutChanges) {
  auto same = [](const fb::TreeSize& a, const fb::TreeSize& b) {
    return a.payload == b.payload && a.estimate == b.estimate;
  };
  for (const auto& name : testing::PteFixtures()) {
    SCOPED_TRACE(name);
    const Loaded l = Load(name);
    auto lazy = Lazy(l);
    const fb::TreeSize w = fb::MeasureTree(*Whole(l)), z = fb::MeasureTree(*lazy);
    EXPECT_TRUE(same(w, z)) << w.payload << "/" << w.estimate << " vs " << z.payload << "/" << z.estimate;
    EXPECT_GT(w.estimate, l.fb.size / 2);
    EXPECT_TRUE(Program{*lazy}.execution_plan().elems().at(0).lazy()) << "measuring kept what it read";
  }
  const Loaded l = Load("add.pte");
  auto lazy = Lazy(l);
  auto whole = Whole(l);
  const fb::TreeSize before = fb::MeasureTree(*lazy);
  auto longer = [](fb::Table& ev) {
    Tensor{fb::Own(EValue{ev}.val().mutable_table())}.sizes() =
        fb::ScalarVectorOf<int32_t>(reflection::Int, {1, 2, 3, 4, 5, 6, 7, 8});
  };
  for (auto* root : {lazy.get(), whole.get()}) {
    fb::Table& plan = fb::Own(Program{*root}.execution_plan().mutable_elems().at(0).mutable_table());
    auto& values = ExecutionPlan{plan}.values().mutable_elems();
    fb::EditTable(values[FirstTensor(values)], longer);
  }
  const fb::TreeSize w = fb::MeasureTree(*whole), z = fb::MeasureTree(*lazy);
  EXPECT_TRUE(same(w, z)) << w.payload << "/" << w.estimate << " vs " << z.payload << "/" << z.estimate;
  EXPECT_GT(z.payload, before.payload);
}

TEST(FbTreeLazy, ForEachTensorCowKeepsOnlyWhatItChanges) {
  const Loaded l = Load("linear.pte");
  auto lazy = Lazy(l);
  auto whole = Whole(l);
  auto renumber = [](fb::Table& program) {
    size_t tensors = 0;
    prog::ForEachTensorCow(program,
                           [&](const fb::Table&, uint32_t, const fb::Table& t, const prog::EditTensorFn& edit) {
                             ++tensors;
                             if (prog::IsPlanned(t)) return;
                             const uint32_t to = static_cast<uint32_t>(Tensor{t}.get_data_buffer_idx()) + 100;
                             edit([to](fb::Table& owned) { Tensor{owned}.set_data_buffer_idx(to); });
                           });
    return tensors;
  };
  EXPECT_GT(renumber(*lazy), 0u);
  renumber(*whole);
  for (const fb::Value& v : ValuesOf(*lazy)) EXPECT_TRUE(v.lazy());
  EXPECT_EQ(EncodeTree(*lazy).data, EncodeTree(*whole).data);
}

TEST(FbTreeLazy, GeneratedVectorEncodesAsTheMadeOneAndKeepsOnlyWhenAsked) {
  const fb::Schema& s = fb::ProgramSchema();
  // Int tables in Program.execution_plan: the encoder writes each element
  // by its own table's schema object.
  auto make = [&s](size_t i) {
    auto t = fb::NewTable(s, "executorch_flatbuffer.Int");
    fb::Field(s, *t, "int_val") = fb::ScalarValue(reflection::Long, 1000 + i);
    return fb::TableValue(t);
  };
  auto program_with = [&s](fb::Value list) {
    auto root = fb::NewTable(s, "executorch_flatbuffer.Program");
    fb::Field(s, *root, "execution_plan") = std::move(list);
    return root;
  };
  std::vector<fb::Value> made;
  for (size_t i = 0; i < 5; ++i) made.push_back(make(i));
  size_t calls = 0;
  auto root = program_with(fb::GeneratedVector(5, reflection::Obj, [&](size_t i) {
    ++calls;
    return make(i);
  }));
  const fb::Value& list = Program{*root}.execution_plan();
  EXPECT_EQ(fb::ElementCount(list), 5u);
  const fb::Encoded from_gen = EncodeTree(*root);
  EXPECT_EQ(calls, 5u);  // one at a time, as the encoder reached them
  EXPECT_TRUE(list.generated());
  EXPECT_EQ(from_gen.data, EncodeTree(*program_with(fb::OffsetVector(made, reflection::Obj))).data);
  const fb::TreeSize m = fb::MeasureTree(*root);
  EXPECT_EQ(m.payload, fb::MeasureTree(*program_with(fb::OffsetVector(made, reflection::Obj))).payload);
  EXPECT_EQ(calls, 10u);
  EXPECT_TRUE(list.generated());
  // elems() makes them once and keeps them.
  EXPECT_EQ(list.elems().size(), 5u);
  EXPECT_FALSE(list.generated());
  EXPECT_EQ(calls, 15u);
  EXPECT_EQ(EncodeTree(*root).data, from_gen.data);
  EXPECT_EQ(calls, 15u);
}

}  // namespace
}  // namespace ptepack
