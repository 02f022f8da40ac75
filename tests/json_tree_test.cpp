// fb::TreeFromJson (serialize/format/json_tree.h) against FlatBuffers' own
// parser: wherever the direct reader gives a tree, the parser must accept the
// same text and its binary, verified and decoded, must be the very same tree
// (kinds, types, presence, bits, bytes). Texts: ptepack's JSON of every real
// fixture, the pack spec in testdata, hand-written edge cases, and thousands of
// random edits of them.
#include "serialize/format/json_tree.h"

#include <flatbuffers/idl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "program_generated.h"
#include "serialize/format/program_json.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::PteFixtures;

// What FlatBuffers' parser makes of `text`: its binary, verified and decoded;
// nullptr where it refuses the text or the verifier the binary.
std::shared_ptr<fb::Table> ParserTree(const std::string& text) {
  auto parser = ProgramJsonParser();
  if (!parser->Parse(text.c_str())) return nullptr;
  std::vector<uint8_t> fbb(parser->builder_.GetBufferPointer(),
                           parser->builder_.GetBufferPointer() + parser->builder_.GetSize());
  flatbuffers::Verifier v(fbb.data(), fbb.size());
  if (!executorch_flatbuffer::VerifyProgramBuffer(v)) return nullptr;
  Bytes owned = Bytes::Own(std::move(fbb));
  return fb::Decode(fb::ProgramSchema(), owned.data, owned.size, owned.owner);
}

