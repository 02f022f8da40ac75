#include "serialize/format/json_tree.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include "flatbuffers/flatbuffers.h"

namespace ptepack::fb {
namespace {

// Thrown (and caught in TreeFromJson) for anything this reader leaves to
// FlatBuffers' parser.
struct NotMine {};

bool IsScalarType(reflection::BaseType t) { return t >= reflection::UType && t <= reflection::Double; }
bool IsFloat(reflection::BaseType t) { return t == reflection::Float || t == reflection::Double; }

// FlatBuffers' verifier refuses a buffer of more tables than this (its
// default max_tables) or nested deeper than max_depth; the parser's output
// would then fail verification, so such a program is not read here.
constexpr size_t kMaxTables = 1000000;
constexpr size_t kMaxDepth = 64;

// What the reader needs of one field, read from the schema once per parse
// (reading it from the reflection tables for every key was 6 % of `pack`).
struct FieldFacts {
  const reflection::Field* field = nullptr;  // nullptr: no field has this id
  std::string_view name;
  uint16_t id = 0;
  reflection::BaseType type = reflection::None;
  reflection::BaseType element = reflection::None;  // of a vector
  int32_t index = -1;                               // the type's object or enum
  bool deprecated = false;
  bool optional = false;
  // The last scalar given and whether it is the field's default (IsDefault:
  // a program gives the same few values again and again, 0 above all).
  mutable bool checked = false;
  mutable bool was_default = false;
  mutable uint64_t checked_bits = 0;
};

// What the reader needs of one schema object, found once per parse.
struct ObjectInfo {
  const std::vector<const reflection::Field*>* by_id = nullptr;
  std::vector<FieldFacts> facts;  // by id
  std::unordered_map<std::string_view, const FieldFacts*> by_name;
  std::vector<uint16_t> required;  // ids of required fields
  // The field whose key followed field id k last time at [k + 1], the first
  // key at [0] (nullptr: none yet).
  std::vector<const FieldFacts*> next;
};

// The fields a table has been given so far, by id: a scalar's bits or a
// child's offset in the builder. Filled as the table's JSON is read; the
// table is built when it ends (its children are already in the buffer).
struct TableFields {
  struct Slot {
    uint64_t bits;  // a scalar's little-endian bits, or an offset
    reflection::BaseType type;
    bool offset;
  };
  uint64_t present = 0;  // ids of fields set (slots of others are left uninitialized)
  Slot slots[64];

  bool Has(uint16_t id) const { return present >> id & 1; }
  void Set(uint16_t id, reflection::BaseType type, uint64_t bits, bool offset) {
    slots[id] = Slot{bits, type, offset};
    present |= uint64_t{1} << id;
  }
};

class Reader {
 public:
  // The builder's first block: about what a program's flatbuffer takes of
  // its JSON (a third of it: keys and digits are longer than their binary),
  // so that it rarely grows and copies; pages not written are not touched.
  Reader(const Schema& s, std::string_view text)
      : s_(s), p_(text.data()), end_(text.data() + text.size()), fbb_(std::max<size_t>(1024, text.size() / 3)) {
    fbb_.ForceDefaults(true);  // a field is in the buffer when it is in the JSON (defaults are left out before)
  }

  // The flatbuffer of the root table; with `end`, text may follow it, and
  // *end is where it ends.
  Bytes Run(size_t* end = nullptr) {
    const char* start = p_;
    const flatbuffers::uoffset_t root = ParseTable(s_.Root(), 1);
    if (end != nullptr) {
      *end = static_cast<size_t>(p_ - start);
    } else {
      Ws();
      if (p_ != end_) throw NotMine{};
    }
    const flatbuffers::String* ident = s_.raw().file_ident();
    fbb_.Finish(flatbuffers::Offset<void>(root), ident && ident->size() == 4 ? ident->c_str() : nullptr);
    auto buf = std::make_shared<flatbuffers::DetachedBuffer>(fbb_.Release());
    return Bytes::View(buf->data(), buf->size(), buf);
  }

