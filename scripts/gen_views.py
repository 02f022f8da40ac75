#!/usr/bin/env python3
"""Typed views of the reflection tree (fb::Table), generated from a binary schema.

    scripts/gen_views.py SCHEMA.bfbs OUT.h NAMESPACE SCHEMA_FN FLATC_HEADER

Reads the .bfbs that `flatc -b --schema` writes (itself a flatbuffer of
reflection.fbs; read here with a small self-contained reader) and writes, per
table of the schema, a class template NAMESPACE::Table<Tab> (Tab = fb::Table or
const fb::Table) that wraps one tree node:

  - refuses (throws ptepack::Error "internal") a node of another table;
  - Id::field constants (the schema's field ids) and kFields (name, id) pairs;
  - field() -> fb::Value& (const fb::Value& for a const node), for every field;
  - get_field() / set_field(v) for scalars (enums as flatc's scoped enums),
    strings, and scalar vectors (Bytes for [ubyte], std::vector<T> otherwise),
    with the schema's defaults and scalar types;
  - New(): a fresh node of that table.

Run by CMake at build time (like flatc); the output goes to the build's
generated/ directory and is never committed.
"""
import struct
import sys

# reflection.BaseType
NONE, UTYPE, BOOL, BYTE, UBYTE, SHORT, USHORT, INT, UINT, LONG, ULONG, FLOAT, DOUBLE, STRING, VECTOR, OBJ, UNION = range(17)
BASE_NAMES = ["None", "UType", "Bool", "Byte", "UByte", "Short", "UShort", "Int", "UInt", "Long", "ULong", "Float",
              "Double", "String", "Vector", "Obj", "Union"]
CPP_SCALAR = {UTYPE: "uint8_t", BOOL: "bool", BYTE: "int8_t", UBYTE: "uint8_t", SHORT: "int16_t", USHORT: "uint16_t",
              INT: "int32_t", UINT: "uint32_t", LONG: "int64_t", ULONG: "uint64_t", FLOAT: "float", DOUBLE: "double"}
UNSIGNED = {BOOL: "uint8_t", BYTE: "uint8_t", UBYTE: "uint8_t", UTYPE: "uint8_t", SHORT: "uint16_t",
            USHORT: "uint16_t", INT: "uint32_t", UINT: "uint32_t", LONG: "uint64_t", ULONG: "uint64_t"}