// The first difference between two trees, as a path; empty when equal.
std::string Diff(const fb::Table& a, const fb::Table& b, const std::string& path);
std::string Diff(const fb::Value& a, const fb::Value& b, const std::string& path) {
  using K = fb::Value::Kind;
  if (a.kind != b.kind) {
    return path + ": kind " + std::to_string(int(a.kind)) + " vs " + std::to_string(int(b.kind));
  }
  if (reflection::BaseType(a.type) != reflection::BaseType(b.type)) {
    return path + ": type " + std::to_string(int(reflection::BaseType(a.type))) + " vs " +
           std::to_string(int(reflection::BaseType(b.type)));
  }
  switch (a.kind) {
    case K::kAbsent:
      return "";
    case K::kScalar:
      return a.bits() == b.bits() ? ""
                                  : path + ": bits " + std::to_string(a.bits()) + " vs " + std::to_string(b.bits());
    case K::kString:
      return a.str_view() == b.str_view() ? "" : path + ": \"" + a.str() + "\" vs \"" + b.str() + "\"";
    case K::kScalarVector:
      if (a.scalars_size() != b.scalars_size()) return path + ": vector sizes differ";
      return a.scalars_size() == 0 || std::memcmp(a.scalars_data(), b.scalars_data(), a.scalars_size()) == 0
                 ? ""
                 : path + ": vector bytes differ";
    case K::kTable: {
      // Read through Peek: a tree decoded on demand keeps nothing of the comparison.
      const fb::PeekedTable ta = fb::Peek(a), tb = fb::Peek(b);
      if (!ta || !tb) return ta.get() == tb.get() ? "" : path + ": null table";
      return Diff(*ta, *tb, path);
    }
    case K::kOffsetVector:
      if (a.elems().size() != b.elems().size()) return path + ": element counts differ";
      for (size_t i = 0; i < a.elems().size(); ++i) {
        auto d = Diff(a.elems()[i], b.elems()[i], path + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return "";
  }
  return path + ": unknown kind";
}
std::string Diff(const fb::Table& a, const fb::Table& b, const std::string& path) {
  if (a.def != b.def) return path + ": different objects";
  if (a.fields.size() != b.fields.size()) return path + ": field counts differ";
  const auto& by_id = fb::ProgramSchema().FieldsById(*a.def);
  for (size_t i = 0; i < a.fields.size(); ++i) {
    std::string name = by_id[i] ? by_id[i]->name()->str() : "#" + std::to_string(i);
    auto d = Diff(a.fields[i], b.fields[i], path + "." + name);
    if (!d.empty()) return d;
  }
  return "";
}

// ptepack's JSON for a fixture's program (what `extract` writes into spec.json).
std::string FixtureJson(const std::string& name) {
  auto pte = PteFile::Open(FixturePath(name));
  Bytes fbb = pte->flatbuffer();
  auto tree = fb::Decode(fb::ProgramSchema(), fbb.data, fbb.size, fbb.owner);
  return ProgramToJson(*tree);
}

// Checks the one rule on `text`; returns whether the direct reader took it.
bool ExpectSameTree(const std::string& text, const std::string& what) {
  auto direct = fb::TreeFromJson(fb::ProgramSchema(), text);
  if (!direct) return false;
  auto parsed = ParserTree(text);
  EXPECT_NE(parsed, nullptr) << what << ": the direct reader took a text FlatBuffers' parser refuses:\n"
                             << text.substr(0, 2000);
  if (parsed) {
    EXPECT_EQ(Diff(*direct, *parsed, "program"), "") << what;
  }
  return true;
}

TEST(JsonTree, EveryFixtureReadsDirectlyToTheParsersTree) {
  for (const auto& name : PteFixtures()) {
    SCOPED_TRACE(name);
    std::string text = FixtureJson(name);
    ASSERT_NE(ParserTree(text), nullptr);
    EXPECT_TRUE(ExpectSameTree(text, name)) << name << ": the direct reader left ptepack's own JSON to the parser";
  }
}

// TreeFromJsonPrefix: the table at the start of text that goes on, read as
// TreeFromJson reads it, and where its closing brace ends.
TEST(JsonTree, PrefixReadsTheSameTreeAndEndsAfterItsBrace) {
  for (const auto& name : PteFixtures()) {
    SCOPED_TRACE(name);
    const std::string program = FixtureJson(name);
    const size_t close = program.find_last_of('}') + 1;  // the root's closing brace
    const std::string text = program + ", \"constants\": [{\"hex\": \"00\"}]}";
    size_t end = 0;
    auto tree = fb::TreeFromJsonPrefix(fb::ProgramSchema(), text, &end);
    ASSERT_NE(tree, nullptr);
    EXPECT_EQ(end, close);
    auto parsed = ParserTree(program);
    ASSERT_NE(parsed, nullptr);
    EXPECT_EQ(Diff(*tree, *parsed, "program"), "");
  }
  // What TreeFromJson leaves to the parser, the prefix reader leaves too.
  size_t end = 0;
  EXPECT_EQ(fb::TreeFromJsonPrefix(fb::ProgramSchema(), R"({"version": 0, "no_such_field": 1}, "x": 1})", &end),
            nullptr);
  EXPECT_EQ(fb::TreeFromJsonPrefix(fb::ProgramSchema(), R"({"version": 0)", &end), nullptr);
}

// The reader builds a flatbuffer, not a tree: FlatBuffers' own verifier of
// program.fbs (the generated code ExecuTorch's runtime runs) takes it, and the
// prefix form is decoded on demand: a spec's program is held as those bytes
// until the layout reads it.
TEST(JsonTree, ReadsIntoAVerifiedFlatbufferDecodedOnDemand) {
  const fb::Schema& s = fb::ProgramSchema();
  const uint16_t plans = s.FieldOf(s.Root(), "execution_plan").id();
  for (const auto& name : PteFixtures()) {
    SCOPED_TRACE(name);
    const std::string program = FixtureJson(name);
    auto fbb = fb::FlatbufferFromJson(s, program);
    ASSERT_TRUE(fbb.has_value());
    flatbuffers::Verifier v(fbb->data, fbb->size);
    EXPECT_TRUE(executorch_flatbuffer::VerifyProgramBuffer(v));
    size_t end = 0;
    auto tree = fb::TreeFromJsonPrefix(s, program + ", \"x\": 1}", &end);
    ASSERT_NE(tree, nullptr);
    const fb::Value& plan = tree->fields[plans];
    ASSERT_FALSE(plan.elems().empty());
    EXPECT_TRUE(plan.elems()[0].lazy()) << "the execution plan was decoded before anything read it";
    auto parsed = ParserTree(program);
    ASSERT_NE(parsed, nullptr);
    EXPECT_EQ(Diff(*tree, *parsed, "program"), "");
    EXPECT_TRUE(plan.elems()[0].lazy()) << "comparing the trees kept what it read";
  }
  EXPECT_FALSE(fb::FlatbufferFromJson(s, R"({"version": 0, "no_such_field": 1})").has_value());
}

TEST(JsonTree, PackSpecReadsDirectly) {
  std::ifstream in(std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack/add_spec.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string program = nlohmann::json::parse(ss.str())["program"].dump(2);
  EXPECT_TRUE(ExpectSameTree(program, "add_spec.json"));
}

// A small program exercising every kind of field: enums by name and number, a
// union, scalar vectors of several widths, bools, doubles, strings with escapes.
const char* kSmall = R"({
  "version": 0,
  "execution_plan": [{
    "name": "forward\t\"x\"\\y\/z",
    "values": [
      {"val_type": "Tensor", "val": {"scalar_type": "FLOAT", "sizes": [2, -3], "dim_order": [0, 1],
                                     "storage_offset": 0, "requires_grad": true, "data_buffer_idx": 1,
                                     "allocation_info": {"memory_id": 1, "memory_offset_low": 4294967295}}},
      {"val_type": 2, "val": {"int_val": -9223372036854775808}},
      {"val_type": "Double", "val": {"double_val": 2.5e-3}},
      {"val_type": "Bool", "val": {"bool_val": false}},
      {"val_type": "NONE"},
      {"val_type": "DoubleList", "val": {"items": [1, -0.0, 1e300, 3.14159]}},
      {"val_type": "BoolList", "val": {"items": [true, false, true]}},
      {"val_type": "String", "val": {"string_val": ""}}
    ],
    "inputs": [], "outputs": [0],
    "operators": [{"name": "aten::add", "overload": "out"}],
    "non_const_buffer_sizes": [0, 9223372036854775807]
  }],
  "constant_buffer": [{}, {"storage": [1, 2, 255]}],
  "mutable_data_segments": [{"segment_index": 1, "offsets": [0, 18446744073709551615]}]
})";

TEST(JsonTree, EveryKindOfField) {
  ASSERT_NE(ParserTree(kSmall), nullptr) << "the test's own program must be valid";
  EXPECT_TRUE(ExpectSameTree(kSmall, "small"));
}

// Texts the direct reader leaves to the parser (each a one-place edit of
// kSmall); the parser takes some of them and refuses others.
TEST(JsonTree, LeavesTheUnusualToTheParser) {
  const std::string base = kSmall;
  auto edit = [&](const std::string& from, const std::string& to) {
    auto at = base.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string t = base;
    return t.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"forward", "forw\\u0061rd"},                              // \u escape
      {"forward", "f\xc3\xa9"},                                  // UTF-8
      {"\"version\": 0", "\"version\": 0, \"version\": 0"},      // a field twice
      {"\"version\": 0", "\"verzion\": 0"},                      // unknown field
      {"\"storage_offset\": 0", "\"storage_offset\": -0"},       // -0
      {"2.5e-3", "1e-310"},                                      // subnormal
      {"2.5e-3", "1e400"},                                       // overflows
      {"\"memory_id\": 1", "\"memory_id\": 4294967296"},         // out of range
      {"\"memory_id\": 1", "\"memory_id\": 1.0"},                // a float for an integer
      {"\"scalar_type\": \"FLOAT\"", "\"scalar_type\": 99"},     // not a value of the enum
      {"\"scalar_type\": \"FLOAT\"", "\"scalar_type\": \"X\""},  // no such name
      {"\"requires_grad\": true", "\"requires_grad\": 1"},       // a number for a bool
      {"\"val_type\": \"Tensor\"", "\"val_type\": \"Int\""},     // the union's value is not that table
      {"\"version\": 0", "\"version\": 00"},                     // leading zero
      {"\"version\": 0", "\"version\": null"},                   // null
      {"\"version\": 0", "version: 0"},                          // unquoted key
  };
  for (const auto& [from, to] : cases) {
    std::string text = edit(from, to);
    EXPECT_EQ(fb::TreeFromJson(fb::ProgramSchema(), text), nullptr) << from << " -> " << to;
  }
  EXPECT_EQ(fb::TreeFromJson(fb::ProgramSchema(), base + " x"), nullptr) << "trailing text";
  EXPECT_EQ(fb::TreeFromJson(fb::ProgramSchema(), base.substr(0, base.size() - 2)), nullptr) << "cut short";
}