 private:
  // --- tokens ---
  void Ws() {
    // Compact JSON has none: one test of the next byte, most of the time.
    // Any other byte (and one past 0x7f where char is signed) goes to the
    // loop, which skips only whitespace.
    if (end_ > p_ && *p_ > ' ') return;
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\t' || *p_ == '\r')) ++p_;
  }
  void Expect(char c) {
    Ws();
    if (p_ >= end_ || *p_ != c) throw NotMine{};
    ++p_;
  }
  bool Peek(char c) {
    Ws();
    return p_ < end_ && *p_ == c;
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) return false;
    p_ += word.size();
    return true;
  }

  // A string of printable ASCII with the short escapes, into raw_: a view of
  // the input, or of scratch_ where it held an escape.
  void String() {
    Expect('"');
    const char* start = p_;
    // Printable ASCII other than '"' and '\\' (almost every string): no copy.
    // A table lookup a byte (five comparisons a byte were 12 % of `pack`).
    static const auto kPlain = [] {
      std::array<bool, 256> plain{};
      for (int c = 0x20; c < 0x7f; ++c) plain[c] = c != '"' && c != '\\';
      return plain;
    }();
    // Four bytes a step while four remain, then one.
    auto plain = [&](size_t k) { return kPlain[static_cast<unsigned char>(p_[k])]; };
    while (end_ - p_ >= 4 && plain(0) && plain(1) && plain(2) && plain(3)) p_ += 4;
    while (p_ < end_ && plain(0)) ++p_;
    if (p_ < end_ && *p_ == '"') {
      raw_ = std::string_view(start, static_cast<size_t>(p_ - start));
      ++p_;
      return;
    }
    scratch_.clear();
    bool escaped = false;
    while (true) {
      if (p_ >= end_) throw NotMine{};
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20 || c >= 0x7f) throw NotMine{};  // control characters, UTF-8: left to the parser
      if (c == '\\') {
        if (!escaped) scratch_.assign(start, p_);
        escaped = true;
        if (++p_ >= end_) throw NotMine{};
        switch (*p_) {
          case '"':
          case '\\':
          case '/':
            scratch_ += *p_;
            break;
          case 'b':
            scratch_ += '\b';
            break;
          case 'f':
            scratch_ += '\f';
            break;
          case 'n':
            scratch_ += '\n';
            break;
          case 'r':
            scratch_ += '\r';
            break;
          case 't':
            scratch_ += '\t';
            break;
          default:
            throw NotMine{};  // \u and anything else
        }
      } else if (escaped) {
        scratch_ += static_cast<char>(c);
      }
      ++p_;
    }
    raw_ = escaped ? std::string_view(scratch_) : std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
  }

