#include "serialize/format/program_json.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "ptepack/error.h"
#include "serialize/format/fbtree.h"

namespace ptepack::schema {
extern const uint8_t k_program_bfbs[];
extern const size_t k_program_bfbs_size;
}  // namespace ptepack::schema

namespace ptepack {

std::unique_ptr<flatbuffers::Parser> ProgramJsonParser() {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  // A string that is not UTF-8 (ExecuTorch's runtime reads container_meta_type
  // and names as bytes; `verify` accepts them) prints its other bytes as \xNN
  // escapes and reads back from them, byte for byte; valid UTF-8 prints as
  // before. Without it such a program could not be printed at all (`extract`
  // failed with internal-json on testdata/regressions/
  // pte-zero-size-constant-in-padding.pte).
  opts.allow_non_utf8 = true;
  auto p = std::make_unique<flatbuffers::Parser>(opts);
  if (!p->Deserialize(schema::k_program_bfbs, schema::k_program_bfbs_size)) {
    throw Error("internal-schema", "cannot load the embedded program schema");
  }
  return p;
}

namespace {

// A bool is stored as a byte; ExecuTorch's runtime reads any nonzero byte as
// true, and `verify` accepts it. FlatBuffers' printer writes such a byte as
// `true`, which reads back as 1: the file would not come back byte for byte
// (found by fuzz_pte_reader's extract -> pack check: requires_grad stored as
// 24). A program holding a bool byte other than 0 or 1 is printed with a
// schema in which bools are ubytes: every bool prints as its number, which
// FlatBuffers' parser stores as it is for a bool field.
bool HasRawBool(const fb::Value& v) {
  if (v.type == reflection::Bool && v.kind == fb::Value::Kind::kScalar && v.bits() > 1) return true;
  if (v.type == reflection::Bool && v.kind == fb::Value::Kind::kScalarVector) {
    for (size_t i = 0; i < v.scalars().size; ++i) {
      if (v.scalars().data[i] > 1) return true;
    }
  }
  if (v.table()) {
    for (const auto& f : v.table()->fields) {
      if (HasRawBool(f)) return true;
    }
  }
  for (const auto& e : v.elems()) {
    if (HasRawBool(e)) return true;
  }
  return false;
}

bool HasRawBool(const fb::Table& t) {
  for (const auto& f : t.fields) {
    if (HasRawBool(f)) return true;
  }
  return false;
}

// The program schema with every bool (field or vector element) retyped as
// ubyte: the same bytes, printed as numbers.
const std::vector<uint8_t>& SchemaWithNumericBools() {
  static const std::vector<uint8_t> bfbs = [] {
    std::vector<uint8_t> b(schema::k_program_bfbs, schema::k_program_bfbs + schema::k_program_bfbs_size);
    auto* s = flatbuffers::GetMutableRoot<reflection::Schema>(b.data());
    for (const reflection::Object* obj : *s->objects()) {
      for (const reflection::Field* f : *obj->fields()) {
        auto* type = reinterpret_cast<flatbuffers::Table*>(const_cast<reflection::Type*>(f->type()));
        if (f->type()->base_type() == reflection::Bool) {
          type->SetField<int8_t>(reflection::Type::VT_BASE_TYPE, reflection::UByte, 0);
        }
        if (f->type()->element() == reflection::Bool) {
          type->SetField<int8_t>(reflection::Type::VT_ELEMENT, reflection::UByte, 0);
        }
      }
    }
    return b;
  }();
  return bfbs;
}

std::unique_ptr<flatbuffers::Parser> PrinterWithNumericBools() {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.allow_non_utf8 = true;
  auto p = std::make_unique<flatbuffers::Parser>(opts);
  const auto& b = SchemaWithNumericBools();
  if (!p->Deserialize(b.data(), b.size())) throw Error("internal-schema", "cannot load the program schema");
  return p;
}

// FlatBuffers' text printer writes a double with 12 digits after the point
// (std::fixed): a float32 scale widened to double loses its low bits and
// 1e-13 prints as 0, so the JSON would not give back the same program. Every
// double of the tree is swapped for a placeholder integer the printer writes
// exactly, and each placeholder's text is then replaced by the shortest text
// that reads back as the very same double.
class ExactDoubles {
 public:
  // Swaps the doubles of `t`, a table of its own; the tables below it that
  // hold doubles are owned (copied) first, the others stay shared.
  void Swap(fb::Table& t) {
    for (auto& v : t.fields) SwapValue(v);
  }
  std::string Restore(const std::string& text) const;
  void ChooseBase(fb::Table& t);
  // How many of the swapped doubles the text cannot give back bit for bit.
  size_t CountLostInJson() const;