// The reader tries first the key that followed the same key last time in a
// table of that type: keys in a different order in every table (and an
// unknown key where a known one was expected) must still give the parser's
// tree, or be left to it.
TEST(JsonTree, KeysInAnyOrderGiveTheParsersTree) {
  std::mt19937_64 rng(28);
  std::function<void(nlohmann::ordered_json&)> shuffle = [&](nlohmann::ordered_json& j) {
    if (j.is_array()) {
      for (auto& e : j) shuffle(e);
    } else if (j.is_object()) {
      std::vector<std::pair<std::string, nlohmann::ordered_json>> items;
      for (auto& [k, v] : j.items()) items.emplace_back(k, v);
      std::shuffle(items.begin(), items.end(), rng);
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (auto& [k, v] : items) {
        shuffle(v);
        out[k] = v;
      }
      j = out;
    }
  };
  size_t texts = 0;
  for (const auto& name : PteFixtures()) {
    const std::string base = FixtureJson(name);
    if (base.size() >= 200000) continue;
    for (int i = 0; i < 3; ++i) {
      auto j = nlohmann::ordered_json::parse(base);
      shuffle(j);
      const std::string text = j.dump();
      EXPECT_TRUE(ExpectSameTree(text, name + " shuffled " + std::to_string(i))) << "keys in another order";
      ++texts;
    }
  }
  EXPECT_GT(texts, 10u);
  // A key of another table where the last order predicts a known one.
  const std::string small = kSmall;
  const size_t at = small.rfind("\"storage_offset\"");
  ASSERT_NE(at, std::string::npos);
  std::string unknown = small;
  unknown.replace(at, std::strlen("\"storage_offset\""), "\"memory_id\"");
  EXPECT_EQ(fb::TreeFromJson(fb::ProgramSchema(), unknown), nullptr);
}