class Table:
    """A flatbuffer table: field(i) reads the slot of field id i."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt = vt
        self.vt_size = struct.unpack_from("<H", buf, vt)[0]

    def _off(self, i):
        slot = 4 + 2 * i
        if slot >= self.vt_size:
            return 0
        return struct.unpack_from("<H", self.buf, self.vt + slot)[0]

    def scalar(self, i, fmt, default=0):
        o = self._off(i)
        return default if o == 0 else struct.unpack_from("<" + fmt, self.buf, self.pos + o)[0]

    def _ref(self, i):
        o = self._off(i)
        if o == 0:
            return None
        p = self.pos + o
        return p + struct.unpack_from("<I", self.buf, p)[0]

    def string(self, i):
        p = self._ref(i)
        if p is None:
            return None
        n = struct.unpack_from("<I", self.buf, p)[0]
        return self.buf[p + 4:p + 4 + n].decode()

    def table(self, i):
        p = self._ref(i)
        return None if p is None else Table(self.buf, p)

    def tables(self, i):
        p = self._ref(i)
        if p is None:
            return []
        n = struct.unpack_from("<I", self.buf, p)[0]
        out = []
        for k in range(n):
            e = p + 4 + 4 * k
            out.append(Table(self.buf, e + struct.unpack_from("<I", self.buf, e)[0]))
        return out


def load(path):
    buf = open(path, "rb").read()
    root = Table(buf, struct.unpack_from("<I", buf, 0)[0])
    enums = []
    for e in root.tables(1):  # Schema.enums
        ut = e.table(3)
        enums.append({"name": e.string(0), "is_union": e.scalar(2, "B") != 0,
                      "underlying": ut.scalar(0, "b")})
    objects = []
    for o in root.tables(0):  # Schema.objects
        fields = []
        for f in o.tables(1):  # Object.fields
            t = f.table(1)
            fields.append({
                "name": f.string(0), "id": f.scalar(2, "H"),
                "base": t.scalar(0, "b"), "element": t.scalar(1, "b"), "index": t.scalar(2, "i", -1),
                "default_integer": f.scalar(4, "q"), "default_real": f.scalar(5, "d", 0.0),
                "deprecated": f.scalar(6, "B") != 0,
            })
        fields.sort(key=lambda x: x["id"])
        objects.append({"name": o.string(0), "fields": fields, "is_struct": o.scalar(2, "B") != 0})
    return objects, enums


def cpp_qualified(name):
    return "::" + name.replace(".", "::")


def short(name):
    return name.rsplit(".", 1)[-1]


def field_code(f, objects, enums, schema_fn):
    n, i, b = f["name"], f["id"], f["base"]
    out = [f"  auto& {n}() const {{ return this->at(Id::{n}); }}"]
    if b in CPP_SCALAR:
        enum_type = None
        if f["index"] >= 0:
            enum_type = cpp_qualified(enums[f["index"]]["name"])
        ctype = enum_type or CPP_SCALAR[b]
        base = f"reflection::{BASE_NAMES[b]}"
        if b in (FLOAT, DOUBLE):
            dflt = repr(f["default_real"])
            out.append(f"  {ctype} get_{n}() const {{ return fb::GetFloat<{ctype}>(this->at(Id::{n}), {dflt}); }}")
            out.append(f"  void set_{n}({ctype} v) const {{ this->at(Id::{n}) = fb::FloatValue({base}, v); }}")
        else:
            dflt = f"static_cast<{ctype}>({f['default_integer']}{'LL' if f['default_integer'] < 0 else 'ULL'})"
            if b == BOOL:
                dflt = "true" if f["default_integer"] else "false"
            out.append(f"  {ctype} get_{n}() const {{\n"
                       f"    return fb::GetInt<{ctype}, {UNSIGNED[b]}>(this->at(Id::{n}), {dflt});\n  }}")
            out.append(f"  void set_{n}({ctype} v) const {{\n"
                       f"    this->at(Id::{n}) = fb::IntValue<{UNSIGNED[b]}>({base}, v);\n  }}")
    elif b == STRING:
        out.append(f"  std::string get_{n}() const {{ return this->at(Id::{n}).str(); }}")
        out.append(f"  void set_{n}(std::string v) const {{ this->at(Id::{n}) = fb::StringValue(std::move(v)); }}")
    elif b == VECTOR and f["element"] in CPP_SCALAR:
        e = f["element"]
        base = f"reflection::{BASE_NAMES[e]}"
        if e == UBYTE:
            out.append(f"  Bytes get_{n}() const {{ return this->at(Id::{n}).scalars(); }}")
            out.append(f"  void set_{n}(Bytes v) const {{ this->at(Id::{n}) = fb::ScalarVector({base}, std::move(v)); }}")
        else:
            ctype = "uint8_t" if e == BOOL else CPP_SCALAR[e]
            out.append(f"  std::vector<{ctype}> get_{n}() const {{ return fb::GetVector<{ctype}>(this->at(Id::{n})); }}")
            out.append(f"  void set_{n}(const std::vector<{ctype}>& v) const {{\n"
                       f"    this->at(Id::{n}) = fb::ScalarVectorOf({base}, v);\n  }}")
    return out


def generate(objects, enums, namespace, schema_fn, flatc_header):
    lines = [
        "// Generated by scripts/gen_views.py from a binary schema. Do not edit.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "#include <string>",
        "#include <vector>",
        "",
        f'#include "{flatc_header}"',
        '#include "serialize/format/fbview.h"',
        "",
        f"namespace ptepack::{namespace} {{",
        "",
    ]
    registry = []
    for index, o in enumerate(objects):
        if o["is_struct"]:
            continue
        name = short(o["name"])
        fields = [f for f in o["fields"] if not f["deprecated"]]
        lines.append(f"// {o['name']}")
        lines.append("template <typename Tab = fb::Table>")
        lines.append(f"class {name} : public fb::View<Tab> {{")
        lines.append(" public:")
        lines.append(f'  static constexpr const char* kQualifiedName = "{o["name"]}";')
        lines.append(f"  static constexpr int kObjectIndex = {index};")
        lines.append("  struct Id {")
        for f in fields:
            lines.append(f"    static constexpr uint16_t {f['name']} = {f['id']};")
        lines.append("  };")
        pairs = ", ".join(f'{{"{f["name"]}", {f["id"]}}}' for f in fields)
        lines.append(f"  static constexpr fb::FieldId kFields[] = {{{pairs}}};" if fields else
                     "  static constexpr const fb::FieldId* kFields = nullptr;")
        lines.append(f"  static constexpr size_t kNumFields = {len(fields)};")
        lines.append(f"  static const reflection::Object& Def() {{ return {schema_fn}().ObjectAt(kObjectIndex); }}")
        # One slot per field id, deprecated ones included (what Schema::FieldsById gives).
        slots = max((f["id"] for f in o["fields"]), default=-1) + 1
        lines.append(f"  static constexpr size_t kSlots = {slots};")
        lines.append(f"  static std::shared_ptr<fb::Table> New() {{ return fb::NewTableOf(Def(), kSlots); }}")
        lines.append(f"  explicit {name}(Tab& t) : fb::View<Tab>(t, Def(), kQualifiedName) {{}}")
        for f in fields:
            lines.extend(field_code(f, objects, enums, schema_fn))
        lines.append("};")
        lines.append("template <typename Tab>")
        lines.append(f"{name}(Tab&) -> {name}<Tab>;")
        lines.append("")
        registry.append(f"    {{{name}<>::kQualifiedName, {name}<>::kObjectIndex, "
                        f"{name}<>::kFields, {name}<>::kNumFields, {name}<>::kSlots}},")
    lines.append("// Every table above, for tests that check the generated ids against the schema.")
    lines.append(f"inline const fb::ViewInfo kAllViews[] = {{")
    lines.extend(registry)
    lines.append("};")
    lines.append(f"inline const fb::Schema& ViewSchema() {{ return {schema_fn}(); }}")
    lines.append("")
    lines.append(f"}}  // namespace ptepack::{namespace}")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    bfbs, out, namespace, schema_fn, flatc_header = sys.argv[1:]
    objects, enums = load(bfbs)
    text = generate(objects, enums, namespace, schema_fn, flatc_header)
    try:
        if open(out).read() == text:
            return
    except OSError:
        pass
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
