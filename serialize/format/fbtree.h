// A generic, editable tree for FlatBuffers data, driven by a binary schema
// (reflection), and an encoder that reproduces the exact byte layout of the
// two producers ExecuTorch has used:
//
//  - Order::kFlatc: ExecuTorch's Python serializer wrote JSON and ran
//    `flatc --binary`. flatc's JSON parser creates child objects in field
//    order and then adds a table's fields largest-size first, in reverse
//    declaration order within one size; vtables are shared only when fully
//    identical; alignment requests for zero-length data are ignored
//    (flatc >= 2.0.7).
//  - Order::kFlatcLegacy: the same with older flatc (< 2.0.7), which still
//    aligned for zero-length vectors. Seen in 2023-era .pte files.
//  - Order::kPythonObjectApi: newer ExecuTorch packs through the generated
//    Python object API. Children are created in field order, fields are added
//    in declaration order, vtables are shared when their field offsets match
//    (object size is ignored), and force_align is applied even when empty.
//  - Order::kPythonObjectApi2026: the same serializer with the Python
//    flatbuffers package 25.12.19 or later, which shares a vtable only when
//    the object size matches too (upstream's fix of issue #8653). Seen in
//    2026 .pte files.
//
// The tree keeps presence (an absent vector differs from an empty one), which
// both producers preserve. Scalar vectors are held as byte views, so decoding
// a program does not copy inline tensor data.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/backend_config.h"
#include "flatbuffers/reflection.h"
#include "serialize/io/file_io.h"

namespace ptepack::fb {

using Order = FlatbufferOrder;  // the producers, named by the config

// The Python object-API producers (children and fields in declaration order).
inline bool IsPython(Order o) { return o == Order::kPythonObjectApi || o == Order::kPythonObjectApi2026; }

struct Table;
struct LazySource;  // the flatbuffer that lazily decoded tables read (fbtree.cpp)
class TableEdits;   // changes kept for many lazy tables (EditTableWith)

// One field value or vector element, 32 bytes: the kind, the type and one
// payload (a scalar's bits, a table, the bytes of a string or scalar vector,
// or the elements of an offset vector). Strings and scalar vectors decoded
// from a file are views of it (their owner keeps it mapped), so decoding
// copies no bytes. Copies share tables and bytes and copy element lists.
// Reads never change a value; the set_/mutable_ calls replace its payload.
struct Value {
  enum class Kind : uint8_t { kAbsent, kScalar, kString, kTable, kScalarVector, kOffsetVector };
  // A reflection::BaseType in one byte (the enum itself is four).
  class Type {
   public:
    Type(reflection::BaseType t = reflection::None) : t_(static_cast<uint8_t>(t)) {}         // NOLINT: implicit
    operator reflection::BaseType() const { return static_cast<reflection::BaseType>(t_); }  // NOLINT

   private:
    uint8_t t_;
  };
  Kind kind = Kind::kAbsent;
  Type type;  // scalar type, or vector element type

  Value() noexcept : bits_(0) {}
  Value(const Value& o);
  // Moves are inline, and a scalar (or an empty slot) is moved by copying its
  // bits: a program's tree is built and copied a field at a time.
  Value(Value&& o) noexcept : kind(o.kind), type(o.type), store_(o.store_), size_(o.size_) {
    if (store_ == Store::kBits) {
      bits_ = o.bits_;
    } else {
      MovePayload(std::move(o));
    }
  }
  Value& operator=(const Value& o);
  Value& operator=(Value&& o) noexcept {
    if (store_ != Store::kBits) return MoveAssignSlow(std::move(o));
    // Nothing held here, so `o` cannot live inside this value's payload.
    kind = o.kind;
    type = o.type;
    size_ = o.size_;
    store_ = o.store_;
    if (store_ == Store::kBits) {
      bits_ = o.bits_;
    } else {
      MovePayload(std::move(o));
    }
    return *this;
  }
  ~Value() {
    if (store_ != Store::kBits) Reset();
  }

  bool present() const { return kind != Kind::kAbsent; }