// Integers are read as their digits are scanned up to 18 digits; past that,
// and with a sign, a leading zero, a fraction or an exponent, the long way.
// Each edge, in a long (int_val), a uint32 (memory_offset_low), a uint64
// (mutable offsets) and a byte (dim_order), gives the parser's tree or is left
// to the parser, as it must; the plain ones are read directly.
TEST(JsonTree, IntegersAtEveryLengthGiveTheParsersTree) {
  const std::string base = kSmall;
  const std::vector<std::pair<std::string, std::string>> fields = {{"-9223372036854775808", "int_val"},
                                                                   {"4294967295", "memory_offset_low"},
                                                                   {"18446744073709551615", "mutable offsets"},
                                                                   {"\"dim_order\": [0, 1]", "dim_order"}};
  const std::vector<std::string> plain = {"0", "7", "255", "999999999999999999", "123456789012345678"};
  const std::vector<std::string> other = {"1234567890123456789",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "18446744073709551615",
                                          "18446744073709551616",
                                          "00",
                                          "07",
                                          "0.5",
                                          "5e2",
                                          "5E2",
                                          "1.0",
                                          "-7",
                                          "-0",
                                          "256",
                                          "4294967296"};
  size_t direct = 0;
  for (const auto& [from, what] : fields) {
    for (const auto* tokens : {&plain, &other}) {
      for (const std::string& tok : *tokens) {
        std::string t = base;
        const size_t at = t.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        t.replace(at, from.size(), what == "dim_order" ? "\"dim_order\": [0, " + tok + "]" : tok);
        if (ExpectSameTree(t, what + " = " + tok)) ++direct;
      }
    }
  }
  EXPECT_GE(direct, fields.size() * 3) << "plain integers are read directly";
}