  // A JSON number token: [-]digits[.digits][e[+-]digits], no leading zeros.
  struct Number {
    std::string_view text;
    bool negative = false;
    bool integral = true;
    bool nonzero_digit = false;
  };
  Number NumberToken() {
    Ws();
    Number n;
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') {
      n.negative = true;
      ++p_;
    }
    const char* digits = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') n.nonzero_digit |= *p_++ != '0';
    if (p_ == digits || (*digits == '0' && p_ - digits > 1)) throw NotMine{};
    if (p_ < end_ && *p_ == '.') {
      n.integral = false;
      const char* frac = ++p_;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') n.nonzero_digit |= *p_++ != '0';
      if (p_ == frac) throw NotMine{};
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      n.integral = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      const char* exp = p_;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      if (p_ == exp) throw NotMine{};
    }
    n.text = std::string_view(start, static_cast<size_t>(p_ - start));
    return n;
  }

  // --- schema ---
  ObjectInfo& Info(const reflection::Object& obj) {
    auto it = objects_.find(&obj);
    if (it != objects_.end()) return it->second;
    ObjectInfo info;
    info.by_id = &s_.FieldsById(obj);
    info.facts.resize(info.by_id->size());
    for (const reflection::Field* f : *obj.fields()) {
      FieldFacts& ff = info.facts[f->id()];
      ff.field = f;
      ff.name = std::string_view(f->name()->c_str(), f->name()->size());
      ff.id = f->id();
      ff.type = f->type()->base_type();
      ff.element = f->type()->element();
      ff.index = f->type()->index();
      ff.deprecated = f->deprecated();
      ff.optional = f->optional();
      info.by_name.emplace(ff.name, &ff);
      if (f->required()) info.required.push_back(f->id());
    }
    info.next.assign(info.by_id->size() + 1, nullptr);
    // The facts' vector moves with `info`, its elements stay where they are.
    return objects_.emplace(&obj, std::move(info)).first->second;
  }

  // The field of `info` named `name`, given after field `prev` (nullptr: the
  // first key): first the one that came after `prev` last time (a program
  // gives its tables' keys in the same order again and again; looking each
  // up by name was 4 % of `pack`), then by name.
  static const FieldFacts* FieldNamed(ObjectInfo& info, const FieldFacts* prev, std::string_view name) {
    const size_t slot = prev ? prev->id + 1u : 0u;
    const FieldFacts* guess = info.next[slot];
    if (guess && guess->name == name) return guess;
    auto it = info.by_name.find(name);
    if (it == info.by_name.end()) return nullptr;
    info.next[slot] = it->second;
    return it->second;
  }

  // The value of enum `index` named `name`: its names compared as bytes, the
  // one found last first (a program names the same few again and again:
  // "Tensor", "FLOAT", "STATIC"; hashing each name was most of Scalar's time).
  int64_t EnumValue(int index, std::string_view name) {
    if (enums_.empty()) enums_.resize(s_.raw().enums()->size());
    EnumNames& e = enums_[static_cast<size_t>(index)];
    if (e.names.empty()) {
      for (const reflection::EnumVal* v : *s_.raw().enums()->Get(index)->values()) {
        e.names.emplace_back(std::string_view(v->name()->c_str(), v->name()->size()), v->value());
      }
    }
    if (e.last < e.names.size() && e.names[e.last].first == name) return e.names[e.last].second;
    for (size_t i = 0; i < e.names.size(); ++i) {
      if (e.names[i].first == name) {
        e.last = i;
        return e.names[i].second;
      }
    }
    throw NotMine{};
  }
  bool IsEnumValue(int index, int64_t value) {
    return s_.raw().enums()->Get(index)->values()->LookupByKey(value) != nullptr;
  }

  // A scalar of type `t` (enum `enum_index` when >= 0), as little-endian bits
  // of its size.
  uint64_t Scalar(reflection::BaseType t, int enum_index) {
    Ws();
    if (p_ >= end_) throw NotMine{};
    if (*p_ == '"') {
      if (enum_index < 0) throw NotMine{};
      String();
      return IntBits(t, EnumValue(enum_index, raw_));
    }
    if (t == reflection::Bool) {
      if (Literal("true")) return 1;
      if (Literal("false")) return 0;
      throw NotMine{};
    }
    // A plain non-negative integer of at most 18 digits (almost every number
    // of a program): its value as its digits are read, once. A sign, a
    // leading zero, a fraction, an exponent or more digits go the long way.
    if (!IsFloat(t) && *p_ >= '0' && *p_ <= '9') {
      const char* q = p_;
      uint64_t mag = 0;
      while (q < end_ && *q >= '0' && *q <= '9' && q - p_ < 18) mag = mag * 10 + static_cast<uint64_t>(*q++ - '0');
      const bool ends = q == end_ || (*q != '.' && *q != 'e' && *q != 'E' && (*q < '0' || *q > '9'));
      if (ends && (*p_ != '0' || q - p_ == 1)) {
        p_ = q;
        return IntegerBits(t, enum_index, mag, /*negative=*/false);
      }
    }
    Number n = NumberToken();
    if (IsFloat(t)) return FloatBits(t, n);
    if (!n.integral) throw NotMine{};
    std::string_view digits = n.text.substr(n.negative ? 1 : 0);
    uint64_t mag = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mag);
    if (ec != std::errc() || end != digits.data() + digits.size()) throw NotMine{};
    return IntegerBits(t, enum_index, mag, n.negative);
  }

  // The integer of magnitude `mag` (negated when `negative`) as type `t`, and
  // a value of enum `enum_index` when that is not -1.
  uint64_t IntegerBits(reflection::BaseType t, int enum_index, uint64_t mag, bool negative) {
    int64_t v;
    if (negative) {
      if (mag > uint64_t{1} << 63) throw NotMine{};
      if (mag == 0) throw NotMine{};  // "-0": left to the parser
      v = static_cast<int64_t>(0 - mag);
    } else {
      if (t == reflection::ULong) return mag;  // the one type past INT64_MAX
      if (mag > static_cast<uint64_t>(INT64_MAX)) throw NotMine{};
      v = static_cast<int64_t>(mag);
    }
    if (enum_index >= 0 && !IsEnumValue(enum_index, v)) throw NotMine{};
    return IntBits(t, v);
  }

  // `v` as type `t`, if it fits.
  static uint64_t IntBits(reflection::BaseType t, int64_t v) {
    int64_t lo, hi;
    switch (t) {
      case reflection::Bool:
        lo = 0, hi = 1;
        break;
      case reflection::Byte:
        lo = INT8_MIN, hi = INT8_MAX;
        break;
      case reflection::UType:
      case reflection::UByte:
        lo = 0, hi = UINT8_MAX;
        break;
      case reflection::Short:
        lo = INT16_MIN, hi = INT16_MAX;
        break;
      case reflection::UShort:
        lo = 0, hi = UINT16_MAX;
        break;
      case reflection::Int:
        lo = INT32_MIN, hi = INT32_MAX;
        break;
      case reflection::UInt:
        lo = 0, hi = UINT32_MAX;
        break;
      case reflection::Long:
        lo = INT64_MIN, hi = INT64_MAX;
        break;
      case reflection::ULong:
        lo = 0, hi = INT64_MAX;
        break;
      default:
        throw NotMine{};
    }
    if (v < lo || v > hi) throw NotMine{};
    size_t n = ScalarSize(t);
    uint64_t bits = static_cast<uint64_t>(v);
    return n == 8 ? bits : bits & ((uint64_t{1} << (8 * n)) - 1);
  }

  // A float or double read the way strtof/strtod round (from_chars rounds
  // correctly too). Values that overflow or come out subnormal or zero from
  // nonzero digits are left to the parser.
  static uint64_t FloatBits(reflection::BaseType t, const Number& n) {
    const char* b = n.text.data();
    const char* e = b + n.text.size();
    if (t == reflection::Float) {
      float f = 0;
      auto [end, ec] = std::from_chars(b, e, f);
      if (ec != std::errc() || end != e || !std::isfinite(f) || (f == 0 ? n.nonzero_digit : !std::isnormal(f))) {
        throw NotMine{};
      }
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    double d = 0;
    auto [end, ec] = std::from_chars(b, e, d);
    if (ec != std::errc() || end != e || !std::isfinite(d) || (d == 0 ? n.nonzero_digit : !std::isnormal(d))) {
      throw NotMine{};
    }
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    return bits;
  }

  flatbuffers::uoffset_t StringHere() {
    String();
    return fbb_.CreateString(raw_.data(), raw_.size()).o;
  }

  // Reads a table and builds it; its offset in the builder.
  flatbuffers::uoffset_t ParseTable(const reflection::Object& obj, size_t depth) {
    if (obj.is_struct() || depth > kMaxDepth || ++tables_ > kMaxTables) throw NotMine{};
    ObjectInfo& info = Info(obj);
    if (info.by_id->size() > 64) throw NotMine{};
    TableFields t;
    uint64_t seen = 0;  // field ids given
    const FieldFacts* prev = nullptr;
    // Union values given before their `_type` (nlohmann::json prints keys
    // sorted, so "val" comes before "val_type"): skipped, and read at the end.
    std::vector<std::pair<const FieldFacts*, const char*>> later;
    Expect('{');
    if (Peek('}')) {
      ++p_;
    } else {
      while (true) {
        String();
        const FieldFacts* named = FieldNamed(info, prev, raw_);
        if (named == nullptr) throw NotMine{};
        const FieldFacts& f = *named;
        prev = named;
        const uint64_t bit = uint64_t{1} << f.id;
        if (f.deprecated || (seen & bit)) throw NotMine{};
        seen |= bit;
        Expect(':');
        if (f.type == reflection::Union && !t.Has(TagId(info, f))) {
          Ws();
          later.emplace_back(&f, p_);
          SkipValue(0);
        } else {
          ParseField(info, f, t, depth);
        }
        Ws();
        if (p_ < end_ && *p_ == ',') {
          ++p_;
          continue;
        }
        Expect('}');
        break;
      }
    }
    if (!later.empty()) {
      const char* resume = p_;
      for (auto [f, at] : later) {
        p_ = at;
        ParseField(info, *f, t, depth);
      }
      p_ = resume;
    }
    for (uint16_t id : info.required) {
      if (!t.Has(id)) throw NotMine{};
    }
    return Build(t);
  }

  flatbuffers::uoffset_t Build(const TableFields& t) {
    const flatbuffers::uoffset_t start = fbb_.StartTable();
    for (uint64_t left = t.present; left != 0; left &= left - 1) {
      const auto id = static_cast<uint16_t>(__builtin_ctzll(left));
      const TableFields::Slot& s = t.slots[id];
      const flatbuffers::voffset_t at = flatbuffers::FieldIndexToOffset(id);
      if (s.offset) {
        fbb_.AddOffset(at, flatbuffers::Offset<void>(static_cast<flatbuffers::uoffset_t>(s.bits)));
        continue;
      }
      switch (ScalarSize(s.type)) {
        case 1:
          fbb_.AddElement<uint8_t>(at, static_cast<uint8_t>(s.bits), 0);
          break;
        case 2:
          fbb_.AddElement<uint16_t>(at, static_cast<uint16_t>(s.bits), 0);
          break;
        case 4:
          fbb_.AddElement<uint32_t>(at, static_cast<uint32_t>(s.bits), 0);
          break;
        default:
          fbb_.AddElement<uint64_t>(at, s.bits, 0);
          break;
      }
    }
    return fbb_.EndTable(start);
  }

  // The id of union field `f`'s tag: the field before it (`NAME_type`).
  static uint16_t TagId(const ObjectInfo& info, const FieldFacts& f) {
    const FieldFacts* tf = f.id > 0 ? &info.facts[f.id - 1u] : nullptr;
    if (tf == nullptr || tf->field == nullptr || tf->type != reflection::UType) throw NotMine{};
    return tf->id;
  }

  // Steps over one JSON value (checked when it is read later).
  void SkipValue(size_t depth) {
    if (depth > kMaxDepth) throw NotMine{};
    Ws();
    if (p_ >= end_) throw NotMine{};
    if (*p_ == '"') {
      String();
    } else if (*p_ == '{' || *p_ == '[') {
      const char close = *p_ == '{' ? '}' : ']';
      ++p_;
      if (Peek(close)) {
        ++p_;
        return;
      }
      while (true) {
        if (close == '}') {
          String();
          Expect(':');
        }
        SkipValue(depth + 1);
        Ws();
        if (p_ < end_ && *p_ == ',') {
          ++p_;
          continue;
        }
        Expect(close);
        return;
      }
    } else {
      while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' && *p_ != '\t' &&
             *p_ != '\r') {
        ++p_;
      }
    }
  }

  void ParseField(const ObjectInfo& info, const FieldFacts& f, TableFields& t, size_t depth) {
    const auto bt = f.type;
    if (IsScalarType(bt)) {
      uint64_t bits = Scalar(bt, bt == reflection::UType || f.index >= 0 ? f.index : -1);
      if (!f.optional) {
        if (!f.checked || f.checked_bits != bits) {
          f.checked = true;
          f.checked_bits = bits;
          f.was_default = IsDefault(*f.field, bits);
        }
        if (f.was_default) return;  // left out, as the parser does
      }
      t.Set(f.id, bt, bits, false);
    } else if (bt == reflection::String) {
      t.Set(f.id, bt, StringHere(), true);
    } else if (bt == reflection::Obj) {
      t.Set(f.id, bt, ParseTable(s_.ObjectAt(f.index), depth + 1), true);
    } else if (bt == reflection::Union) {
      const uint16_t tag = TagId(info, f);
      const reflection::Object* member =
          t.Has(tag) ? s_.UnionMember(f.index, static_cast<uint8_t>(t.slots[tag].bits)) : nullptr;
      if (member == nullptr) throw NotMine{};
      t.Set(f.id, bt, ParseTable(*member, depth + 1), true);
    } else if (bt == reflection::Vector) {
      t.Set(f.id, bt, ParseVector(f, depth), true);
    } else {
      throw NotMine{};
    }
  }

  // Reads a vector and builds it; its offset in the builder.
  flatbuffers::uoffset_t ParseVector(const FieldFacts& f, size_t depth) {
    const auto et = f.element;
    Expect('[');
    bool empty = Peek(']');
    if (IsScalarType(et)) {
      if (et == reflection::UType) throw NotMine{};
      const size_t es = ScalarSize(et);
      const int enum_index = f.index;
      bytes_.clear();
      if (!empty) {
        while (true) {
          uint64_t bits = Scalar(et, enum_index);
          const auto* b = reinterpret_cast<const uint8_t*>(&bits);
          bytes_.insert(bytes_.end(), b, b + es);
          if (!Next()) break;
        }
      }
      if (empty) ++p_;
      const size_t n = bytes_.size() / es;
      fbb_.StartVector(n, es);
      fbb_.PushBytes(bytes_.data(), bytes_.size());  // little-endian bits, as the buffer holds them
      return fbb_.EndVector(n);
    }
    if (et != reflection::String && et != reflection::Obj) throw NotMine{};
    // The elements' offsets, on one stack shared by the vectors being read.
    const size_t base = offsets_.size();
    if (empty) {
      ++p_;
    } else {
      while (true) {
        offsets_.push_back(et == reflection::String ? StringHere() : ParseTable(s_.ObjectAt(f.index), depth + 1));
        if (!Next()) break;
      }
    }
    const size_t n = offsets_.size() - base;
    fbb_.StartVector(n, sizeof(flatbuffers::uoffset_t));
    for (size_t i = n; i-- > 0;) fbb_.PushElement(flatbuffers::Offset<void>(offsets_[base + i]));
    offsets_.resize(base);
    return fbb_.EndVector(n);
  }

  // After a vector element: true at ',', false at (and past) ']'.
  bool Next() {
    Ws();
    if (p_ < end_ && *p_ == ',') {
      ++p_;
      return true;
    }
    Expect(']');
    return false;
  }

  const Schema& s_;
  const char* p_;
  const char* end_;
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<flatbuffers::uoffset_t> offsets_;
  std::string scratch_;
  std::string_view raw_;
  std::vector<uint8_t> bytes_;
  size_t tables_ = 0;
  std::unordered_map<const reflection::Object*, ObjectInfo> objects_;
  // One enum's names and values, in the schema's order (the first of a name
  // wins, as it did in a map), and which was found last.
  struct EnumNames {
    std::vector<std::pair<std::string_view, int64_t>> names;
    size_t last = 0;
  };
  std::vector<EnumNames> enums_;  // by enum index, each filled when first used
};

}  // namespace

std::optional<Bytes> FlatbufferFromJson(const Schema& schema, std::string_view json, size_t* end) {
  try {
    return Reader(schema, json).Run(end);
  } catch (const NotMine&) {
    return std::nullopt;
  }
}

std::shared_ptr<Table> TreeFromJson(const Schema& schema, std::string_view json) {
  auto fbb = FlatbufferFromJson(schema, json);
  return fbb ? Decode(schema, fbb->data, fbb->size, fbb->owner) : nullptr;
}

std::shared_ptr<Table> TreeFromJsonPrefix(const Schema& schema, std::string_view json, size_t* end) {
  auto fbb = FlatbufferFromJson(schema, json, end);
  return fbb ? DecodeOnDemand(schema, fbb->data, fbb->size, fbb->owner) : nullptr;
}

}  // namespace ptepack::fb
