// Typed views of reflection-tree nodes (fb::Table): the base of the classes
// scripts/gen_views.py generates from the schemas (program_views_generated.h,
// flat_tensor_views_generated.h, flat_tensor_legacy_views_generated.h).
//
//   prog::Tensor tensor{table};           // throws if `table` is not a Tensor
//   tensor.sizes()                         // fb::Value& (field id from the schema)
//   tensor.get_data_buffer_idx()           // uint32_t, the schema's default if absent
//   tensor.set_data_buffer_idx(3)          // a UInt scalar, as the schema says
//
// A view of a const table gives const access only (class template argument
// deduction picks View<const fb::Table>).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ptepack/error.h"
#include "serialize/format/fbtree.h"

namespace ptepack::fb {

// One generated field id (for the tests that check them against the schema).
struct FieldId {
  const char* name;
  uint16_t id;
};

// One generated view: its table, the schema object index and its field ids.
struct ViewInfo {
  const char* qualified_name;
  int object_index;
  const FieldId* fields;
  size_t num_fields;
  size_t slots;  // field values a new table holds: highest field id + 1
};

template <typename Tab>
class View {
  static_assert(std::is_same_v<std::remove_const_t<Tab>, Table>, "a view wraps an fb::Table");

 public:
  Tab& table() const { return *t_; }

 protected:
  View(Tab& t, const reflection::Object& def, const char* name) : t_(&t) {
    if (t.def != &def) {
      throw Error("internal", std::string("a ") + name + " view of a " +
                                  (t.def && t.def->name() ? t.def->name()->str() : std::string("typeless")) + " table");
    }
  }
  // The field of this id (a missing slot reads as absent; a write makes room).
  auto& at(uint16_t id) const {
    if constexpr (std::is_const_v<Tab>) {
      static const Value kAbsent;
      return id < t_->fields.size() ? t_->fields[id] : kAbsent;
    } else {
      if (id >= t_->fields.size()) t_->fields.resize(id + 1u);
      return t_->fields[id];
    }
  }

 private:
  Tab* t_;
};

// A new table of schema object `def`, every field absent.
inline std::shared_ptr<Table> NewTableOf(const Schema& s, const reflection::Object& def) {
  return MakeTable(&def, s.FieldsById(def).size());
}
// The same, with the slot count the generated views know (no schema lookup).
inline std::shared_ptr<Table> NewTableOf(const reflection::Object& def, size_t slots) { return MakeTable(&def, slots); }

// An integer (or enum, or bool) scalar; the raw bits are those of its
// unsigned representation U, as the encoder writes them.
template <typename T, typename U>
T GetInt(const Value& v, T dflt) {
  if (v.kind != Value::Kind::kScalar) return dflt;
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<U>(v.bits()) != 0;
  } else {
    using Rep = std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>, std::common_type<T>>;
    return static_cast<T>(static_cast<typename Rep::type>(static_cast<U>(v.bits())));
  }
}

template <typename U, typename T>
Value IntValue(reflection::BaseType type, T v) {
  return ScalarValue(type, static_cast<U>(v));
}

template <typename T>
T GetFloat(const Value& v, double dflt) {
  if (v.kind != Value::Kind::kScalar) return static_cast<T>(dflt);
  T out;
  if constexpr (sizeof(T) == 4) {
    uint32_t b = static_cast<uint32_t>(v.bits());
    std::memcpy(&out, &b, 4);
  } else {
    uint64_t b = v.bits();
    std::memcpy(&out, &b, 8);
  }
  return out;
}

template <typename T>
Value FloatValue(reflection::BaseType type, T v) {
  uint64_t bits = 0;
  if constexpr (sizeof(T) == 4) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    bits = b;
  } else {
    std::memcpy(&bits, &v, 8);
  }
  return ScalarValue(type, bits);
}

// A copy of a scalar vector's elements.
template <typename T>
std::vector<T> GetVector(const Value& v) {
  std::vector<T> out(v.scalars_size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.scalars_data(), out.size() * sizeof(T));
  return out;
}

}  // namespace ptepack::fb