// Strings are scanned four bytes a step while four remain: an escape, a
// quote, a control character or a byte past 0x7e at every place of names of
// 0 to 12 bytes gives the parser's tree or is left to it, and names with short
// escapes (and '~', the last plain byte) are read directly.
TEST(JsonTree, StringsWithAStopAtEveryPlaceGiveTheParsersTree) {
  const std::string base = kSmall;
  const std::string from = "\"aten::add\"";
  const size_t at = base.find(from);
  ASSERT_NE(at, std::string::npos);
  const std::vector<std::string> direct_stops = {"\\\"", "\\\\", "\\n", "~"};
  const std::vector<std::string> other_stops = {"\x7f", "\xc3\xa9", "\t"};
  size_t direct = 0, places = 0;
  for (size_t len = 0; len <= 12; ++len) {
    for (size_t k = 0; k <= len; ++k) {
      ++places;
      for (const auto* stops : {&direct_stops, &other_stops}) {
        for (const std::string& stop : *stops) {
          std::string name(len, 'a');
          name.insert(k, stop);
          std::string t = base;
          t.replace(at, from.size(), "\"" + name + "\"");
          if (ExpectSameTree(t, "name " + name)) ++direct;
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  EXPECT_GE(direct, places * direct_stops.size());
}

// Random one-place edits: the direct reader may leave any text to the
// parser, but a tree it gives must be the parser's.
TEST(JsonTree, RandomEditsNeverGiveAnotherTree) {
  // Each text also as nlohmann::json prints it (keys sorted: union values
  // before their types), the way `pack` reads a spec it has parsed whole.
  std::vector<std::string> bases;
  auto add = [&](const std::string& t) {
    bases.push_back(t);
    bases.push_back(nlohmann::json::parse(t).dump());
  };
  add(kSmall);
  for (const auto& name : PteFixtures()) {
    std::string t = FixtureJson(name);
    if (t.size() < 200000) add(t);
  }
  const std::vector<std::string> tokens = {"0",
                                           "1",
                                           "-1",
                                           "-0",
                                           "255",
                                           "256",
                                           "-129",
                                           "65536",
                                           "2147483648",
                                           "4294967296",
                                           "9223372036854775808",
                                           "18446744073709551616",
                                           "1.5",
                                           "1e-310",
                                           "1e39",
                                           "true",
                                           "false",
                                           "null",
                                           "\"Tensor\"",
                                           "\"NONE\"",
                                           "\"Int\"",
                                           "\"FLOAT\"",
                                           "[]",
                                           "{}",
                                           "\"\"",
                                           ",",
                                           ":",
                                           "\\u0041",
                                           "\\n",
                                           "\"version\": 1,"};
  std::mt19937_64 rng(16);
  size_t direct = 0, parser_only = 0;
  // 250 edits of each text (the CI size, docs/ci.md): every text (each fixture, both key orders) still gets
  // ~60 deletions, ~60 insertions and ~125 replacements, each of the 30 tokens ~6 times; 1,000 took 144 s under ASan
  // (clang -O1). PTEPACK_CONFORMANCE_FULL=1 (scripts/conformance.sh --full) runs 1,000.
  const char* full = std::getenv("PTEPACK_CONFORMANCE_FULL");
  const int kPerBase = full != nullptr && std::string(full) == "1" ? 1000 : 250;
  for (const auto& base : bases) {
    for (int i = 0; i < kPerBase; ++i) {
      std::string t = base;
      const size_t at = rng() % t.size();
      switch (rng() % 4) {
        case 0:  // delete a few characters
          t.erase(at, 1 + rng() % 3);
          break;
        case 1:  // insert a token
          t.insert(at, tokens[rng() % tokens.size()]);
          break;
        default: {  // replace the number or word at `at` with a token
          size_t b = at, e = at;
          auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'; };
          while (b > 0 && word(t[b - 1])) --b;
          while (e < t.size() && word(t[e])) ++e;
          t.replace(b, e - b, tokens[rng() % tokens.size()]);
        }
      }
      if (ExpectSameTree(t, "edit " + std::to_string(i))) {
        ++direct;
      } else if (ParserTree(t)) {
        ++parser_only;
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  std::printf(
      "[json_tree] %zu edited texts: %zu read directly (same tree as the parser), %zu left to the parser "
      "and taken by it\n",
      bases.size() * kPerBase, direct, parser_only);
  EXPECT_GT(direct, bases.size() * kPerBase / 10) << "the direct reader should take most harmless edits";
}

}  // namespace
}  // namespace ptepack