 private:
  void SwapValue(fb::Value& v);
  void Collect(const fb::Value& v);
  double Placeholder(size_t i) const { return base_ + static_cast<double>(i); }

  std::vector<double> values_;  // the i-th swapped double
  std::vector<double> seen_;    // every double of the tree (to avoid as placeholders)
  double base_ = 0x1p50;
};

double DoubleOf(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
uint64_t BitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

// Whether a double is anywhere in `v`.
bool HasDouble(const fb::Value& v) {
  if (v.type == reflection::Double &&
      (v.kind == fb::Value::Kind::kScalar || v.kind == fb::Value::Kind::kScalarVector)) {
    return true;
  }
  if (v.table()) {
    for (const auto& f : v.table()->fields) {
      if (HasDouble(f)) return true;
    }
  }
  for (const auto& e : v.elems()) {
    if (HasDouble(e)) return true;
  }
  return false;
}

void ExactDoubles::SwapValue(fb::Value& v) {
  if (!HasDouble(v)) return;
  if (v.kind == fb::Value::Kind::kScalar && v.type == reflection::Double) {
    values_.push_back(DoubleOf(v.bits()));
    v.set_bits(BitsOf(Placeholder(values_.size() - 1)));
  } else if (v.kind == fb::Value::Kind::kScalarVector && v.type == reflection::Double) {
    std::vector<uint8_t> raw(v.scalars().size);
    for (size_t i = 0; i + 8 <= raw.size(); i += 8) {
      double d;
      std::memcpy(&d, v.scalars().data + i, 8);
      values_.push_back(d);
      const double p = Placeholder(values_.size() - 1);
      std::memcpy(raw.data() + i, &p, 8);
    }
    v.set_scalars(Bytes::Own(std::move(raw)));
  }
  if (v.table()) Swap(fb::Own(v.mutable_table()));
  if (v.kind == fb::Value::Kind::kOffsetVector) {
    for (auto& e : v.mutable_elems()) SwapValue(e);
  }
}

void ExactDoubles::Collect(const fb::Value& v) {
  if (v.kind == fb::Value::Kind::kScalar && v.type == reflection::Double) seen_.push_back(DoubleOf(v.bits()));
  if (v.kind == fb::Value::Kind::kScalarVector && v.type == reflection::Double) {
    for (size_t i = 0; i + 8 <= v.scalars().size; i += 8) {
      double d;
      std::memcpy(&d, v.scalars().data + i, 8);
      seen_.push_back(d);
    }
  }
  if (v.table()) {
    for (const auto& f : v.table()->fields) Collect(f);
  }
  for (const auto& e : v.elems()) Collect(e);
}

// A placeholder range [base, base + n) that no double of the tree falls in.
void ExactDoubles::ChooseBase(fb::Table& t) {
  for (const auto& f : t.fields) Collect(f);
  const double n = static_cast<double>(seen_.size());
  for (base_ = 0x1p50; base_ < 0x1p52; base_ *= 2) {
    bool clash = false;
    for (double d : seen_) clash = clash || (d >= base_ && d < base_ + n);
    if (!clash) return;
  }
  throw Error("internal-json", "cannot print the program's doubles exactly");
}

std::string ExactText(double d) {
  if (std::isnan(d)) return "\"nan\"";
  if (std::isinf(d)) return d < 0 ? "\"-inf\"" : "\"inf\"";
  char buf[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    if (std::strtod(buf, nullptr) == d && std::signbit(std::strtod(buf, nullptr)) == std::signbit(d)) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string ExactDoubles::Restore(const std::string& text) const {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < values_.size(); ++i) index[flatbuffers::NumToString(Placeholder(i))] = i;
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string || c == '"') {
      out += c;
      if (c == '\\' && in_string && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = !in_string;
      }
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) && !values_.empty()) {
      size_t j = i;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) ++j;
      auto it = index.find(text.substr(i, j - i));
      out += it == index.end() ? text.substr(i, j - i) : ExactText(values_[it->second]);
      i = j - 1;
      continue;
    }
    out += c;
  }
  return out;
}