  // kScalar: the raw little-endian value (0 for any other payload).
  uint64_t bits() const { return store_ == Store::kBits ? bits_ : 0; }
  void set_bits(uint64_t b) {
    if (store_ != Store::kBits) Reset();
    size_ = 0;
    bits_ = b;
  }
  // kString: the characters (empty for any other payload).
  std::string str() const { return std::string(str_view()); }
  std::string_view str_view() const {
    return std::string_view(reinterpret_cast<const char*>(scalars_data()), scalars_size());
  }
  void set_str(std::string s);
  // kTable (also union values): the table, or null. A table DecodeOnDemand
  // left in the flatbuffer is decoded here, once, and kept (a read that does
  // not need to keep it asks Peek instead).
  const std::shared_ptr<Table>& table() const {  // inline: read for every table of every walk
    static const std::shared_ptr<Table> kNone;
    if (store_ == Store::kTable) return table_;
    return store_ == Store::kLazy ? const_cast<Value*>(this)->Materialize() : kNone;
  }
  // A kTable whose table is still in the flatbuffer (DecodeOnDemand).
  bool lazy() const { return store_ == Store::kLazy; }
  // The object a lazy() table decodes to (its Table::def), without decoding
  // it; null for any other payload.
  const reflection::Object* lazy_def() const;
  // The table slot itself, to replace or own (fb::Own) the table. Like
  // mutable_elems, throws Error("internal") on a value holding another payload.
  std::shared_ptr<Table>& mutable_table();
  // kScalarVector: the raw element bytes (empty for any other payload).
  Bytes scalars() const;
  const uint8_t* scalars_data() const {
    if (store_ == Store::kBlob) return blob_.data;
    return store_ == Store::kBytes ? bytes_->data : nullptr;
  }
  size_t scalars_size() const {
    if (store_ == Store::kBlob) return size_;
    return store_ == Store::kBytes ? bytes_->size : 0;
  }
  // Keeps what `b` says about its source (a mapped file, zeros), which the
  // writer streams from, and sizes over 4 GiB, which it refuses.
  void set_scalars(Bytes b);
  // The bytes of a string or scalar vector as a view of memory `owner` keeps
  // alive (the kind and type are the caller's to set); throws limit-exceeded
  // over 4 GiB.
  void set_view(const uint8_t* data, size_t size, std::shared_ptr<const void> owner);
  // kOffsetVector: the elements (strings or tables). Those of a
  // GeneratedVector are made here, once, and kept.
  const std::vector<Value>& elems() const;
  std::vector<Value>& mutable_elems();
  // A kOffsetVector whose elements are still to be made (GeneratedVector).
  bool generated() const { return store_ == Store::kGen; }

 private:
  // kBlob: a view (pointer + owner, size in size_); kBytes: a whole Bytes,
  // for data a writer streams (mapped, zeros) or larger than size_ holds.
  // kLazy: a table in a flatbuffer, its object's index in the source's schema in size_.
  // kGen: a GeneratedVector's maker, its element count in size_.
  enum class Store : uint8_t { kBits, kTable, kBlob, kBytes, kElems, kLazy, kGen };
  using Maker = std::function<Value(size_t)>;
  struct Blob {
    const uint8_t* data;
    std::shared_ptr<const void> owner;
  };
  struct Lazy {
    const uint8_t* table;
    std::shared_ptr<const LazySource> src;
  };
  friend class Decoder;
  friend class PeekedTable;
  friend void EditTable(Value& v, std::function<void(Table&)> fn);
  friend const uint8_t* EditTableWith(Value& v, const std::shared_ptr<const TableEdits>& edits);
  friend Value GeneratedVector(size_t count, reflection::BaseType elem_type, std::function<Value(size_t)> make);
  friend Value GeneratedElement(const Value& v, size_t i);
  friend size_t ElementCount(const Value& v);
  void SetLazy(const uint8_t* table, uint32_t object_index, const std::shared_ptr<const LazySource>& src);
  // Decodes a kLazy table (its child tables stay lazy) into this value.
  std::shared_ptr<Table>& Materialize();
  void Reset() noexcept;
  // Move-constructs the payload of `o`'s store (store_ already set to it).
  void MovePayload(Value&& o) noexcept;
  Value& MoveAssignSlow(Value&& o) noexcept;
  void ReplaceEmptyPayload(const char* what);
  // Takes `o`'s kind, type and payload: copied from an lvalue, moved from an rvalue.
  template <typename V>
  void Take(V&& o);