bool LostInJson(uint64_t bits) { return std::isnan(DoubleOf(bits)) && bits != JsonNanBits(); }

// Calls `lost(bits, i)` for each double of `v` itself (a scalar, i = -1, or
// a vector's element i) that LostInJson.
template <typename Fn>
void ForEachLostDouble(const fb::Value& v, Fn&& lost) {
  if (v.type != reflection::Double) return;
  if (v.kind == fb::Value::Kind::kScalar && LostInJson(v.bits())) lost(v.bits(), -1);
  if (v.kind == fb::Value::Kind::kScalarVector) {
    for (size_t i = 0; i + 8 <= v.scalars().size; i += 8) {
      uint64_t bits;
      std::memcpy(&bits, v.scalars().data + i, 8);
      if (LostInJson(bits)) lost(bits, static_cast<int64_t>(i / 8));
    }
  }
}

// The path of the first double in or below `v` (at `path`) JSON loses, and
// its bits; false when there is none. The path grows and shrinks in place.
bool FirstLost(const fb::Value& v, std::string& path, uint64_t& bits) {
  bool found = false;
  ForEachLostDouble(v, [&](uint64_t b, int64_t i) {
    if (found) return;
    found = true;
    bits = b;
    if (i >= 0) path += "[" + std::to_string(i) + "]";
  });
  const size_t at = path.size();
  if (const fb::Table* t = v.table().get()) {
    for (const reflection::Field* f : *t->def->fields()) {
      if (found) return true;
      if (f->id() >= t->fields.size()) continue;
      if (!path.empty()) path += '.';
      path.append(f->name()->c_str(), f->name()->size());
      found = FirstLost(t->fields[f->id()], path, bits);
      if (!found) path.resize(at);
    }
  }
  for (size_t i = 0; i < v.elems().size() && !found; ++i) {
    path += "[" + std::to_string(i) + "]";
    found = FirstLost(v.elems()[i], path, bits);
    if (!found) path.resize(at);
  }
  return found;
}

size_t ExactDoubles::CountLostInJson() const {
  size_t n = 0;
  for (double d : values_) n += LostInJson(BitsOf(d));
  return n;
}

}  // namespace

uint64_t JsonNanBits() {
  // What the parser's "nan" is: the quiet NaN (checked against pack's output
  // in tests/extract_pack_test.cpp).
  static const uint64_t bits = BitsOf(std::numeric_limits<double>::quiet_NaN());
  return bits;
}

std::string ProgramToJson(const fb::Table& program, DoublesJsonLoses* lost) {
  auto copy = fb::ShallowClone(program);  // Swap owns what it changes
  ExactDoubles doubles;
  doubles.ChooseBase(*copy);
  doubles.Swap(*copy);
  if (lost != nullptr) {
    // Counted among the doubles just swapped; the first one's path is looked
    // for only when there is one (most programs have none).
    *lost = DoublesJsonLoses{};
    lost->count = doubles.CountLostInJson();
    std::string path;
    for (const reflection::Field* f : *program.def->fields()) {
      if (lost->count == 0) break;
      if (f->id() >= program.fields.size()) continue;
      path.assign(f->name()->c_str(), f->name()->size());
      if (FirstLost(program.fields[f->id()], path, lost->first_bits)) {
        lost->first = path;
        break;
      }
    }
  }
  fb::Encoded e = fb::Encode(fb::ProgramSchema(), *copy, fb::EncodeOptions{});
  auto parser = HasRawBool(*copy) ? PrinterWithNumericBools() : ProgramJsonParser();
  std::string out;
  if (!flatbuffers::GenerateText(*parser, e.data.data(), &out)) {
    throw Error("internal-json", "cannot print program as JSON");
  }
  return doubles.Restore(out);
}

}  // namespace ptepack