  Store store_ = Store::kBits;
  uint32_t size_ = 0;  // kBlob: byte size
  union {
    uint64_t bits_;
    std::shared_ptr<Table> table_;
    Blob blob_;
    std::shared_ptr<const Bytes> bytes_;
    std::vector<Value> elems_;
    Lazy lazy_;
    std::shared_ptr<const Maker> gen_;
  };
};

// A table's field values. A table made by MakeTable (what every table of the
// library is made by) holds them in its own allocation, after the shared_ptr
// control block and the table: one allocation per table, not two. A list
// that grows past that room, or one of a table made otherwise, moves to the
// heap. The std::vector calls the library uses, on the same terms.
class FieldList {
 public:
  FieldList() noexcept = default;
  FieldList(const FieldList& o) { Assign(o); }
  FieldList& operator=(const FieldList& o) {
    if (this != &o) {
      FieldList copy(o);  // `o` may live inside one of these values
      *this = std::move(copy);
    }
    return *this;
  }
  FieldList(FieldList&& o) { Take(o); }
  FieldList& operator=(FieldList&& o);
  ~FieldList() {
    Clear();
    if (heap_) Free(data_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Value* data() { return data_; }
  const Value* data() const { return data_; }
  Value& operator[](size_t i) { return data_[i]; }
  const Value& operator[](size_t i) const { return data_[i]; }
  Value* begin() { return data_; }
  Value* end() { return data_ + size_; }
  const Value* begin() const { return data_; }
  const Value* end() const { return data_ + size_; }

  // New values are absent.
  void resize(size_t n);
  void reserve(size_t n) {
    if (n > cap_) Regrow(n);
  }
  void push_back(Value v) {
    if (size_ == cap_) Regrow(cap_ < 4 ? 4 : 2 * static_cast<size_t>(cap_));
    new (data_ + size_) Value(std::move(v));
    ++size_;
  }

 private:
  friend struct Table;
  // `n` absent values in `room`, memory the caller owns (a table's allocation).
  FieldList(Value* room, size_t n) noexcept : data_(room), size_(static_cast<uint32_t>(n)), cap_(size_) {
    for (size_t i = 0; i < n; ++i) new (room + i) Value();
  }
  void Clear() noexcept {
    for (uint32_t i = 0; i < size_; ++i) data_[i].~Value();
    size_ = 0;
  }
  void Assign(const FieldList& o);
  // Moves `o`'s values here (this list is empty): its heap block, or the values themselves.
  void Take(FieldList& o);
  void Regrow(size_t n);
  static void Free(Value* p) noexcept;

  Value* data_ = nullptr;
  uint32_t size_ = 0;
  uint32_t cap_ = 0;
  bool heap_ = false;  // data_ is a block of ours (else the table's room, or null)
};

// A table: its schema object and one Value per field, indexed by field id.
// Aligned as a Value, so that MakeTable's fields can follow it directly
// (32-bit targets, such as the viewer's wasm32, align it to 4 otherwise).
struct alignas(Value) Table {
  const reflection::Object* def = nullptr;
  FieldList fields;

  Table() = default;
  // A copy's fields are on the heap (ShallowClone makes its tables with MakeTable).
  Table(const Table&) = default;
  Table& operator=(const Table&) = default;

  // MakeTable's: `n` absent fields in the memory that follows this table.
  class RoomAfter {
    friend std::shared_ptr<Table> MakeTable(const reflection::Object* def, size_t n);
    friend class TableArena;
    RoomAfter() = default;
  };
  Table(RoomAfter, const reflection::Object* d, size_t n)  // NOLINT: the tag is MakeTable's
      : def(d), fields(reinterpret_cast<Value*>(reinterpret_cast<char*>(this) + sizeof(Table)), n) {}
};

// A table of `def` with `n` absent fields, in one allocation (the shared_ptr
// control block, the table and its fields).
std::shared_ptr<Table> MakeTable(const reflection::Object* def, size_t n);

// Memory for a tree built at once (ProgramBuilder, the JSON reader): its
// tables, and bytes for its views, come from a few large blocks (a bump
// allocator, growing as a monotonic buffer resource) instead of an allocation each. The
// blocks are freed together when the arena and every table and view made
// from it are gone, whoever holds them (copies, a Package) and on whatever
// thread. A table freed early leaves its memory in the block until then.
// Allocating is for one thread at a time, like building.
class TableArena {
 public:
  TableArena();
  ~TableArena();
  TableArena(const TableArena&) = delete;
  TableArena& operator=(const TableArena&) = delete;

  // MakeTable's table, in the arena.
  std::shared_ptr<Table> NewTable(const reflection::Object* def, size_t n);
  // `n` bytes that live as long as owner() is held (for Value::set_view).
  uint8_t* AllocBytes(size_t n);
  // A value of `kind` (a string or a scalar vector of `type`) viewing a copy,
  // in the arena, of the `n` bytes at `data`.
  Value CopyOf(Value::Kind kind, reflection::BaseType type, const void* data, size_t n);
  const std::shared_ptr<const void>& owner();

  struct Blocks;  // the resource and its reference count (fbtree.cpp)

 private:
  Blocks* b_;
  std::shared_ptr<const void> owner_;
};

// A loaded binary schema (.bfbs) with helpers.
class Schema {
 public:
  // `bfbs` must stay alive as long as the Schema.
  Schema(const uint8_t* bfbs, size_t size);
  const reflection::Schema& raw() const { return *schema_; }
  const reflection::Object& Root() const { return *schema_->root_table(); }
  const reflection::Object& ObjectAt(int index) const { return *schema_->objects()->Get(index); }
  const reflection::Object* FindObject(const std::string& qualified_name) const;
  // Field by name; throws if missing.
  const reflection::Field& FieldOf(const reflection::Object& obj, const std::string& name) const;
  // Fields of `obj` ordered by id.
  const std::vector<const reflection::Field*>& FieldsById(const reflection::Object& obj) const;
  // The object a union value of enum `union_index` with type tag `tag` holds.
  const reflection::Object* UnionMember(int union_index, uint8_t tag) const;
  // Its index in the schema's objects (-1: none).
  int UnionMemberIndex(int union_index, uint8_t tag) const {
    const auto& m = union_members_[static_cast<size_t>(union_index)];
    return m.empty() ? -1 : m[tag];
  }
  std::string FileIdent() const;

  // What decoding a table needs of one field, read from the reflection
  // tables once (reading them for every field of every table was most of a
  // lazy walk's decoding).
  struct FieldDecode {
    const reflection::Field* field;
    uint16_t offset;  // in the vtable
    uint16_t id;
    uint16_t tag_offset;  // a union's: its `_type` field's offset in the vtable (0: no such field)
    reflection::BaseType type;
    reflection::BaseType element;  // of a vector
    int32_t index;                 // the type's object (or union enum)
  };
  struct ObjectDecode {
    const reflection::Object* object;
    size_t field_count;               // FieldsById(*object).size()
    std::vector<FieldDecode> fields;  // not deprecated, by id
  };
  const ObjectDecode& DecodeOf(int object_index) const { return decode_[static_cast<size_t>(object_index)]; }
  int RootIndex() const { return root_index_; }

 private:
  const reflection::Schema* schema_;
  std::map<const reflection::Object*, std::vector<const reflection::Field*>> by_id_;  // every object's
  std::vector<ObjectDecode> decode_;                                                  // by object index
  std::vector<std::vector<int32_t>> union_members_;  // by enum index: a union's object index by tag (-1: none)
  int root_index_ = -1;
};

// Program and FlatTensor schemas compiled into the library. ProgramSchema
// is inline: every typed view asks it for its object (a call each was 3M
// instructions of building and laying out a 20,002-value program).
namespace detail {
const Schema& LoadProgramSchema();
}
inline const Schema& ProgramSchema() {
  static const Schema& s = detail::LoadProgramSchema();
  return s;
}
const Schema& FlatTensorSchema();
const Schema& FlatTensorLegacySchema();
// BundledProgram (.bpte) schema.
const Schema& BundledProgramSchema();

// Decodes a verified flatbuffer (root offset at buf[0]) into a tree.
// `owner` keeps `buf` alive for the scalar-vector views in the result.
std::shared_ptr<Table> Decode(const Schema& schema, const uint8_t* buf, size_t size, std::shared_ptr<const void> owner);

// The same tree, decoded as it is read: the root's fields now, every other
// table when Value::table() first asks for it (kept from then on) or, not
// kept, for each Peek. A walk that reads a large program through Peek and
// owns (fb::Own) only the tables it changes holds one path of decoded tables
// at a time, not the program's (a decoded table is about 10x its bytes).
// Reading a lazy value changes it: like the tree's other tables, one thread
// at a time.
std::shared_ptr<Table> DecodeOnDemand(const Schema& schema, const uint8_t* buf, size_t size,
                                      std::shared_ptr<const void> owner);

// The table of `v` (kTable), for reading: a lazy one decoded afresh (its
// child tables lazy, EditTable's changes made) and held by the result, not
// kept in `v`; otherwise v.table()'s, borrowed (no count taken: the walks of
// a built program read every value through this). Null if none.
class PeekedTable {
 public:
  explicit PeekedTable(const Value& v);
  const Table* get() const { return p_; }
  const Table& operator*() const { return *p_; }
  const Table* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  const Table* p_ = nullptr;
  std::shared_ptr<const Table> held_;  // a lazy value's table, decoded for this read
};
inline PeekedTable Peek(const Value& v) { return PeekedTable(v); }

// Changes the table of `v` (kTable) with `fn`: now, on the table owned
// first (fb::Own), or, for a lazy value, each time it is decoded from here on
// (Peek, table(), the encoder), in the order given. A change to a large
// lazily decoded program then holds the changes, not the changed tables (a
// split of 300,000 constants held 210 MB of them). `fn` must give the same
// result each time. The table holding `v` must be the caller's to change.
void EditTable(Value& v, std::function<void(Table&)> fn);

// Changes kept for many tables still in one flatbuffer, each found by where
// its table is: one object, and one source the values share, for all the
// changes of a walk, instead of a source and a function for each table
// (EditTable: about 190 bytes a table, 58 MB of a split of 300,000
// constants).
class TableEdits {
 public:
  virtual ~TableEdits();
  // Changes `t`, just decoded from the flatbuffer's table at `at`. Asked at
  // every decode from then on: must give the same result each time.
  virtual void Apply(const uint8_t* at, Table& t) const = 0;

 private:
  friend const uint8_t* EditTableWith(Value& v, const std::shared_ptr<const TableEdits>& edits);
  // The sources made for `edits`, by the source the values had before. A
  // source made here holds the one it was made from (`base` or `before`), so
  // that address is not reused while the entry's weak_ptr can still lock;
  // once it cannot, a new source is made.
  mutable std::unordered_map<const LazySource*, std::weak_ptr<const LazySource>> sources_;
};

// Makes the lazy `v` decode through `edits` from here on, after the changes
// it has; returns where its table is, the place `edits` is asked about.
// Copies of `v` made before are not changed. Throws Error("internal") when
// `v` is not lazy() (change a decoded table directly).
const uint8_t* EditTableWith(Value& v, const std::shared_ptr<const TableEdits>& edits);

struct EncodeOptions {
  Order order = Order::kFlatc;
  // force_align overrides by "Object.field" (unqualified object name), on top
  // of the schema's own force_align attributes.
  std::map<std::string, size_t> force_align;
  // The buffer's first size (0: grow from 4 KiB and, past 2 MiB, to the
  // tree's estimate). Give MeasureTree's estimate when it is known anyway.
  size_t size_hint = 0;
};

struct Encoded {
  std::vector<uint8_t> data;   // finished buffer with file identifier
  size_t max_force_align = 1;  // largest force_align in effect for the schema
};

Encoded Encode(const Schema& schema, const Table& root, const EncodeOptions& options);

// One walk of a tree: `payload`, its strings and scalar vectors with their
// length fields (a lower bound of its encoded size), and `estimate`, near its
// encoded size (a little over, mostly; vtables are not counted).
struct TreeSize {
  uint64_t payload = 0;
  uint64_t estimate = 0;
};
TreeSize MeasureTree(const Table& t);

// Deep copy of a tree (byte views are shared, not copied).
std::shared_ptr<Table> Clone(const Table& t);

// Copy-on-write for trees that share tables with another tree (LayoutPte
// works on a shallow copy of the caller's program instead of a deep copy).
// ShallowClone copies one table's field values; child tables are shared.
std::shared_ptr<Table> ShallowClone(const Table& t);
// The table in `slot`, safe to change: replaced by a shallow copy first unless
// `slot` is its only owner. Reach a table to change by owning every table on
// the path from an owned root (a shared table may be reachable from the other
// tree, whose parent then holds a second reference).
Table& Own(std::shared_ptr<Table>& slot);

// --- editing helpers (by field name) ---
Value& Field(const Schema& s, Table& t, const std::string& name);
const Value& Field(const Schema& s, const Table& t, const std::string& name);
std::shared_ptr<Table> NewTable(const Schema& s, const std::string& qualified_name);
inline Value ScalarValue(reflection::BaseType type, uint64_t bits) {
  Value v;
  v.kind = Value::Kind::kScalar;
  v.type = type;
  v.set_bits(bits);
  return v;
}
Value UIntValue(reflection::BaseType type, uint64_t v);
Value StringValue(std::string s);
Value TableValue(std::shared_ptr<Table> t);
Value OffsetVector(std::vector<Value> elems, reflection::BaseType elem_type);
// An offset vector of `count` elements of `elem_type` (String or Obj) that
// make(i) makes when read: the encoder and MeasureTree make one at a time and
// keep none (a .ptd of 300,000 keys held 67 MB of NamedData tables for its
// encode); elems() makes them all and keeps them. `make` must give the same
// element each time and may be called after this returns.
Value GeneratedVector(size_t count, reflection::BaseType elem_type, std::function<Value(size_t)> make);
// How many elements an offset vector has (made or not).
size_t ElementCount(const Value& v);
// Element `i` of a GeneratedVector, made now and not kept.
Value GeneratedElement(const Value& v, size_t i);
// Calls fn(element) for each element of an offset vector in order: those of
// a GeneratedVector made one at a time, not kept. (A template: the encoder
// walks every vector of a program through it.)
template <typename Fn>
void ForEachElement(const Value& v, Fn&& fn) {
  if (v.generated()) {
    const size_t n = ElementCount(v);
    for (size_t i = 0; i < n; ++i) fn(static_cast<const Value&>(GeneratedElement(v, i)));
    return;
  }
  for (const Value& e : v.elems()) fn(e);
}
Value ScalarVector(reflection::BaseType elem_type, Bytes raw);
// A scalar vector holding a copy of `v` (T must match elem_type's size). The
// bytes are kept in a shared std::string: up to 15 bytes (a tensor's sizes and
// dim order, mostly) sit inside it, one allocation instead of two.
template <typename T>
Value ScalarVectorOf(reflection::BaseType elem_type, const std::vector<T>& v) {
  Value out;
  out.kind = Value::Kind::kScalarVector;
  out.type = elem_type;
  const size_t n = v.size() * sizeof(T);
  if (n == 0) {
    out.set_view(nullptr, 0, nullptr);
    return out;
  }
  auto buf = std::make_shared<const std::string>(reinterpret_cast<const char*>(v.data()), n);
  const auto* data = reinterpret_cast<const uint8_t*>(buf->data());
  out.set_view(data, n, std::move(buf));
  return out;
}
uint64_t AsUInt(const Value& v, uint64_t dflt = 0);
int64_t AsInt(const Value& v, int64_t dflt = 0);
// A scalar's size in bytes (4 for None and the types that are not scalars).
// Inline: the encoder's size estimate asks it for every scalar field.
inline size_t ScalarSize(reflection::BaseType t) {
  // None, UType, Bool, Byte, UByte, Short, UShort, Int, UInt, Long, ULong, Float, Double
  static constexpr uint8_t kBytes[] = {4, 1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8};
  const auto i = static_cast<unsigned>(t);
  return i < sizeof kBytes ? kBytes[i] : 4;
}
// Whether a scalar's raw bits equal the field's default, compared as its C
// type (so -0.0 is 0.0): such a field is left out of the buffer, by this
// encoder and by FlatBuffers' builders.
bool IsDefault(const reflection::Field& f, uint64_t bits);

}  // namespace ptepack::fb
